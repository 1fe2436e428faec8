"""The planner's descriptor load and its checks (002 section 3.4).

Functions of :class:`~peach2.dma.planner.Planner`'s ``elaborate``: :func:`load_checks` works out
in CALC the descriptor a WAIT channel loads and whether it is malformed, :func:`load` loads it
in ACT (or reports it malformed, in queue order).
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from ..params import N_DMA_CHANNELS, N_DMA_SLOTS, DmaError
from ..util import not_below
from .common import Kind, bits, select
from .descriptor import CONTROL_RESERVED, MAGIC, Descriptor
from .fetch import fetch_changed

__all__ = ["load_checks", "load", "follow_chain", "consume", "follow"]


def follow(ptr):
    """The pointer to the descriptor right after the one ``ptr`` points to (same size)."""
    return Cat(ptr[0], Const(0, 4), ptr[5:] + 1 + ptr[0])[:64]


def _malformed(d, regm, ptr=None, follows=None, known=None):
    """Whether descriptor ``d`` is malformed (from a register-mode slot, or fetched from
    ``ptr``, whose bit 0 says it is the extended format, with ``known``: descriptors are known
    to follow it from the ones before; ``follows``: its next is the one right after it)."""
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
        # Not the last: ``next`` has bits [4:1] clear, a 64-byte descriptor's is 64-byte
        # aligned, and in (or announcing) an adjacent run it points to the following one.
        # (``follows`` is whether next is the following one, a cycle old: see load_checks.)
        announced = known | bits(ctl, "adj").any()
        checks += [ext != ptr[0],
                   ~bits(ctl, "end") & (d.next[1:5].any() | (d.next[0] & d.next[5])
                                        | (announced & ~follows))]
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

    The checks are worked out ahead, for every register-mode slot (``slots``) and every
    channel's staging register, so CALC only picks one.  A staging register counts as
    complete once it has been valid for two cycles (its checks, some made in two steps, then
    describe its contents); a slot is checked a cycle after the register write that changed
    it, and the host's start write comes later than that.

    A channel can be picked in its closing read's action, while still in RUN, and reach CALC in
    WAIT with its prefetch still arriving: the buffer then holds part of the old descriptor,
    and becomes valid only after CALC.  ACT loads only what CALC saw valid (``ok``; the channel is
    picked again otherwise).  Once valid, neither the buffer nor the slot number change until
    that channel's next action."""
    n_slots = N_DMA_CHANNELS * N_DMA_SLOTS
    nxt, nxt_valid, lptr = ch.nxt, ch.nxt_valid, ch.lptr
    slot_bad = Signal(n_slots, name="slot_bad")
    nxt_bad = Signal(N_DMA_CHANNELS, name="nxt_bad")
    nxt_seen = Signal(N_DMA_CHANNELS, name="nxt_seen")    # nxt_valid a cycle ago
    nxt_seen2 = Signal(N_DMA_CHANNELS, name="nxt_seen2")  # and two cycles ago
    slot_big = Signal(n_slots, name="slot_big")
    nxt_big = Signal(N_DMA_CHANNELS, name="nxt_big")
    for i in range(n_slots):
        m.d.sync += [slot_bad[i].eq(_malformed(slots[i], regm=True)),
                     slot_big[i].eq(_big(slots[i]))]
    # Per channel, ahead: the pointer right after the staged descriptor, and what is known
    # to follow it: ``b`` from the ones before, or its adj if more (then ``grow`` more to
    # fetch).  Its lptr, lfollow and ahead change only in its loads, four cycles or more
    # apart, and the staged descriptor changes with them (the one behind it moves up): each
    # of these is registered within two cycles of the load (lfollow is set by the load
    # itself), so a CALC three cycles after the load's ACT sees them all.
    lfollow = Array([Signal(64, name=f"ch{c}_lfollow") for c in range(N_DMA_CHANNELS)])
    n_lfollow = [Signal(64, name=f"ch{c}_n_lfollow") for c in range(N_DMA_CHANNELS)]
    f_next = [Signal(64, name=f"ch{c}_f_next") for c in range(N_DMA_CHANNELS)]
    f_lf = [Signal(64, name=f"ch{c}_f_lf") for c in range(N_DMA_CHANNELS)]
    b = [Signal(8, name=f"ch{c}_known_b") for c in range(N_DMA_CHANNELS)]
    b_nz = [Signal(name=f"ch{c}_known_b_nz") for c in range(N_DMA_CHANNELS)]
    b_gt1 = [Signal(name=f"ch{c}_known_b_gt1") for c in range(N_DMA_CHANNELS)]
    adj_gt1 = [Signal(name=f"ch{c}_adj_gt1") for c in range(N_DMA_CHANNELS)]
    grow = Array([Signal(8, name=f"ch{c}_grow") for c in range(N_DMA_CHANNELS)])
    adj_gt = Array([Signal(name=f"ch{c}_adj_gt") for c in range(N_DMA_CHANNELS)])
    next_eq_lo = [Signal(name=f"ch{c}_next_eq_lo") for c in range(N_DMA_CHANNELS)]
    next_eq_hi = [Signal(name=f"ch{c}_next_eq_hi") for c in range(N_DMA_CHANNELS)]
    n_lptr = [Signal(64, name=f"ch{c}_n_lptr") for c in range(N_DMA_CHANNELS)]
    n_ahead = [Signal(8, name=f"ch{c}_n_ahead") for c in range(N_DMA_CHANNELS)]
    n_gt1 = [Signal(name=f"ch{c}_n_gt1") for c in range(N_DMA_CHANNELS)]
    for c in range(N_DMA_CHANNELS):
        ahead, adj = ch.ahead[c], bits(nxt[c].control, "adj")
        # (adj > b, from ahead itself: adj >= ahead, and adj > 0 when ahead is 0.)
        m.d.sync += [lfollow[c].eq(follow(lptr[c])),
                     b[c].eq(Mux(ahead == 0, 0, ahead - 1)), b_nz[c].eq(ahead[1:].any()),
                     b_gt1[c].eq(ahead > 2), adj_gt1[c].eq(adj[1:].any()),
                     grow[c].eq(adj - b[c]), adj_gt[c].eq(not_below(adj, ahead) & adj.any()),
                     f_next[c].eq(follow(nxt[c].next)), f_lf[c].eq(follow(lfollow[c])),
                     next_eq_lo[c].eq(nxt[c].next[:32] == lfollow[c][:32]),
                     next_eq_hi[c].eq(nxt[c].next[32:] == lfollow[c][32:])]
        # Then where the load leaves the channel: the next descriptor's pointer and what is
        # known to follow it (see follow_chain), from the compares above.
        new_run = ~adj_gt[c] & ~b_nz[c]
        m.d.sync += [n_lptr[c].eq(Mux(new_run, nxt[c].next, lfollow[c])),
                     n_lfollow[c].eq(Mux(new_run, f_next[c], f_lf[c])),
                     n_ahead[c].eq(Mux(adj_gt[c], adj, Mux(b_nz[c], b[c], 0))),
                     n_gt1[c].eq(Mux(adj_gt[c], adj_gt1[c], b_nz[c] & b_gt1[c]))]
    for c in range(N_DMA_CHANNELS):
        m.d.sync += [nxt_bad[c].eq(_malformed(nxt[c], regm=False, ptr=lptr[c],
                                              follows=next_eq_lo[c] & next_eq_hi[c],
                                              known=ch.ahead_gt1[c])),
                     nxt_big[c].eq(_big(nxt[c])),
                     # (a load moves the next one up: seen afresh)
                     nxt_seen[c].eq(nxt_valid[c] & ~ch.nxt_clear[c]),
                     nxt_seen2[c].eq(nxt_valid[c] & nxt_seen[c] & ~ch.nxt_clear[c])]

    regm = ch.regmode[sel]
    idx = Cat(ch.slot[sel][:2], sel)           # 4 * c + s
    ld = SimpleNamespace(desc=Signal(Descriptor, name="ld_desc"), bad=Signal(name="ld_bad"),
                         ok=Signal(name="ld_ok"), big=Signal(name="ld_big"),
                         lptr=Signal(64, name="ld_lptr"), ahead=Signal(8, name="ld_ahead"),
                         lfollow=Signal(64, name="ld_lfollow"), lfollow_of=lfollow,
                         gt1=Signal(name="ld_gt1"), grow=Signal(8, name="ld_grow"),
                         **{f"case_{n}": Signal(name=f"ld_case_{n}")
                            for n in ("end", "grow", "new", "go", "empty")})
    ld.bad_now = Mux(regm, select(slot_bad, idx), select(nxt_bad, sel))
    ld.ok_now = regm | (nxt_valid[sel] & select(nxt_seen2, sel))
    # Which case the load is (see follow_chain), from the staged descriptor's end bit and
    # the per-channel compares: each case per channel first (a good staged descriptor, not
    # register mode: the slots' checks stay out of these), then the selected channel's.
    cases = {n: [] for n in ("end", "grow", "new", "go", "empty")}
    for c in range(N_DMA_CHANNELS):
        good = Signal(name=f"ch{c}_ld_good", attrs={"keep": 1})
        m.d.comb += good.eq(~ch.regmode[c] & nxt_valid[c] & nxt_seen2[c] & ~nxt_bad[c])
        end, gt, bnz = bits(nxt[c].control, "end"), adj_gt[c], b_nz[c]
        for n, v in (("end", end), ("grow", ~end & gt), ("new", ~end & ~gt & ~bnz),
                     ("go", ~end), ("empty", ~end & ~bnz)):
            case = Signal(name=f"ch{c}_ld_{n}")
            m.d.comb += case.eq(good & v)
            cases[n].append(case)
    m.d.sync += [*(getattr(ld, f"case_{n}").eq(select(v, sel)) for n, v in cases.items()),
                 ld.lptr.eq(select(n_lptr, sel)), ld.lfollow.eq(select(n_lfollow, sel)),
                 ld.ahead.eq(select(n_ahead, sel)),
                 ld.gt1.eq(select(n_gt1, sel))]
    m.d.sync += [
        ld.big.eq(Mux(regm, select(slot_big, idx), select(nxt_big, sel))),
        ld.desc.eq(Mux(regm, slots[idx], nxt[sel])),
        ld.bad.eq(ld.bad_now), ld.ok.eq(ld.ok_now),
        ld.grow.eq(grow[sel]),
    ]
    return ld


