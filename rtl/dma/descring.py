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
from .descriptor import CONTROL_RESERVED, MAGIC, Descriptor
from .descriptor import control_bits as bits

__all__ = ["DescRing", "RingSignature", "RING_SLOTS", "SLOT_BITS", "SLOT_DWS", "ring_write_layout",
           "ring_done_layout", "note_layout", "follow"]

#: Descriptors a channel's ring holds (one 64-byte slot each), besides its staging register.
RING_SLOTS = 64
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
    before it, so its data reads wait for that fetch)."""
    return data.StructLayout({"ptr": 64, "bad": 1, "big": 1, "end": 1, "grow": 1, "new": 1,
                              "empty": 1, "more": 8})


def malformed(d, ptr=None):
    """Whether descriptor ``d`` is malformed by its own fields and, fetched from ``ptr`` (bit 0:
    the extended format), by its pointers (``ptr`` None: a register-mode slot).  Whether its
    ``next`` is the one right after it, in (or announcing) an adjacent run, is checked apart,
    from what the descriptors before it announced (:meth:`DescRing._note`)."""
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
    out = Const(0, 1)
    for c in checks:
        out = out | c
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
    i_w : In(ArrayLayout(ring_write_layout, 16))
        The banks' writes (registered in the receiver).
    i_done : In(ring_done_layout)
        A slot became complete with this cycle's writes.
    ring : Out(RingSignature)
        To the planner.
    """

    def __init__(self):
        super().__init__({
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
        # a second register ``nxt_b`` waits, so a load finds the next descriptor staged the
        # cycle after (``nxt <= nxt_b``).  A running channel's slot at its read position is
        # picked when the two registers and the slots on their way hold one descriptor at
        # most after this cycle (a load, ``nxt_clear``, frees one now).  Whether that slot is
        # complete is registered (``head_ok``): a cycle stale after a pick, while ``stg1``
        # holds the next pick off, and after the channel starts, while ``started`` does.  A
        # channel that is not running keeps its ring empty (a fetch of a stopped chain may
        # still land there) and both registers invalid, so a start finds them so.  A pick is
        # registered (``stg1``, one-hot, with the slot's address): the banks are read from
        # registers a cycle later (``stg2``), the slot's note is made in the two cycles after
        # (``_note``: ``stg3`` holds it between) and it lands in ``nxt`` (or ``nxt_b`` if that
        # stays full) with its note.  The slot's valid bit is cleared with the read (the slot
        # is not fetched into again before the planner sees it free, from ``pop``, later
        # still).
        stg1 = Signal(NC)
        stg2 = Signal(NC)
        stg3 = Signal(NC)
        stg_slot = Signal(SLOT_BITS)
        cand = Signal(NC)
        picked = Signal(NC)
        head_ok = Signal(NC)
        started = Signal(NC)
        nxt_b = [Signal(Descriptor, name=f"ch{c}_nxt_b") for c in range(NC)]
        note = [Signal(note_layout(), name=f"ch{c}_note") for c in range(NC)]
        note_b = [Signal(note_layout(), name=f"ch{c}_note_b") for c in range(NC)]
        b_valid = Signal(NC)
        m.d.comb += [ring.note[c].eq(note[c]) for c in range(NC)]
        m.d.sync += started.eq(~ring.run)
        for c in range(NC):
            kept = nxt_valid[c] & ~ring.nxt_clear[c]
            # At most one of these is held after this cycle: room for one more.
            held = Cat(kept, b_valid[c], stg1[c], stg2[c], stg3[c])
            one_at_most = Signal(name=f"ring{c}_room")
            m.d.comb += one_at_most.eq(~(held & (held - 1)).any())
            m.d.sync += head_ok[c].eq(valid[c].bit_select(rpos[c], 1))
            m.d.comb += [cand[c].eq(head_ok[c] & ~stg1[c] & one_at_most & ring.run[c]
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
            # nxt after this cycle: nxt_b's if a load takes nxt, else the landing slot if nxt
            # is empty or taken (nxt_b is then empty); the landing slot goes to nxt_b if nxt
            # stays full.
            nxt_free = ~nxt_valid[c] | ring.nxt_clear[c]
            with m.If(ring.nxt_clear[c]):
                m.d.sync += [nxt[c].eq(nxt_b[c]), note[c].eq(note_b[c]),
                             nxt_valid[c].eq(b_valid[c]), b_valid[c].eq(0)]
            with m.If(stg3[c]):
                with m.If(nxt_free & ~b_valid[c]):
                    m.d.sync += [nxt[c].eq(landing), note[c].eq(land_note),
                                 nxt_valid[c].eq(1)]
                with m.Else():
                    m.d.sync += [nxt_b[c].eq(landing), note_b[c].eq(land_note),
                                 b_valid[c].eq(1)]
            with m.If(~ring.run[c]):
                m.d.sync += [valid[c].eq(0), rpos[c].eq(0), nxt_valid[c].eq(0),
                             b_valid[c].eq(0)]
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
            ("adj_gt", 1), ("known", 1), ("eq_lo", 1), ("eq_hi", 1), ("own_bad", 1),
            ("big", 1))}
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
            a["own_bad"].eq(malformed(d, lptr[ch2])),
            a["big"].eq((d.length - 1)[12:].any()),
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
            n.bad.eq(a["own_bad"] | ~end & announced & ~follows),
            n.big.eq(a["big"]), n.end.eq(end), n.grow.eq(~end & a["adj_gt"]),
            n.new.eq(~end & new_run), n.empty.eq(~end & ~a["b_nz"]),
            n.more.eq(adj2 - a["b"]),
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
