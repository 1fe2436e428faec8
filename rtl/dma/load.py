"""The planner's descriptor load and its checks (002 section 3.4).

Functions of :class:`~peach2.dma.planner.Planner`'s ``elaborate``: :func:`load_checks` works out
in CALC the descriptor a WAIT channel loads and whether it is malformed, :func:`load` loads it
in ACT (or reports it malformed, in queue order).  A descriptor that is one read has that read
issued by its load too: :func:`load_read_room` checks its room in CALC, :func:`load_read` is
the read ACT issues.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Mux, Signal

from ..params import N_DMA_CHANNELS, N_DMA_SLOTS, DmaError
from ..util import not_below
from .common import Act, Kind, bits, select
from .credits import fits
from .descring import big, malformed
from .descriptor import Descriptor
from .fetch import fetch_changed

__all__ = ["load_checks", "load", "follow_chain", "consume", "load_read_registers",
           "load_read_room", "load_read"]


def load_checks(m, slots, ch, sel):
    """Return the descriptor a WAIT channel loads and its checks, registered in CALC: ``ld``
    (``desc``, ``bad``, ``ok``, ``big``, ``ptr``, the cases of :func:`follow_chain` and
    ``grow``, ``end``; registered) and this cycle's ``ok_now``, ``bad_now``, ``rows_now`` (the
    rows of the read the load may issue too), and per channel whether its load would be one
    read (``one_of``).

    A staged descriptor comes with its note (:func:`~peach2.dma.descring.note_layout`: its
    checks and what its load means for fetching, worked out by the ring as it came in, from the
    descriptors before it), so CALC only picks it.  A register-mode slot is checked a cycle
    after the register write that changed it (the host's start write comes later than that).
    Once valid, neither the staged descriptor nor the slot number change until that channel's
    next action."""
    n_slots = N_DMA_CHANNELS * N_DMA_SLOTS
    nxt, nxt_valid, note = ch.nxt, ch.nxt_valid, ch.note
    slot_bad = Signal(n_slots, name="slot_bad")
    slot_big = Signal(n_slots, name="slot_big")
    for i in range(n_slots):
        m.d.sync += [slot_bad[i].eq(malformed(slots[i])), slot_big[i].eq(big(slots[i]))]

    regm = ch.regmode[sel]
    idx = Cat(ch.slot[sel][:2], sel)           # 4 * c + s
    names = ("end", "grow", "new", "empty")
    ld = SimpleNamespace(desc=Signal(Descriptor, name="ld_desc"), bad=Signal(name="ld_bad"),
                         ok=Signal(name="ld_ok"), big=Signal(name="ld_big"),
                         ptr=Signal(64, name="ld_ptr"), grow=Signal(8, name="ld_grow"),
                         end=Signal(name="ld_end"),
                         **{f"case_{n}": Signal(name=f"ld_case_{n}") for n in names})
    # Malformed: per channel first (its slot's check, or its staged descriptor's), then the
    # selected channel's (the channel multiplexer last, not a 16-way one behind the slot's).
    bad_of = []
    for c in range(N_DMA_CHANNELS):
        bad = Signal(name=f"ch{c}_ld_bad", attrs={"keep": 1})     # (else a chain of them)
        m.d.comb += bad.eq(Mux(ch.regmode[c],
                               select(slot_bad[c * N_DMA_SLOTS:(c + 1) * N_DMA_SLOTS],
                                      ch.slot[c][:2]),
                               note[c].bad))
        bad_of.append(bad)
    ld.bad_now = select(bad_of, sel)
    # Something to load: a register-mode slot (in a queue, one appended and not loaded yet),
    # or a staged descriptor.
    ok_of = []
    for c in range(N_DMA_CHANNELS):
        ok = Signal(name=f"ch{c}_ld_ok")
        left = Mux(ch.closed_d[c], ch.has_after[c], ch.has_slot[c])
        m.d.comb += ok.eq(Mux(ch.regmode[c], ~ch.queue[c] | left, nxt_valid[c]))
        ok_of.append(ok)
    ld.ok_now = select(ok_of, sel)
    # Which case the load is (see follow_chain), from the staged descriptor's note: each case
    # per channel first (a good staged descriptor, not register mode: the slots' checks stay
    # out of these), then the selected channel's.
    cases = {n: [] for n in names}
    ld.one_of = []
    for c in range(N_DMA_CHANNELS):
        good = Signal(name=f"ch{c}_ld_good", attrs={"keep": 1})
        m.d.comb += good.eq(~ch.regmode[c] & nxt_valid[c] & ~note[c].bad)
        nc = note[c]
        # The load may issue the descriptor's only read too (planner, ``_act``): a good staged
        # descriptor that is one read, unless nothing is known to follow it (its next's fetch
        # then goes first, ``fwait``).
        one = Signal(name=f"ch{c}_ld_one", attrs={"keep": 1})   # (the room check's one input)
        m.d.comb += one.eq(good & nc.one & ~nc.empty)
        ld.one_of.append(one)
        for n, v in (("end", nc.end), ("grow", nc.grow), ("new", nc.new), ("empty", nc.empty)):
            case = Signal(name=f"ch{c}_ld_{n}")
            m.d.comb += case.eq(good & v)
            cases[n].append(case)
    notes = [note[c] for c in range(N_DMA_CHANNELS)]
    m.d.sync += [*(getattr(ld, f"case_{n}").eq(select(v, sel)) for n, v in cases.items()),
                 ld.ptr.eq(select([n.ptr for n in notes], sel)),
                 ld.grow.eq(select([n.more for n in notes], sel)),
                 ld.end.eq(select([n.end for n in notes], sel))]
    ld.rows_now = select([n.rows for n in notes], sel)
    m.d.sync += [
        ld.big.eq(Mux(regm, select(slot_big, idx), select([n.big for n in notes], sel))),
        ld.desc.eq(Mux(regm, slots[idx], nxt[sel])),
        ld.bad.eq(ld.bad_now), ld.ok.eq(ld.ok_now),
    ]
    return ld


def load_read_registers(m, k, rb):
    """The registers of a load's read, CALC's for ACT, into ``k`` (registered every cycle: only
    a LOAD's ACT looks at them): per channel whether ACT's load issues the descriptor's only
    read (``k.loading``, one-hot), whether the selected one does (``k.ld_one``), and the read's
    rows and credits."""
    k.loading = [Signal(name=f"k_loading{c}") for c in range(N_DMA_CHANNELS)]
    k.ld_rows = Signal(rb + 1, name="k_ld_rows")
    k.ld_hdr, k.ld_dat = Signal(5, name="k_ld_hdr"), Signal(7, name="k_ld_dat")
    k.ld_one = Signal(name="k_ld_one")


def load_read_room(m, ch, k, room, iss, tags_now):
    """Whether the load also issues the descriptor's only read (for ACT, worked out in CALC,
    and in every other cycle too), with room for it checked here (ACT looks only at the read-request skid): the rows and credits left now (``room``,
    the booking's counters), less the last issue ``iss`` (booked now, or before and already
    counted: too strict by one read then); ACT comes before the next issue, and releases only
    add room meanwhile.  A tag (``tags_now``) and queue room are needed too."""
    sel = k.sel
    ld_rows = Signal(len(k.ld_rows), name="c_ld_rows")
    ld_hdr, ld_dat = Signal(5, name="c_ld_hdr"), Signal(7, name="c_ld_dat")
    m.d.comb += [ld_rows.eq(k.ld.rows_now),
                 ld_hdr.eq(select([n.hdr for n in ch.note], sel)),
                 ld_dat.eq(select([n.dat for n in ch.note], sel))]
    # (per channel, the channel multiplexer last).  The rows: the read's and this cycle's
    # issue's, at most the free rows (``free_less`` is less the buffer's, a power of two: its
    # top bit flipped is the count, and that NOT runs beside the first chain), two carry
    # chains.  The rows are taken off whether it is booked now or was the last one
    # (they are kept until the next): too strict by at most one read when the buffer is
    # nearly full, and then the load runs as any load and a later action issues the read
    # (checked exactly).
    fl = room.free_less
    free = Cat(fl[:-1], ~fl[-1])
    room_of = []
    for c in range(N_DMA_CHANNELS):
        n = ch.note[c]
        # (nets of their own: the mapping otherwise puts CALC's decode between the chains)
        need = Signal(max(len(n.rows), len(iss.rows)) + 1, name=f"ch{c}_ld_need",
                      attrs={"keep": 1})
        m.d.comb += need.eq(n.rows + iss.rows)
        # The credits likewise: the read's and the last issue's, within the credits left (a
        # cycle old, so the last issue's may not be in them yet).
        hdr_need = Signal(len(n.hdr) + 1, name=f"ch{c}_ld_hdr_need", attrs={"keep": 1})
        dat_need = Signal(len(n.dat) + 1, name=f"ch{c}_ld_dat_need", attrs={"keep": 1})
        m.d.comb += [hdr_need.eq(n.hdr + iss.hdr), dat_need.eq(n.dat + iss.dat)]
        # The channel's load issues the read if it is one read and it fits.
        fit = Signal(name=f"ch{c}_ld_room", attrs={"keep": 1})
        m.d.comb += fit.eq(k.ld.one_of[c] & not_below(free, need)
                           & (room.hdr_free | fits(hdr_need, room.room_hdr))
                           & (room.dat_free | fits(dat_need, room.room_dat)))
        room_of.append(fit)
    m.d.sync += [v.eq((k.acts[c] == Act.LOAD) & (sel == c) & room_of[c] & tags_now & k.q_room)
                 for c, v in enumerate(k.loading)]
    m.d.sync += [k.ld_one.eq(select(room_of, sel) & tags_now & k.q_room),
                 k.ld_rows.eq(ld_rows), k.ld_hdr.eq(ld_hdr), k.ld_dat.eq(ld_dat)]


def load_read(k):
    """The read a load issues (ACT, when ``k.ld_one``): the planner's ``issue_read``'s
    arguments, the whole descriptor as one read."""
    ld = k.ld
    return {"raddr": ld.desc.src, "nbytes_": ld.desc.length[:13], "rows": k.ld_rows,
            "kind": Kind.DATA, "credits": (k.ld_hdr, k.ld_dat), "addr": ld.desc.dst,
            "desc": Cat(Const(0, 5), ld.ptr[5:])}


def consume(m, ch, sel, ld, do_load):
    """Channel ``sel``'s staged descriptor is loaded (``nxt_valid`` falls next cycle): ACT of a
    LOAD (``do_load``) of a whole descriptor that is not malformed.  Per channel, as nets of
    their own, outside the planner's state machine (``do_load`` is held for ACT only): the
    mapping otherwise chains the state's decode, the checks and the channel compare in
    two-input LUTs in front of the rings' staging registers (a level more)."""
    for c in range(N_DMA_CHANNELS):
        clear = Signal(name=f"ch{c}_nxt_clear", attrs={"keep": 1})
        m.d.comb += [clear.eq(do_load & ld.ok & ~ld.bad & (sel == c)),
                     ch.nxt_clear[c].eq(clear)]


def load(m, ch, sel, ld, push, room):
    """ACT of a LOAD: make ``ld`` channel ``sel``'s current descriptor, or push a FAULT entry
    (with ``room`` in the queue) if it is malformed; nothing if CALC saw it incomplete."""
    regm = ch.regmode[sel]
    d = ld.desc
    ext = bits(d.control, "ext")
    ptr = ld.ptr
    with m.If(~ld.ok):      # CALC saw the prefetch buffer still arriving: next time
        pass
    with m.Elif(ld.bad):
        # Reported in order, behind the earlier descriptors' writes (a FAULT entry).
        here = Mux(regm, ch.slot[sel][:2], Cat(Const(0, 5), ptr[5:]))
        push(Kind.FAULT, room, code=DmaError.DESC_MALFORMED, desc=here)
        with m.If(room):
            m.d.sync += ch.cur_addr[sel].eq(here)
    with m.Else():
        m.d.sync += [
            ch.cur[sel].eq(d),
            ch.cur[sel].count.eq(Mux(ext, d.count, 1)),
            ch.sgap1[sel].eq(Mux(ext, d.src_gap, 0) + 1),
            ch.dgap1[sel].eq(Mux(ext, d.dst_gap, 0) + 1),
            ch.cur_addr[sel].eq(Mux(regm, ch.slot[sel][:2], Cat(Const(0, 5), ptr[5:]))),
            ch.cur_src[sel].eq(d.src),
            ch.cur_dst[sel].eq(d.dst),
            ch.brem_m1[sel].eq(d.length - 1),
            ch.bbig[sel].eq(ld.big), ch.lbig[sel].eq(ld.big),
            ch.bleft[sel].eq(Mux(ext, d.count, 1)),
            # (a queue's slot is never the last: the channel waits for appends, or a stop)
            ch.last_pre[sel].eq(Mux(regm, ch.slot_last[sel] & ~ch.queue[sel],
                                    bits(d.control, "end"))),
        ]


def follow_chain(m, ch, sel, ld):
    """After a load: what to fetch (``docs/dma.md``, "Descriptors are fetched in blocks").  The
    descriptors known to follow the one loaded are the most of those known from the ones before
    and its ``adj``; the ones its ``adj`` adds are fetched from where fetching stands (right
    after the last known one).  With none known, ``next`` is fetched alone.  What it means for
    fetching is applied a cycle later (:func:`~peach2.dma.fetch.fetch_plan`); which case it is,
    the ring worked out as the descriptor came in and CALC picked (``ld.case_*``, none for a
    load ACT does not do: incomplete, malformed, register mode).  Called for a LOAD's ACT,
    outside the state machine (``k.do`` is only set for ACT)."""
    m.d.sync += [ch.fgrow[sel].eq(ld.grow), ch.fnew[sel].eq(ld.desc.next)]
    for c in range(N_DMA_CHANNELS):
        with m.If(sel == c):
            m.d.sync += [ch.fgrow_en[c].eq(ld.case_grow), ch.fnew_en[c].eq(ld.case_new),
                         ch.fstop_en[c].eq(ld.case_end)]
            with m.If(ld.case_end | ld.case_grow | ld.case_new):
                fetch_changed(m, ch, c)
            # Nothing known after the previous one: the ring holds nothing of this chain,
            # and the next descriptor's fetch goes before this one's data reads.
            with m.If(ld.case_empty):
                m.d.sync += ch.fwait[c].eq(1)