def consume(m, ch, sel):
    """Channel ``sel``'s staged descriptor was loaded (``nxt_valid`` falls next cycle)."""
    for c in range(N_DMA_CHANNELS):
        with m.If(sel == c):
            m.d.comb += ch.nxt_clear[c].eq(1)


def load(m, ch, sel, ld, push, room):
    """ACT of a LOAD: make ``ld`` channel ``sel``'s current descriptor, or push a FAULT entry
    (with ``room`` in the queue) if it is malformed; nothing if CALC saw it incomplete."""
    regm = ch.regmode[sel]
    d = ld.desc
    ext = bits(d.control, "ext")
    ptr = ch.lptr[sel]
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
            ch.last_pre[sel].eq(Mux(regm, ch.slot_last[sel], bits(d.control, "end"))),
        ]
        consume(m, ch, sel)


def follow_chain(m, ch, sel, ld):
    """After a load: where the next descriptor is and what to fetch (``docs/dma.md``,
    "Descriptors are fetched in blocks").  The descriptors known to follow the one loaded are
    the most of ``b`` (known from the ones before) and its ``adj``; the ones its ``adj`` adds
    are fetched from where fetching stands (right after the last known one).  With none known,
    ``next`` is fetched alone.  What it means for fetching is applied a cycle later
    (:func:`~peach2.dma.fetch.fetch_plan`); which case it is and the channel's registers after
    it, CALC picked from what was worked out per channel (``ld.case_*``, none for a load ACT
    does not do: incomplete, malformed, register mode).  Called for a LOAD's ACT, outside the
    state machine (``k.do`` is only set for ACT)."""
    with m.If(ld.case_go):
        m.d.sync += [ch.lptr[sel].eq(ld.lptr), ld.lfollow_of[sel].eq(ld.lfollow),
                     ch.ahead[sel].eq(ld.ahead), ch.ahead_gt1[sel].eq(ld.gt1)]
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
