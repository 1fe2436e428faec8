"""The planner's descriptor fetching: announced descriptors into the channel's ring in blocks.

Functions of :class:`~peach2.dma.planner.Planner`'s ``elaborate`` (``docs/dma.md``, "Descriptors
are fetched in blocks").  Per channel, the fetch state is a few registers written only by a
start, by the channel's fetch (ACT PF) and by its loads: the next descriptor to fetch
(``fptr``), how many are announced and not fetched (``fleft``), their size (``fbig``), the ring
slot the next fetch fills (``wpos``) and the ring's free slots (``rfree``).  What the next fetch
would be (its descriptors, bytes, and the registers after it) is worked out every cycle from
each channel's own registers into registers (``fp_*``), so CALC and ACT only pick them; for
four cycles after a change of a channel's fetch state (``fhold``) those lag, and the channel
does not fetch.  A load's decisions about fetching reach these registers a cycle later.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from ..params import N_DMA_CHANNELS
from ..util import not_below
from .common import per_channel
from .descring import RING_SLOTS, SLOT_BITS

__all__ = ["fetch_registers", "fetch_plan", "fetch_changed", "fetch_act", "fetch_start",
           "fetch_announced", "FETCH_BLOCK_SLOTS"]

#: Descriptors of the largest fetch (512 bytes of 32-byte descriptors): a fetch waits for as
#: many free ring slots.
FETCH_BLOCK_SLOTS = 16


def fetch_registers():
    """Return the channels' fetch registers (``Array`` of one ``Signal`` per channel)."""
    NC = N_DMA_CHANNELS
    per_chan = per_channel

    return SimpleNamespace(
        fptr=per_chan("fptr", 64),
        fleft=per_chan("fleft", 9),
        fbig=per_chan("fbig", 1),
        wpos=per_chan("wpos", SLOT_BITS),
        rfree=per_chan("rfree", SLOT_BITS + 1, init=RING_SLOTS),
        fhold=per_chan("fhold", 4),
        # What a load decided for fetching, applied a cycle later (no load decision in front
        # of these registers): ``fleft`` grows by ``fgrow``; a new run of one at ``fnew``;
        # fetching stops (``fstop``, the chain's end).
        fgrow=per_chan("fgrow", 8),
        fgrow_en=per_chan("fgrow_en", 1),
        fnew=per_chan("fnew", 64),
        fnew_en=per_chan("fnew_en", 1),
        fstop_en=per_chan("fstop_en", 1),
        # The channel's next descriptor is in no ring and not being fetched (its load started
        # a new run, or announced one with nothing fetched): its data reads wait for the
        # fetch, so the fetch's completion is not queued at the host behind them.
        fwait=per_chan("fwait", 1),
        # The slots the fetch ACT issued a cycle ago takes from ``rfree``.
        ftake=per_chan("ftake", 5),
        # The plan of the next fetch, per channel, in three steps: the descriptors to the
        # block's end, less 1; the fetch's descriptors; its bytes and the registers after it.
        fp_nbm1=per_chan("fp_nbm1", 4),
        fp_ok=per_chan("fp_ok", 1),
        fp_n=per_chan("fp_n", 5),
        fp_bytes=per_chan("fp_bytes", 10),
        fp_fptr=per_chan("fp_fptr", 64),
        fp_left=per_chan("fp_left", 9),
        fp_wpos=per_chan("fp_wpos", SLOT_BITS),
        can_pf=Array([Signal(name=f"ch{c}_can_pf") for c in range(NC)]),
    )


def fetch_changed(m, f, c):
    """Channel ``c``'s fetch state changes at this clock edge (or, for a load's decision, a
    cycle later): no fetch for four cycles, until the plan is made from it."""
    m.d.sync += f.fhold[c].eq(0b1111)


