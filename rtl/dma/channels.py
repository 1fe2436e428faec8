"""The four DMA channels' registers and what writes them besides the planner's ACT: the
control writes (start, register-mode start, abort; 002 section 3.4), the faults, the status
registers and the counters.

Functions of :class:`~peach2.dma.planner.Planner`'s ``elaborate`` (the channel registers belong
to it: its ACT writes them too).  The order of the calls is the order of priority of their
updates of a register in one cycle: the later wins.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Mux, Signal

from ..params import N_DMA_CHANNELS, N_DMA_SLOTS, DmaError
from .common import CH_CTRL, CH_STATUS, Chan, field, per_channel
from .descriptor import Descriptor
from .fetch import fetch_announced, fetch_start

__all__ = ["channel_registers", "control", "reports"]


def channel_registers(nxt, nxt_valid, note):
    """Return the per-channel registers (``Array`` of one ``Signal`` per channel, by name).

    ``nxt``, ``nxt_valid``, ``note``: the descriptor rings' staging registers (read here,
    written there).
    """
    NC = N_DMA_CHANNELS
    per_chan = per_channel

    return SimpleNamespace(
        st=per_chan("state", Chan),
        ch_err=per_chan("err", 4),
        abort=per_chan("abort", 1),
        ignored=per_chan("ignored", 1),
        cur=per_chan("cur", Descriptor),
        cur_addr=per_chan("cur_addr", 64),
        cur_src=per_chan("src", 64),
        cur_dst=per_chan("dst", 64),
        brem_m1=per_chan("brem_m1", 32),    # bytes left in the current burst, minus 1
        bbig=per_chan("bbig", 1),           # brem_m1 >= 4096 (kept with it: no wide OR in CALC)
        lbig=per_chan("lbig", 1),           # the descriptor's length - 1 >= 4096
        # Whether the current descriptor is the chain's last (the end bit, or the last
        # register-mode slot), set by the load: the read closing the descriptor looks at it in
        # its CALC, from the cycle after the load's ACT.
        last_pre=per_chan("last_pre", 1),
        # Whether the register-mode slot is the last, registered (a load looks at it two
        # cycles or more after the close or the start that moved the slot).
        slot_last=per_chan("slot_last", 1),
        sgap1=per_chan("sgap1", 33),        # the source and destination gaps, plus 1
        dgap1=per_chan("dgap1", 33),
        bleft=per_chan("bleft", 32),        # bursts left, the current one included
        nxt=Array([nxt[c] for c in range(NC)]),
        nxt_valid=Array([nxt_valid[c] for c in range(NC)]),
        note=Array([note[c] for c in range(NC)]),
        nxt_clear=Signal(NC),   # the staged descriptor was loaded
        # Fetching: the registers of peach2.dma.fetch (fetch_registers), added by the planner.
        # What a chained start announces after the head (the most of CH_CTRL.adj and
        # CH_HEAD[4:1]), registered from the control write's data every cycle, and taken the
        # cycle after the start (``start_d``), out of the start's own decision paths, with the
        # head's pointer (``head_ptr``, registered from CH_HEAD likewise), for the ring's chain
        # registers (``init``).
        ann=per_chan("ann", 6),
        start_d=per_chan("start_d", 1),
        head_ptr=per_chan("head_ptr", 64),
        regmode=per_chan("regmode", 1),
        slot=per_chan("slot", 3),
        nslots=per_chan("nslots", 3),
        # A register-mode queue (``CH_CTRL.queue``): the slot after the last appended (``slot``
        # and ``tail`` count modulo 8, a slot's number is their low two bits), stopped
        # (``qstop``: ends once ``slot`` reaches ``tail``), and whether a slot is left to load,
        # registered: ``has_slot`` (``slot`` is not the tail) and ``has_after`` (nor the slot
        # after it), which a load looks at the cycle after a close moved ``slot``
        # (``closed_d``; the planner may pick the channel again in the action that closes its
        # slot); an append a cycle ago (``app_d``) is not in them yet.
        queue=per_chan("queue", 1),
        tail=per_chan("tail", 3),
        qstop=per_chan("qstop", 1),
        has_slot=per_chan("has_slot", 1),
        has_after=per_chan("has_after", 1),
        app_d=per_chan("app_d", 1),
        # A stopped queue has nothing left (``qdone``, registered): it drains, a cycle later,
        # as a stopped channel does (``to_drain``: ``abort`` or that, registered, so the
        # state's update has no input more than before queues; a fault's stop reaches the
        # state a cycle after ``abort``, while ``abort`` already holds the channel's actions).
        qdone=per_chan("qdone", 1),
        to_drain=per_chan("to_drain", 1),
        closed_d=per_chan("closed_d", 1),
        # Slots held (started or appended, not closed; from the registers, a cycle behind
        # them), and the sticky refusals of CH_STATUS.
        held=per_chan("held", 3),
        app_refused=per_chan("append_refused", 1),
        slot_refused=per_chan("slot_refused", 1),
        pending=per_chan("pending", 8),     # queue entries not yet retired
        desc_done=per_chan("desc_done", 32),
        nbytes=per_chan("bytes", 64),
        fault_addr=per_chan("fault_addr", 64),
        unroutable=per_chan("unroutable", 1),   # the writer dropped a write: drop the rest
        # A fault stops its channel at once (``abort``); its code and descriptor are recorded
        # a cycle later from registers (the first error wins), so no fault's conditions reach
        # the status registers in the same cycle.
        f_en=per_chan("f_en", 1),
        f_code=per_chan("f_code", 4),
        f_addr=per_chan("f_addr", 64),
        # The planner's queue entry enters the queue now (``pq_en``), of this channel:
        pq_en=Signal(),
        pq_chan=Signal(2),
    )


def fail(m, ch, c, code, addr):
    """Record a fault of channel ``c`` with ``code``, blaming descriptor ``addr`` (its
    ``abort`` is set in :func:`reports`, from the same conditions)."""
    m.d.sync += [ch.f_en[c].eq(1), ch.f_code[c].eq(code), ch.f_addr[c].eq(addr)]


def control(m, pl, ch):
    """The fault records, ``pending``, the status outputs and the control writes of the
    planner ``pl`` (its ports ``ch_*``, ``retire``, and the ring's chain registers' ``init``)."""
    NC = N_DMA_CHANNELS
    ring = pl.ring
    m.d.comb += ring.init.eq(Cat(*ch.start_d))
    for c in range(NC):
        head = Cat(pl.ch_head_lo[c], pl.ch_head_hi[c])
        m.d.sync += ch.head_ptr[c].eq(head & ~0x1e)
        with m.If(ch.start_d[c]):
            m.d.comb += [ring.init_ann.eq(ch.ann[c]), ring.init_ptr.eq(ch.head_ptr[c])]
    st, ch_err, cur_addr, fault_addr = ch.st, ch.ch_err, ch.cur_addr, ch.fault_addr
    for c in range(NC):
        m.d.sync += ch.f_en[c].eq(0)
        with m.If(ch.f_en[c] & (ch_err[c] == 0)):
            m.d.sync += [ch_err[c].eq(ch.f_code[c]), fault_addr[c].eq(ch.f_addr[c])]

    # Pending: +1 per entry pushed (planner, as it enters the queue), -1 per entry retired
    # (the writer's output stage, registered there).
    for c in range(NC):
        inc = ch.pq_en & (ch.pq_chan == c)
        dec = pl.report.retire.en & (pl.report.retire.chan == c)
        m.d.sync += ch.pending[c].eq(ch.pending[c] + inc - dec)

    # Status outputs.
    for c in range(NC):
        status = Signal(32)
        desc_addr = Mux(ch_err[c] != 0, fault_addr[c], cur_addr[c])
        m.d.comb += [
            field(status, "busy", CH_STATUS).eq(st[c] != Chan.IDLE),
            field(status, "start_ignored", CH_STATUS).eq(ch.ignored[c]),
            field(status, "append_refused", CH_STATUS).eq(ch.app_refused[c]),
            field(status, "slot_refused", CH_STATUS).eq(ch.slot_refused[c]),
            field(status, "error", CH_STATUS).eq(ch_err[c]),
            field(status, "held", CH_STATUS).eq(ch.held[c]),
            field(status, "tail", CH_STATUS).eq(ch.tail[c][:2]),
            pl.ch_status[c].eq(status),
            pl.ch_desc_done[c].eq(ch.desc_done[c]),
            pl.ch_bytes_lo[c].eq(ch.nbytes[c][:32]),
            pl.ch_bytes_hi[c].eq(ch.nbytes[c][32:]),
            pl.ch_desc_addr_lo[c].eq(desc_addr[:32]),
            pl.ch_desc_addr_hi[c].eq(desc_addr[32:]),
        ]

    # Control writes: start, register-mode start, abort.
    for c in range(NC):
        m.d.sync += ch.slot_last[c].eq(ch.slot[c] + 1 >= ch.nslots[c])
    ctrl = pl.ch_ctrl_data
    # What a control write does to ``abort`` (set: an abort of a busy channel, a register-mode
    # start with a bad slot count; clear: any other accepted start), for :func:`reports`.
    ch.abort_set, ch.abort_clear = [], []
    for c in range(NC):
        busy, stb = st[c] != Chan.IDLE, pl.ch_ctrl_stb[c]
        start, rstart = field(ctrl, "start", CH_CTRL), field(ctrl, "reg_start", CH_CTRL)
        n = field(ctrl, "slots", CH_CTRL)
        accept = stb & (start | rstart) & ~busy
        lo = pl.ch_head_lo[c]
        ch.abort_set.append(stb & field(ctrl, "abort", CH_CTRL) & _stoppable(st[c])
                            | accept & ~start & _bad_count(n, field(ctrl, "queue", CH_CTRL))
                            | accept & start & lo[0] & lo[5])
        ch.abort_clear.append(accept)
    for c in range(NC):
        adj, in_head = field(ctrl, "adj", CH_CTRL), pl.ch_head_lo[c][1:5]
        m.d.sync += [ch.ann[c].eq(Mux(adj > in_head, adj, in_head)), ch.start_d[c].eq(0)]
        with m.If(ch.start_d[c]):
            fetch_announced(m, ch, c, ch.ann[c])
        with m.If(pl.ch_ctrl_stb[c]):
            start = field(ctrl, "start", CH_CTRL)
            rstart = field(ctrl, "reg_start", CH_CTRL)
            n = field(ctrl, "slots", CH_CTRL)
            with m.If(field(ctrl, "abort", CH_CTRL) & _stoppable(st[c])):
                fail(m, ch, c, DmaError.ABORTED, cur_addr[c])
            with m.Elif((start | rstart) & (st[c] != Chan.IDLE)):
                m.d.sync += ch.ignored[c].eq(1)
            with m.Elif(start | rstart):
                head = Cat(pl.ch_head_lo[c], pl.ch_head_hi[c])
                m.d.sync += [
                    ch.ignored[c].eq(0), ch_err[c].eq(0),
                    ch.unroutable[c].eq(0), ch.desc_done[c].eq(0), ch.nbytes[c].eq(0),
                    ch.regmode[c].eq(~start), ch.slot[c].eq(0), ch.nslots[c].eq(n),
                    ch.queue[c].eq(~start & field(ctrl, "queue", CH_CTRL)), ch.qstop[c].eq(0),
                    ch.app_refused[c].eq(0), ch.slot_refused[c].eq(0),
                    cur_addr[c].eq(head & ~0x1f),
                    ch.start_d[c].eq(start),
                ]
                # The head (and, a cycle later, the descriptors announced after it).
                fetch_start(m, ch, c, head)
                with m.If(start & head[0] & head[5]):
                    # A 64-byte head descriptor that is not 64-byte aligned.
                    m.d.sync += [st[c].eq(Chan.DRAIN), ch_err[c].eq(DmaError.DESC_MALFORMED),
                                 fault_addr[c].eq(head & ~0x1f)]
                with m.Elif(start):
                    m.d.sync += st[c].eq(Chan.WAIT)
                with m.Elif(_bad_count(n, field(ctrl, "queue", CH_CTRL))):
                    m.d.sync += [st[c].eq(Chan.DRAIN), ch_err[c].eq(DmaError.DESC_MALFORMED),
                                 cur_addr[c].eq(0), fault_addr[c].eq(0)]
                with m.Else():
                    m.d.sync += [st[c].eq(Chan.WAIT), cur_addr[c].eq(0)]
    queue_control(m, pl, ch)


def _bad_count(n, queue):
    """A register-mode start's slot count is malformed: 1..4 slots (a queue: 0..4)."""
    return (n > N_DMA_SLOTS) | (n == 0) & ~queue


