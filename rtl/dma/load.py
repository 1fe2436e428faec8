"""The planner's descriptor load and its checks (002 section 3.4).

Functions of :class:`~peach2.dma.planner.Planner`'s ``elaborate``: :func:`load_checks` works out
in CALC the descriptor a WAIT channel loads and whether it is malformed, :func:`load` loads it
in ACT (or reports it malformed, in queue order).
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Mux, Signal

from ..params import N_DMA_CHANNELS, N_DMA_SLOTS, DmaError
from .common import Kind, bits, select
from .descriptor import CONTROL_RESERVED, MAGIC, Descriptor

__all__ = ["load_checks", "load", "clear_prefetch"]


def _malformed(d, regm, ptr=None):
    """Whether descriptor ``d`` is malformed (from a register-mode slot, or fetched from
    ``ptr``, whose bit 0 says it is the extended format)."""
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
    if not regm:
        checks += [ext != ptr[0], ~bits(ctl, "end") & d.next[1:5].any()]
    out = Const(0, 1)
    for c in checks:
        out = out | c
    return out


def _big(d):
    """Whether the burst length less 1 is 4096 or more (the planner's ``bbig``)."""
    return (d.length - 1)[12:].any()


def load_checks(m, slots, ch, sel):
    """Return the descriptor a WAIT channel loads and its checks, registered in CALC, with
    whether they were taken from a complete descriptor: ``ld`` (``desc``, ``bad``, ``ok``,
    ``big``, registered) and this cycle's ``ok_now``, ``bad_now``.

    The checks are worked out a cycle ahead, for every register-mode slot (``slots``) and every
    channel's prefetch buffer, so CALC only picks one.  A prefetch buffer counts as complete
    once it has been valid for a cycle (its checks then describe its final contents); a slot
    is checked a cycle after the register write that changed it, and the host's start write
    comes later than that.

    A channel can be picked in its MARK action, while still in RUN, and reach CALC in WAIT
    with its prefetch still arriving: the buffer then holds part of the old descriptor, and
    becomes valid only after CALC.  ACT loads only what CALC saw valid (``ok``; the channel is
    picked again otherwise).  Once valid, neither the buffer nor the slot number change until
    that channel's next action."""
    n_slots = N_DMA_CHANNELS * N_DMA_SLOTS
    nxt, nxt_valid, nxt_ptr = ch.nxt, ch.nxt_valid, ch.nxt_ptr
    slot_bad = Signal(n_slots, name="slot_bad")
    nxt_bad = Signal(N_DMA_CHANNELS, name="nxt_bad")
    nxt_seen = Signal(N_DMA_CHANNELS, name="nxt_seen")    # nxt_valid a cycle ago
    slot_big = Signal(n_slots, name="slot_big")
    nxt_big = Signal(N_DMA_CHANNELS, name="nxt_big")
    for i in range(n_slots):
        m.d.sync += [slot_bad[i].eq(_malformed(slots[i], regm=True)),
                     slot_big[i].eq(_big(slots[i]))]
    for c in range(N_DMA_CHANNELS):
        m.d.sync += [nxt_bad[c].eq(_malformed(nxt[c], regm=False, ptr=nxt_ptr[c])),
                     nxt_big[c].eq(_big(nxt[c])), nxt_seen[c].eq(nxt_valid[c])]

    regm = ch.regmode[sel]
    idx = Cat(ch.slot[sel][:2], sel)           # 4 * c + s
    ld = SimpleNamespace(desc=Signal(Descriptor, name="ld_desc"), bad=Signal(name="ld_bad"),
                         ok=Signal(name="ld_ok"), big=Signal(name="ld_big"))
    ld.bad_now = Mux(regm, select(slot_bad, idx), select(nxt_bad, sel))
    ld.ok_now = regm | (nxt_valid[sel] & select(nxt_seen, sel))
    m.d.sync += [
        ld.big.eq(Mux(regm, select(slot_big, idx), select(nxt_big, sel))),
        ld.desc.eq(Mux(regm, slots[idx], nxt[sel])),
        ld.bad.eq(ld.bad_now), ld.ok.eq(ld.ok_now),
    ]
    return ld


def clear_prefetch(m, ch, sel):
    """Restart channel ``sel``'s prefetch buffer (``nxt_valid`` falls next cycle)."""
    for c in range(N_DMA_CHANNELS):
        with m.If(sel == c):
            m.d.comb += ch.nxt_clear[c].eq(1)


def load(m, ch, sel, ld, push, room):
    """ACT of a LOAD: make ``ld`` channel ``sel``'s current descriptor, or push a FAULT entry
    (with ``room`` in the queue) if it is malformed; nothing if CALC saw it incomplete."""
    regm = ch.regmode[sel]
    d = ld.desc
    ext = bits(d.control, "ext")
    ptr = ch.nxt_ptr[sel]
    with m.If(~ld.ok):      # CALC saw the prefetch buffer still arriving: next time
        pass
    with m.Elif(ld.bad):
        # Reported in order, behind the earlier descriptors' writes (a FAULT entry).
        here = Mux(regm, ch.slot[sel], Cat(Const(0, 5), ptr[5:]))
        push(Kind.FAULT, room, code=DmaError.DESC_MALFORMED, desc=here)
        with m.If(room):
            m.d.sync += ch.cur_addr[sel].eq(here)
    with m.Else():
        m.d.sync += [
            ch.cur[sel].eq(d),
            ch.cur[sel].count.eq(Mux(ext, d.count, 1)),
            ch.sgap1[sel].eq(Mux(ext, d.src_gap, 0) + 1),
            ch.dgap1[sel].eq(Mux(ext, d.dst_gap, 0) + 1),
            ch.cur_addr[sel].eq(Mux(regm, ch.slot[sel], Cat(Const(0, 5), ptr[5:]))),
            ch.cur_src[sel].eq(d.src),
            ch.cur_dst[sel].eq(d.dst),
            ch.brem_m1[sel].eq(d.length - 1),
            ch.bbig[sel].eq(ld.big), ch.lbig[sel].eq(ld.big),
            ch.bleft[sel].eq(Mux(ext, d.count, 1)),
            ch.blnz[sel].eq(1),            # a count of 0 is malformed
            ch.fetched[sel].eq(0),
        ]
        clear_prefetch(m, ch, sel)