def fetch_plan(m, f, mrrs_m1, pop):
    """The per-channel plan of the next fetch (registered, in three steps), ``can_pf``,
    ``rfree``'s count and the loads' decisions.  Called before the planner's ACT and control
    writes (theirs win)."""
    fmask = mrrs_m1[:9]             # min(MRRS, 512) - 1: MRRS is at most 512 here
    for c in range(N_DMA_CHANNELS):
        fptr, fleft, big = f.fptr[c], f.fleft[c], f.fbig[c]
        # Descriptors to the next min(MRRS, 512)-byte boundary (bytes to it, less 1, is
        # fmask ^ the offset in the block), at most the announced ones.
        to_b_m1 = fmask ^ (fptr[:9] & fmask)
        nb = f.fp_nbm1[c] + 1
        n = Mux(fleft <= nb, fleft[:5], nb)[:5]
        n_bytes = Mux(big, f.fp_n[c] << 6, f.fp_n[c] << 5)[:10]
        m.d.sync += [
            f.fp_nbm1[c].eq(Mux(big, to_b_m1[6:9], to_b_m1[5:9])),
            f.fp_ok[c].eq(fleft != 0), f.fp_n[c].eq(n),
            f.fp_bytes[c].eq(n_bytes), f.fp_fptr[c].eq(fptr + n_bytes),
            f.fp_left[c].eq(fleft - f.fp_n[c]), f.fp_wpos[c].eq(f.wpos[c] + f.fp_n[c]),
            f.fhold[c].eq(f.fhold[c] >> 1),
        ]
        # A fetch needs room for the largest block, and a plan made from current registers
        # (registered: a channel CALC picks for a fetch a cycle after its last change is
        # stopped in ACT by ``fhold``).
        m.d.sync += f.can_pf[c].eq(f.fp_ok[c] & not_below(f.rfree[c], f.fp_n[c])
                                   & (f.fhold[c] == 0))
        m.d.sync += [f.rfree[c].eq(f.rfree[c] + pop[c] - f.ftake[c]), f.ftake[c].eq(0)]
        m.d.sync += [f.fgrow_en[c].eq(0), f.fnew_en[c].eq(0), f.fstop_en[c].eq(0)]
        with m.If(f.fgrow_en[c]):
            m.d.sync += fleft.eq(fleft + f.fgrow[c])
        with m.If(f.fnew_en[c]):
            m.d.sync += [fptr.eq(Cat(Const(0, 5), f.fnew[c][5:])), fleft.eq(1),
                         big.eq(f.fnew[c][0])]
        with m.If(f.fstop_en[c]):
            m.d.sync += fleft.eq(0)


def fetch_act(m, f, sel, go):
    """ACT of a fetch of channel ``sel`` that is issued (``go``): the registers after it."""
    with m.If(go):
        m.d.sync += [f.fptr[sel].eq(f.fp_fptr[sel]), f.fleft[sel].eq(f.fp_left[sel]),
                     f.wpos[sel].eq(f.fp_wpos[sel]), f.ftake[sel].eq(f.fp_n[sel]),
                     f.fwait[sel].eq(0)]
        for c in range(N_DMA_CHANNELS):
            with m.If(sel == c):
                fetch_changed(m, f, c)


def fetch_start(m, f, c, head):
    """A start of channel ``c`` at pointer ``head``: nothing to fetch yet (register mode: nothing
    at all; a chained start: :func:`fetch_announced` the cycle after)."""
    m.d.sync += [f.fptr[c].eq(Cat(Const(0, 5), head[5:])),
                 f.fleft[c].eq(0), f.fbig[c].eq(head[0]),
                 f.wpos[c].eq(0), f.rfree[c].eq(RING_SLOTS), f.fgrow_en[c].eq(0),
                 f.fnew_en[c].eq(0), f.fstop_en[c].eq(0), f.ftake[c].eq(0),
                 f.fwait[c].eq(0)]
    fetch_changed(m, f, c)


def fetch_announced(m, f, c, ann):
    """The cycle after a chained start of channel ``c``: the head and the ``ann`` descriptors
    announced after it (up to 63) are to be fetched.  The start's ``fhold`` covers it: the
    plan's three steps from ``fleft`` are registered a cycle before ``fhold`` runs out."""
    m.d.sync += f.fleft[c].eq(ann + 1)
