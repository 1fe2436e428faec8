"""The channels' descriptor rings: descriptors fetched in blocks wait here to be loaded.

002 section 3.4 fetches one descriptor at a time ("linked by pointers"), so a chain of short
transfers ran at one host read round trip per descriptor.  Here a chain announces its adjacent
runs (``control.adj``, :mod:`peach2.dma.descriptor`) and the planner fetches up to
``min(MRRS, 512)`` bytes of descriptors with one read; the receiver writes them into the
fetching channel's ring, and the ring hands them one at a time to the channel's staging
register (the ``nxt`` the planner loads from, checked ahead as before), with one more waiting
behind it.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..params import N_DMA_CHANNELS
from ..util import not_below
from .credits import cpl_credits, rows_for
from .descriptor import CONTROL_RESERVED, MAGIC, Descriptor
from .descriptor import control_bits as bits

__all__ = ["DescRing", "RingSignature", "RING_SLOTS", "SLOT_BITS", "SLOT_DWS", "ring_write_layout",
           "ring_done_layout", "note_layout", "follow", "malformed", "big"]

#: Descriptors a channel's ring holds (one 64-byte slot each), besides its staging register.
RING_SLOTS = 64
#: Descriptors staged for loading besides the ring's slots (``nxt`` and the ones behind it).
STAGED = 4
_BEHIND = "bcdefg"[:STAGED - 1]
#: DWs of a slot: bank ``j`` of the ring holds DW ``j`` of every slot's descriptor.
SLOT_DWS = 16
#: Bits of a slot index.
SLOT_BITS = (RING_SLOTS - 1).bit_length()
_AB = SLOT_BITS + (N_DMA_CHANNELS - 1).bit_length()


def ring_write_layout():
    """One bank's write (DW ``j`` of a slot): the slot as ``Cat(slot, channel)``, the DW."""
    return data.StructLayout({"en": 1, "addr": _AB, "data": 32})


def follow(ptr):
    """The pointer to the descriptor right after the one ``ptr`` points to (same size)."""
    return Cat(ptr[0], Const(0, 4), ptr[5:] + 1 + ptr[0])[:64]


def note_layout():
    """What the ring worked out about a staged descriptor as it came in (its *note*), in chain
    order, from the descriptors before it (``docs/dma.md``, "Descriptors are fetched in
    blocks"): ``ptr``, its own pointer; ``bad``, malformed (:func:`malformed`); ``big``, its
    burst length less 1 is 4096 or more; what its load means for fetching: ``end`` (the chain
    ends), ``grow`` (its ``adj`` announces ``more`` descriptors beyond those known), ``new``
    (nothing known follows it: ``next`` starts a run of one), ``empty`` (none known from the ones
    before it, so its data reads wait for that fetch); and whether it is ``one`` read (a single
    burst that the planner's chunking would not cut: at most MRRS, within the source's 4 KiB
    page, ending on or before the destination's ``min(MPS, MRRS)`` boundary), with that read's
    buffer ``rows`` and completion credits (``hdr``, ``dat``), so its load can issue it."""
    return data.StructLayout({"ptr": 64, "bad": 1, "big": 1, "end": 1, "grow": 1, "new": 1,
                              "empty": 1, "more": 8, "one": 1, "rows": 9, "hdr": 5, "dat": 7})


def big(d):
    """Whether descriptor ``d``'s burst length less 1 is 4096 or more (the planner's ``bbig``)."""
    return (d.length - 1)[12:].any()


def malformed(d, ptr=None, split=False):
    """Whether descriptor ``d`` is malformed by its own fields and, fetched from ``ptr`` (bit 0:
    the extended format), by its pointers (``ptr`` None: a register-mode slot).  Whether its
    ``next`` is the one right after it, in (or announcing) an adjacent run, is checked apart,
    from what the descriptors before it announced (:meth:`DescRing._note`).  With ``split``,
    the list of checks, one value each."""
    ctl = d.control
    ext = bits(ctl, "ext")
    checks = [
        bits(ctl, "magic") != MAGIC,
        (ctl & CONTROL_RESERVED).any(),
        d.length == 0,
        ext & (d.count == 0),
        ext & (d.reserved != 0),
        bits(ctl, "seq") & (~ext | d.seq_addr[:2].any()),
    ]
    if ptr is not None:
        # Not the last: ``next`` has bits [4:1] clear and a 64-byte descriptor's is 64-byte
        # aligned.
        checks += [ext != ptr[0],
                   ~bits(ctl, "end") & (d.next[1:5].any() | (d.next[0] & d.next[5]))]
    return checks if split else _any(checks)