def queue_control(m, pl, ch):
    """A register-mode queue's appends and stop (``CH_CTRL.append``, ``stop``), the slots the
    channels hold (``slot_held``: the register block drops a write to one) and the refusals.

    ``slot`` and ``tail`` count modulo 8, so ``tail - slot`` is the slots held (0..4, the one
    running included).  An append is taken when the channel runs a queue that is not stopped
    (WAIT or RUN) and at most four slots would then be held, counted from this cycle's ``slot``
    and ``tail`` (a close in the same cycle only frees one).  The held slots (``slot_held``)
    follow the registers a cycle late; the register block covers the gap (it drops a
    channel's SLOT writes in the two cycles after its CH_CTRL strobe), and a close frees its
    slot a cycle late."""
    ctrl = pl.ch_ctrl_data
    for c in range(N_DMA_CHANNELS):
        st, stb = ch.st[c], pl.ch_ctrl_stb[c]
        running = (st == Chan.WAIT) | (st == Chan.RUN)
        k = field(ctrl, "slots", CH_CTRL)
        append, stop = field(ctrl, "append", CH_CTRL), field(ctrl, "stop", CH_CTRL)
        rstart = field(ctrl, "reg_start", CH_CTRL)
        start = field(ctrl, "start", CH_CTRL)
        is_q = ch.regmode[c] & ch.queue[c] & running
        held_now = (ch.tail[c] - ch.slot[c])[:3]
        # The control write is not a start of another kind (a start wins: an append or stop
        # in the start's own write is refused with it when the start is ignored).
        plain = ~start & ~rstart & ~field(ctrl, "abort", CH_CTRL)
        take_app = Signal(name=f"ch{c}_take_append")
        take_stop = Signal(name=f"ch{c}_take_stop")
        m.d.comb += [
            take_app.eq(stb & plain & append & is_q & ~ch.qstop[c] & (k != 0)
                        & (k <= N_DMA_SLOTS) & ((held_now + k)[:4] <= N_DMA_SLOTS)),
            take_stop.eq(stb & plain & stop & is_q),
        ]
        with m.If(stb & plain & (append & ~take_app | stop & ~is_q)):
            m.d.sync += ch.app_refused[c].eq(1)
        with m.If(take_stop):
            m.d.sync += ch.qstop[c].eq(1)
        # The tail: a register-mode start's count, plus each append's.
        acc_r = stb & rstart & ~start & (st == Chan.IDLE)
        m.d.sync += ch.tail[c].eq(Mux(acc_r, k, Mux(take_app, ch.tail[c] + k, ch.tail[c])))
        # Whether a slot is left, from the registers: a cycle behind an append (``app_d``
        # keeps a stop taken with it from draining the queue meanwhile) and behind a close
        # (a load the cycle after one looks at ``has_after``).
        m.d.sync += [ch.has_slot[c].eq(held_now != 0),
                     ch.has_after[c].eq(held_now != 1),        # slot + 1 != tail, modulo 8
                     ch.app_d[c].eq(take_app)]
        # The slots held, from the registers (a cycle behind them; the register block drops
        # a channel's slot writes in the two cycles after its CH_CTRL strobe, while the
        # write's changes reach ``slot_held``).
        on = ch.regmode[c] & (st != Chan.IDLE)
        held = Signal(3, name=f"ch{c}_held_now")
        m.d.comb += held.eq(Mux(on, Mux(ch.queue[c], ch.tail[c], ch.nslots[c]) - ch.slot[c], 0))
        m.d.sync += ch.held[c].eq(held)
        for s in range(N_DMA_SLOTS):
            m.d.sync += pl.slot_held[N_DMA_SLOTS * c + s].eq((s - ch.slot[c])[:2] < held)
        with m.If(pl.slot_refused[c]):
            m.d.sync += ch.slot_refused[c].eq(1)