def _any(values):
    out = Const(0, 1)
    for v in values:
        out = out | v
    return out


def ring_done_layout():
    """A slot's descriptor is complete (its last DW was written with this cycle's writes)."""
    return data.StructLayout({"en": 1, "chan": 2, "slot": SLOT_BITS})


class RingSignature(wiring.Signature):
    """Between the rings and the planner (from the rings' side).

    Members
    -------
    nxt : Out(ArrayLayout(Descriptor, 4)) ; nxt_valid : Out(4)
        Per channel: the staging register (the next descriptor to load) and whether it holds
        one.
    note : Out(ArrayLayout(note_layout(), 4))
        Per channel: the staged descriptor's note (valid with ``nxt_valid``).
    pop : Out(4)
        Per channel: a slot was handed to the staging register (the ring has room for one more;
        a one-cycle strobe).
    nxt_clear : In(4)
        Per channel: the planner loaded the staged descriptor (``nxt_valid`` falls).
    run : In(4)
        Per channel: running a chain (WAIT or RUN); otherwise its ring and staging register
        are held empty, so a start finds them so.
    init : In(4) ; init_ptr : In(64) ; init_ann : In(6)
        The cycle after a chained start of a channel (one at a time): the head's pointer and
        the descriptors the start announces after it.
    """

    def __init__(self):
        nc = N_DMA_CHANNELS
        super().__init__({
            "nxt":       Out(data.ArrayLayout(Descriptor, nc)),
            "nxt_valid": Out(nc),
            "note":      Out(data.ArrayLayout(note_layout(), nc)),
            "pop":       Out(nc),
            "nxt_clear": In(nc),
            "run":       In(nc),
            "init":      In(nc),
            "init_ptr":  In(64),
            "init_ann":  In(6),
        })