def _stoppable(state):
    """Whether an abort stops a channel in ``state``: WAIT or RUN.  In DRAIN the chain's last
    read has been issued (or a fault already stopped it), so an abort has nothing left to stop
    and the chain ends as it would have; in IDLE nothing runs."""
    return (state == Chan.WAIT) | (state == Chan.RUN)


def reports(m, pl, ch):
    """What the writer reports (``pl.report``: ``fail``, ``fail_route``, ``count``): after the
    control writes and the planner, so its updates win."""
    NC = N_DMA_CHANNELS
    # Whether a report is the channel's, as nets of their own: the mapping otherwise spreads
    # the writer's report over the control writes' priority chain of ``abort`` (a level more).
    hits = {}
    for kind in ("fail", "fail_route"):
        for c in range(NC):
            rep = getattr(pl.report, kind)
            hits[kind, c] = Signal(name=f"ch{c}_{kind}_hit", attrs={"keep": 1})
            m.d.comb += hits[kind, c].eq(rep.en & (rep.chan == c))
    for c in range(NC):
        with m.If(hits["fail", c]):
            fail(m, ch, c, pl.report.fail.code, pl.report.fail.desc)
    for c in range(NC):
        with m.If(hits["fail_route", c]):
            fail(m, ch, c, pl.report.fail_route.code, pl.report.fail_route.desc)
            m.d.sync += ch.unroutable[c].eq(1)
    # ``abort``: set by a fault (a report, or a control write's), cleared by an accepted
    # start, else kept; written as that (no multiplexer), so the mapping makes no clock
    # enable of it, which would put the reset into the enable behind the reports (a level).
    for c in range(NC):
        abort = hits["fail", c] | hits["fail_route", c] | ch.abort_set[c] \
            | ch.abort[c] & ~ch.abort_clear[c]
        m.d.sync += [ch.abort[c].eq(abort),
                     ch.to_drain[c].eq(ch.abort[c] & ~ch.abort_clear[c] | ch.qdone[c])]
    m.d.sync += pl.msi_req.eq(0)
    cnt = pl.report.count
    with m.If(cnt.en):
        for c in range(NC):
            with m.If(cnt.chan == c):
                m.d.sync += ch.nbytes[c].eq(ch.nbytes[c] + cnt.nbytes)
                with m.If(cnt.mark):
                    m.d.sync += ch.desc_done[c].eq(ch.desc_done[c] + 1)
                    with m.If(cnt.irq):
                        m.d.sync += pl.msi_req[c].eq(1)