class DescRing(wiring.Component):
    """Four rings of :data:`RING_SLOTS` descriptor slots (64 bytes each, one per descriptor of
    either size), in sixteen 32-bit banks, and the four pairs of staging registers behind them.

    The receiver writes a fetch's DWs (slot ``base + k // dpd``, bank ``k % dpd`` for DW ``k``
    of the fetch, ``dpd`` 8 or 16 DWs a descriptor) and marks a slot complete with its last DW.
    A channel's slots are loaded in ring order: when its two staging registers have room and
    the slot at its read position is complete, the slot is read (one channel a cycle, the
    lowest first) and lands two cycles later; the slot is free again (``pop``).  The
    planner reserves slots when it issues a fetch (it counts the free ones from ``pop``), so a
    fetch always has room.

    Members
    -------
    mrrs_m1, min_mask : In(10)
        As the planner's (configuration: they change only while every channel is idle).
    i_w : In(ArrayLayout(ring_write_layout, 16))
        The banks' writes (registered in the receiver).
    i_done : In(ring_done_layout)
        A slot became complete with this cycle's writes.
    ring : Out(RingSignature)
        To the planner.
    """

    def __init__(self):
        super().__init__({
            "mrrs_m1":  In(10),
            "min_mask": In(10),
            "i_w":    In(data.ArrayLayout(ring_write_layout(), SLOT_DWS)),
            "i_done": In(ring_done_layout()),
            "ring":   Out(RingSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        NC, S = N_DMA_CHANNELS, RING_SLOTS
        valid = Array([Signal(S, name=f"ring{c}_valid") for c in range(NC)])
        rpos = Array([Signal(SLOT_BITS, name=f"ring{c}_rpos") for c in range(NC)])
        nxt = Array([Signal(Descriptor, name=f"ch{c}_nxt") for c in range(NC)])
        nxt_valid = Signal(NC)
        ring = self.ring
        m.d.comb += [ring.nxt[c].eq(nxt[c]) for c in range(NC)]
        m.d.comb += ring.nxt_valid.eq(nxt_valid)

        # The banks.
        rdata = []
        raddr = Signal(_AB)
        for j in range(SLOT_DWS):
            mem = Memory(shape=32, depth=NC * S, init=[])
            m.submodules[f"bank{j}"] = mem
            wp, rp = mem.write_port(), mem.read_port()
            w = self.i_w[j]
            m.d.comb += [wp.addr.eq(w.addr), wp.data.eq(w.data), wp.en.eq(w.en),
                         rp.addr.eq(raddr), rp.en.eq(1)]
            rdata.append(rp.data)

        # A slot becomes complete (the receiver's writes of it land in this cycle).
        done = self.i_done
        with m.If(done.en):
            for c in range(NC):
                with m.If(done.chan == c):
                    m.d.sync += valid[c].bit_select(done.slot, 1).eq(1)

        # Staging: one slot a cycle toward a channel's staging register ``nxt``, behind which
        # more wait (``nxt_b`` ...: a queue of ``STAGED``), so a load finds the next
        # descriptor staged the cycle after.  A running channel's slot at its read position is
        # picked when the staging registers and the slots on their way held fewer than
        # ``STAGED`` descriptors a cycle ago.  Whether that slot is
        # complete is registered (``head_ok``): a cycle stale after a pick, while ``stg1``
        # holds the next pick off, and after the channel starts, while ``started`` does.  A
        # channel that is not running keeps its ring empty (a fetch of a stopped chain may
        # still land there) and its registers invalid, so a start finds them so.  A pick is
        # registered (``stg1``, one-hot, with the slot's address): the banks are read from
        # registers a cycle later (``stg2``), the slot's note is made in the two cycles after
        # (``_note``: ``stg3`` holds it between) and it lands with its note in the first
        # register left free.  The slot's valid bit is cleared with the read (the slot is not
        # fetched into again before the planner sees it free, from ``pop``, later still).
        stg1 = Signal(NC)
        stg2 = Signal(NC)
        stg3 = Signal(NC)
        stg_slot = Signal(SLOT_BITS)
        cand = Signal(NC)
        picked = Signal(NC)
        head_ok = Signal(NC)
        started = Signal(NC)
        # The queue behind ``nxt``: position 0 is ``nxt`` itself (valid bits contiguous from 0).
        queue = [[nxt[c]] + [Signal(Descriptor, name=f"ch{c}_nxt_{x}") for x in _BEHIND]
                 for c in range(NC)]
        note = [Signal(note_layout(), name=f"ch{c}_note") for c in range(NC)]
        notes = [[note[c]] + [Signal(note_layout(), name=f"ch{c}_note_{x}") for x in _BEHIND]
                 for c in range(NC)]
        qv = [[nxt_valid[c]] + [Signal(name=f"ch{c}_{x}_valid") for x in _BEHIND]
              for c in range(NC)]
        m.d.comb += [ring.note[c].eq(note[c]) for c in range(NC)]
        m.d.sync += started.eq(~ring.run)
        for c in range(NC):
            # Fewer than STAGED of these were held a cycle ago: room for one more now, unless
            # the channel picked then (``stg1`` holds this pick off), as loads only make room.
            held = Cat(*qv[c], stg1[c], stg2[c], stg3[c])
            two_at_most = Signal(name=f"ring{c}_room")
            m.d.sync += two_at_most.eq(sum(held[i] for i in range(len(held))) < STAGED)
            m.d.sync += head_ok[c].eq(valid[c].bit_select(rpos[c], 1))
            m.d.comb += [cand[c].eq(head_ok[c] & ~stg1[c] & two_at_most & ring.run[c]
                                    & ~started[c]),
                         picked[c].eq(cand[c] & ~(cand & ((1 << c) - 1)).any())]
        pick = Signal(2)
        for c in reversed(range(NC)):
            with m.If(cand[c]):
                m.d.comb += pick.eq(c)
        m.d.sync += [stg1.eq(picked), stg2.eq(stg1), stg3.eq(stg2), stg_slot.eq(rpos[pick]),
                     raddr.eq(Cat(rpos[pick], pick)), ring.pop.eq(picked)]
        # The picked channel's number, registered along (for the note's first step).
        chan1, chan2 = Signal(2, name="stg1_chan"), Signal(2, name="stg2_chan")
        m.d.sync += [chan1.eq(pick), chan2.eq(chan1)]
        landing, land_note = self._note(m, Cat(*rdata), stg2, chan2)
        for c in range(NC):
            with m.If(picked[c]):
                m.d.sync += rpos[c].eq(rpos[c] + 1)
            with m.If(stg1[c]):
                m.d.sync += valid[c].bit_select(stg_slot, 1).eq(0)
            # A load takes position 0: the ones behind move up; the landing slot goes to the
            # first position free after that.
            v, clear = qv[c], ring.nxt_clear[c]
            with m.If(clear):
                for i in range(STAGED - 1):
                    m.d.sync += [queue[c][i].eq(queue[c][i + 1]), notes[c][i].eq(notes[c][i + 1]),
                                 v[i].eq(v[i + 1])]
                m.d.sync += v[STAGED - 1].eq(0)
            for i in range(STAGED):
                # Free after the move: position i (its valid bit, or the one behind it's).
                free_i = Mux(clear, ~v[i + 1] if i < STAGED - 1 else 1, ~v[i])
                first = free_i if i == 0 else free_i & ~Mux(clear, ~v[i], ~v[i - 1])
                with m.If(stg3[c] & first):
                    m.d.sync += [queue[c][i].eq(landing), notes[c][i].eq(land_note), v[i].eq(1)]
            with m.If(~ring.run[c]):
                m.d.sync += [valid[c].eq(0), rpos[c].eq(0), *(x.eq(0) for x in v)]
        return m

    def _note(self, m, raw, stg2, ch2):
        """A slot's note, in chain order (:func:`note_layout`): two register steps from the
        banks' data (``raw``, of channel ``ch2`` in the cycle of ``stg2``) and the channel's chain
        registers, which
        the second step leaves as the planner's load of this descriptor will (what is known to
        follow it, where the next one is).  A channel's slots come at least two cycles apart
        (``stg1`` holds a pick off for a cycle), so each slot's first step sees the registers
        the one before it left.  Returns the descriptor (registered, with ``stg3``) and its
        note (worked out from registers in that cycle, to land with it).

        The chain registers (per channel, set by a start's ``init``): ``lptr``, the pointer of
        the next descriptor to come; ``lfollow``, the one right after it; ``ahead``, the
        descriptors known to follow the last one that came (``gt1``: 2 or more, so some are
        known to follow the next one)."""
        NC, ring = N_DMA_CHANNELS, self.ring
        lptr = Array([Signal(64, name=f"ch{c}_lptr") for c in range(NC)])
        lfollow = Array([Signal(64, name=f"ch{c}_lfollow") for c in range(NC)])
        ahead = Array([Signal(8, name=f"ch{c}_ahead") for c in range(NC)])
        gt1 = Array([Signal(name=f"ch{c}_ahead_gt1") for c in range(NC)])
        d = data.View(Descriptor, raw)
        # Step 1 (the slot as read): its own checks and the compares with the chain registers.
        a = {name: Signal(shape, name=f"note_{name}") for name, shape in (
            ("d", Descriptor), ("chan", 2), ("ptr", 64), ("lfollow", 64), ("f_lf", 64),
            ("f_next", 64), ("b", 8), ("b_nz", 1), ("b_gt1", 1), ("adj_gt1", 1),
            ("adj_gt", 1), ("known", 1), ("eq_lo", 1), ("eq_hi", 1), ("big", 1),
            ("single", 1), ("len_m1", 13), ("lim0", 10), ("lim1", 10), ("lim2", 12),
            ("rows", 9), ("hdr", 5), ("dat", 7))}
        # (its own checks registered apart: no wide OR right behind the banks' read)
        own = malformed(d, lptr[ch2], split=True)
        a["own"] = Signal(len(own), name="note_own")
        ahead_c, adj = ahead[ch2], bits(d.control, "adj")
        m.d.sync += [
            a["d"].eq(raw), a["chan"].eq(ch2), a["ptr"].eq(lptr[ch2]),
            a["lfollow"].eq(lfollow[ch2]), a["f_lf"].eq(follow(lfollow[ch2])),
            a["f_next"].eq(follow(d.next)),
            a["b"].eq(Mux(ahead_c == 0, 0, ahead_c - 1)), a["b_nz"].eq(ahead_c[1:].any()),
            a["b_gt1"].eq(ahead_c > 2), a["adj_gt1"].eq(adj[1:].any()),
            # (adj > b, from ahead itself: adj >= ahead, and adj > 0 when ahead is 0.)
            a["adj_gt"].eq(not_below(adj, ahead_c) & adj.any()),
            a["known"].eq(gt1[ch2]),
            a["eq_lo"].eq(d.next[:32] == lfollow[ch2][:32]),
            a["eq_hi"].eq(d.next[32:] == lfollow[ch2][32:]),
            a["own"].eq(Cat(*own)),
            a["big"].eq(big(d)),
        ]
        # One read: the planner's chunk of its only burst would be the whole burst (the rest
        # wins ties with the three limits, as in the planner's CALC; compared in step 2).
        len_m1 = (d.length - 1)[:32]
        lim = [self.mrrs_m1 ^ (d.dst[:10] & self.min_mask), self.mrrs_m1 ^ d.src[:2],
               ~d.src[:12]]
        single = ~bits(d.control, "ext") | (d.count == 1)
        hdr, dat = cpl_credits(d.src, len_m1[:12])
        m.d.sync += [
            a["single"].eq(single), a["len_m1"].eq(Cat(len_m1[:12], len_m1[12:].any())),
            a["lim0"].eq(lim[0]), a["lim1"].eq(lim[1]), a["lim2"].eq(lim[2]),
            a["rows"].eq(rows_for(d.src[:2], len_m1[:12])),
            a["hdr"].eq(hdr), a["dat"].eq(dat),
        ]
        # Step 2: whether it is malformed, what its load means for fetching, and the chain
        # registers after it (for a malformed one or the chain's end they no longer matter:
        # the chain stops there).
        ad = data.View(Descriptor, a["d"])
        end, adj2 = bits(ad.control, "end"), bits(ad.control, "adj")
        announced = a["known"] | adj2.any()
        follows = a["eq_lo"] & a["eq_hi"]
        new_run = ~a["adj_gt"] & ~a["b_nz"]
        n = Signal(note_layout(), name="note_out")
        m.d.comb += [
            n.ptr.eq(a["ptr"]),
            n.bad.eq(a["own"].any() | ~end & announced & ~follows),
            n.big.eq(a["big"]), n.end.eq(end), n.grow.eq(~end & a["adj_gt"]),
            n.new.eq(~end & new_run), n.empty.eq(~end & ~a["b_nz"]),
            n.more.eq(adj2 - a["b"]),
            n.one.eq(a["single"] & ~a["len_m1"][12]
                     & not_below(Cat(a["lim0"], Const(0, 2)), a["len_m1"][:12])
                     & not_below(Cat(a["lim1"], Const(0, 2)), a["len_m1"][:12])
                     & not_below(a["lim2"], a["len_m1"][:12])),
            n.rows.eq(a["rows"]), n.hdr.eq(a["hdr"]), n.dat.eq(a["dat"]),
        ]
        a_valid = Signal(name="note_valid")
        m.d.sync += a_valid.eq(stg2.any())
        for c in range(NC):
            with m.If(a_valid & (a["chan"] == c)):
                m.d.sync += [
                    lptr[c].eq(Mux(new_run, ad.next, a["lfollow"])),
                    lfollow[c].eq(Mux(new_run, a["f_next"], a["f_lf"])),
                    ahead[c].eq(Mux(a["adj_gt"], adj2, Mux(a["b_nz"], a["b"], 0))),
                    gt1[c].eq(Mux(a["adj_gt"], a["adj_gt1"], a["b_nz"] & a["b_gt1"])),
                ]
        # A start (after the updates: it wins over a slot of the chain before still on its
        # way), as if the one before the head had announced one more.
        for c in range(NC):
            with m.If(ring.init[c]):
                m.d.sync += [lptr[c].eq(ring.init_ptr), lfollow[c].eq(follow(ring.init_ptr)),
                             ahead[c].eq(ring.init_ann + 1), gt1[c].eq(ring.init_ann != 0)]
        return a["d"], n
