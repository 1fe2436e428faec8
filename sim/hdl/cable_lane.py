"""One direction of the simulation-only :class:`~peach2.sim.hdl.cable.Cable` (read that docstring).

:class:`CableLane` carries TLPs from the sending chip's hard-IP TX side over the wire to the
receiving chip's hard-IP RX side, and holds both ends of that direction's flow control: the
sender's credit counters and the receiver's credit release, UpdateFC and ACK timers.  The DLLPs
it makes travel on the *other* lane's wire: ``dllp_out`` / ``rev_debt`` connect to the other
lane's ``dllp_in`` / ``debt``.  Simulation only.
"""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, ResetInserter, Signal
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFO

__all__ = ["CableLane", "CLS_P", "CLS_NP", "CLS_CPL", "max_beats"]

CLS_P, CLS_NP, CLS_CPL = 0, 1, 2

BEAT = data.StructLayout({"data": 128, "sop": 1, "eop": 1, "empty": 1})
TXD = data.StructLayout({"drop": 1, "cls": 2, "dc": 9, "wb": 13, "pay": 13, "nbeats": 9,
                         "span": 8})
#: Saturation of the cycle counts that bound a cut-through start (``span``, ``idle_for``).
SPAN_MAX = 255
RXD = data.StructLayout({"ts": 32, "cls": 2, "dc": 9})
CRQ = data.StructLayout({"ts": 32, "ph": 8, "pd": 12, "nph": 8, "npd": 12})


def max_beats(mps):
    """Beats of the longest TLP of ``mps`` payload bytes (4-DW header and a pad DW)."""
    return -(-(5 + mps // 4) // 4)


def _min(a, b):
    return Mux(a < b, a, b)


def _fifo(width, depth):
    return SyncFIFO(width=width, depth=max(int(depth), 2))


class CableLane(Elaboratable):
    """One direction of the cable: sender's TX buffer, wire, receiver's RX buffer, credits.

    Parameters are those of :class:`~peach2.sim.hdl.cable.Cable` (``credits`` = (PH, PD, NPH, NPD),
    ``cpl_buffer`` = (CPLH, CPLD)); the caller has checked them.  Plain :class:`Signal`
    attributes are the ports: ``tx_*`` from the sender, ``rx_*`` to the receiver, ``now``
    (free-running 32-bit cycle count), ``link_down`` (resets the TX buffer, wire, timers and
    credits), ``rx_hold`` (start no TLP toward the receiver), ``rx_reset`` (flush the receive
    buffer; only while ``in_pkt`` is 0), ``dllp_in`` / ``dllp_out`` (DLLP bytes charged this
    cycle on this / the reverse wire), ``debt`` / ``rev_debt`` (byte debt of this / the reverse
    wire), and strobes for the statistics: ``st_go`` (a TLP starts), ``st_bytes`` (its payload
    bytes), ``st_stall`` (the head TLP lacks credits), ``st_cpl_wait`` (the head completion
    lacks receive-buffer room), ``st_overflow`` (a beat arrived with the TX buffer full).
    """

    def __init__(self, *, latency, tx_pipeline, rx_pipeline, credits, cpl_buffer,
                 tx_buffer_tlps, mps, update_latency):
        self.latency, self.tx_pipeline, self.rx_pipeline = latency, tx_pipeline, rx_pipeline
        self.credits, self.cpl_buffer = tuple(credits), tuple(cpl_buffer)
        self.tx_buffer_tlps, self.mps, self.update_latency = tx_buffer_tlps, mps, update_latency
        ph, pd, nph, npd = self.credits
        cplh, cpld = self.cpl_buffer
        mb = max_beats(mps)
        # sizes: see the Cable docstring ("Buffers")
        self.tx_depth = tx_buffer_tlps * mb + 3
        self.txd_depth = tx_buffer_tlps + 2
        self.rx_depth = (min(pd + 2 * ph, ph * mb) + min(npd + 2 * nph, nph * mb)
                         + min(cpld + 2 * cplh, cplh * mb))
        self.rxd_depth = ph + nph + cplh
        wire_max = -(-(16 + mps + 8) // 16)
        tlp_flight = tx_pipeline + wire_max + latency
        self.ackq_depth = -(-tlp_flight // (update_latency + 1)) + 2
        dllp_flight = -(-(16 + mps + 8 + 64) // 16) + latency
        self.crq_depth = -(-dllp_flight // update_latency) + 2

        self.tx_data, self.tx_sop, self.tx_eop = Signal(128), Signal(), Signal()
        self.tx_empty, self.tx_valid, self.tx_err = Signal(), Signal(), Signal()
        self.tx_ready, self.tx_cred = Signal(), Signal(36, init=self._cred_word(*self.credits))
        self.rx_data, self.rx_sop, self.rx_eop = Signal(128), Signal(), Signal()
        self.rx_empty, self.rx_valid = Signal(), Signal()
        self.rx_ready, self.rx_mask = Signal(), Signal()
        self.now = Signal(32)
        self.link_down, self.rx_hold, self.rx_reset, self.in_pkt = (Signal(), Signal(),
                                                                     Signal(), Signal())
        self.dllp_in, self.dllp_out = Signal(6), Signal(6)
        self.debt, self.rev_debt = Signal(16), Signal(16)
        self.st_go, self.st_bytes, self.st_stall = Signal(), Signal(13), Signal()
        self.st_cpl_wait, self.st_overflow = Signal(), Signal()

    @staticmethod
    def _cred_word(ph, pd, nph, npd):
        """``tx_cred`` value (hardip.py ``_tx_cred_value`` layout), completions infinite."""
        val = 0
        for v, lsb, bits in ((ph, 0, 3), (pd, 3, 12), (nph, 15, 3), (npd, 18, 3),
                             (1 << 12, 21, 3), (1 << 12, 24, 12)):
            val |= min(v, (1 << bits) - 1) << lsb
        return val

    def elaborate(self, platform):
        m = Module()
        lk, rx = Module(), Module()  # reset by link_down / by rx_reset
        m.submodules.link = ResetInserter(self.link_down)(lk)
        m.submodules.rx = ResetInserter(self.rx_reset)(rx)
        ph0, pd0, nph0, npd0 = self.credits
        cplh0, cpld0 = self.cpl_buffer
        lat_arr = self.latency + self.tx_pipeline          # wire arrival (link layer, ACK)
        lat_rx = lat_arr + self.rx_pipeline                # first beat presentable
        U = self.update_latency
        now = self.now

        def due(ts):
            diff = Signal(32)
            m.d.comb += diff.eq(now - ts)
            return ~diff[31]

        lk.submodules.txf = txf = _fifo(BEAT.size, self.tx_depth)
        lk.submodules.txd = txd = _fifo(TXD.size, self.txd_depth)
        lk.submodules.mvq = mvq = _fifo(1, self.txd_depth + 1)
        lk.submodules.ackq = ackq = _fifo(32, self.ackq_depth)
        lk.submodules.crq = crq = _fifo(CRQ.size, self.crq_depth)
        rx.submodules.rxf = rxf = _fifo(BEAT.size, self.rx_depth)
        rx.submodules.rxd = rxd = _fifo(RXD.size, self.rxd_depth)

        self._accept(lk, txf, txd)

        # ---- sender's view of the receiver's credits (returned by UpdateFC DLLPs)
        av_ph, av_pd = Signal(8, init=ph0), Signal(12, init=pd0)
        av_nph, av_npd = Signal(8, init=nph0), Signal(12, init=npd0)
        cplh_used, cpld_used = Signal(8), Signal(12)
        ret = CRQ(crq.r_data)
        ret_now = crq.r_rdy & due(ret.ts)
        lk.d.comb += crq.r_en.eq(ret_now)
        e_ph = av_ph + Mux(ret_now, ret.ph, 0)
        e_pd = av_pd + Mux(ret_now, ret.pd, 0)
        e_nph = av_nph + Mux(ret_now, ret.nph, 0)
        e_npd = av_npd + Mux(ret_now, ret.npd, 0)

        # ---- scheduler: the head TLP starts when it has credits and the wire is free
        # Cut-through (Cable docstring, contract 2): a TLP that starts in the first cycle it
        # can (the cycle after its EOP beat, nothing ahead of it) is counted on the wire from
        # ``back`` cycles earlier: from the cycle after its SOP beat, not before the wire fell
        # idle, and late enough that its wire time ends after its EOP beat.
        head = TXD(txd.r_data)
        fresh, idle_for = Signal(), Signal(range(SPAN_MAX + 1))
        live = txd.r_rdy & ~head.drop
        cpl_room = (cplh_used + 1 <= cplh0) & (cpld_used + head.dc <= cpld0)
        have = Mux(head.cls == CLS_P, (e_ph != 0) & (e_pd >= head.dc),
                   Mux(head.cls == CLS_NP, (e_nph != 0) & (e_npd >= head.dc), cpl_room))
        wire_free = self.debt < 16
        go = Signal()
        drop_go = txd.r_rdy & head.drop & mvq.w_rdy
        lk.d.comb += go.eq(live & have & wire_free & mvq.w_rdy & rxd.w_rdy & ackq.w_rdy)
        wcyc = (head.wb + 15) >> 4
        back = Signal(range(SPAN_MAX + 1))
        lk.d.comb += back.eq(Mux(fresh & (txd.level == 1),
                                 _min(_min(head.span, idle_for), wcyc - 1), 0))
        arr = Signal(32)
        ack_last = Signal(32)
        new_ack = Signal()
        rxd_w = Signal(RXD)
        lk.d.comb += [
            txd.r_en.eq(go | drop_go),
            mvq.w_en.eq(go | drop_go),
            mvq.w_data.eq(head.drop),
            rxd_w.ts.eq(now - back + wcyc + lat_rx),
            rxd_w.cls.eq(head.cls), rxd_w.dc.eq(head.dc),
            rxd.w_data.eq(rxd_w),
            rxd.w_en.eq(go),
            arr.eq(now - back + wcyc + lat_arr),
            new_ack.eq(go & (ack_last - arr)[31]),   # arrives after the last ACK timer fired
            ackq.w_data.eq(arr + U),
            ackq.w_en.eq(new_ack),
            self.st_go.eq(go), self.st_bytes.eq(Mux(go, head.pay, 0)),
            self.st_stall.eq(live & ~have),
            self.st_cpl_wait.eq(live & (head.cls == CLS_CPL) & ~cpl_room),
        ]
        with lk.If(new_ack):
            lk.d.sync += ack_last.eq(arr + U)
        added = Mux(go, head.wb - (back << 4), 0) + self.dllp_in
        lk.d.sync += [
            self.debt.eq(Mux(self.debt + added > 16, self.debt + added - 16, 0)),
            idle_for.eq(Mux((self.debt != 0) | (added != 0), 0,
                            Mux(idle_for == SPAN_MAX, SPAN_MAX, idle_for + 1))),
            fresh.eq(txd.w_en),
        ]

        self._move(lk, txf, mvq, rxf)

        # ---- RX side: present TLPs at their arrival time, ready latency 2.  By then the mover
        # has the first beat in ``rxf`` and keeps one beat ahead: it copies a started TLP's
        # beats one a cycle, all of them in ``txf`` since its EOP, into room the credits keep.
        rdy1, rdy2, mask1 = Signal(), Signal(), Signal()
        cls_l, dc_l = Signal(2), Signal(9)
        rhead = RXD(rxd.r_data)
        beat_r = BEAT(rxf.r_data)
        start_ok = (~self.in_pkt & ~self.rx_hold & rxd.r_rdy & due(rhead.ts)
                    & rxf.r_rdy & ~((rhead.cls == CLS_NP) & mask1))
        issue = rdy2 & rxf.r_rdy & (self.in_pkt | start_ok)
        rel = Signal()
        rel_cls, rel_dc = Signal(2), Signal(9)
        rx.d.comb += [
            rxf.r_en.eq(issue),
            rxd.r_en.eq(issue & ~self.in_pkt),
            self.rx_valid.eq(issue),
            self.rx_data.eq(beat_r.data), self.rx_sop.eq(beat_r.sop),
            self.rx_eop.eq(beat_r.eop), self.rx_empty.eq(beat_r.empty),
            rel.eq(issue & beat_r.eop),
            rel_cls.eq(Mux(self.in_pkt, cls_l, rhead.cls)),
            rel_dc.eq(Mux(self.in_pkt, dc_l, rhead.dc)),
        ]
        rx.d.sync += [rdy1.eq(self.rx_ready), rdy2.eq(rdy1), mask1.eq(self.rx_mask)]
        with rx.If(issue):
            rx.d.sync += self.in_pkt.eq(~beat_r.eop)
            with rx.If(~self.in_pkt):
                rx.d.sync += [cls_l.eq(rhead.cls), dc_l.eq(rhead.dc)]

        # ---- receiver's credit release, UpdateFC timer, ACK timer (DLLPs on the reverse wire)
        rel_ph, rel_pd = Signal(8), Signal(12)
        rel_nph, rel_npd, rel_cpl = Signal(8), Signal(12), Signal()
        fc_run, fc_cnt = Signal(), Signal(range(U + 1))
        fire = Signal()
        n_fc = Signal(2)
        ack_fire = ackq.r_rdy & due(ackq.r_data)
        r_p, r_np, r_c = (rel & (rel_cls == c) for c in (CLS_P, CLS_NP, CLS_CPL))
        crq_w = Signal(CRQ)
        lk.d.comb += [
            fire.eq(fc_run & (fc_cnt == 0) & crq.w_rdy),
            n_fc.eq(Mux(fire, (rel_ph != 0) + (rel_nph != 0) + rel_cpl, 0)),
            ackq.r_en.eq(ack_fire),
            self.dllp_out.eq((ack_fire + n_fc) << 3),
            crq_w.ts.eq(now + ((self.rev_debt + self.dllp_out + 15) >> 4) + self.latency),
            crq_w.ph.eq(rel_ph), crq_w.pd.eq(rel_pd),
            crq_w.nph.eq(rel_nph), crq_w.npd.eq(rel_npd),
            crq.w_data.eq(crq_w),
            crq.w_en.eq(fire & ((rel_ph != 0) | (rel_nph != 0))),
        ]
        lk.d.sync += [
            rel_ph.eq(Mux(fire, 0, rel_ph) + r_p),
            rel_pd.eq(Mux(fire, 0, rel_pd) + Mux(r_p, rel_dc, 0)),
            rel_nph.eq(Mux(fire, 0, rel_nph) + r_np),
            rel_npd.eq(Mux(fire, 0, rel_npd) + Mux(r_np, rel_dc, 0)),
            rel_cpl.eq((rel_cpl & ~fire) | r_c),
        ]
        with lk.If(fire | (~fc_run & rel)):
            lk.d.sync += [fc_run.eq(rel), fc_cnt.eq(U - 1)]
        with lk.Elif(fc_run & (fc_cnt != 0)):
            lk.d.sync += fc_cnt.eq(fc_cnt - 1)

        # ---- credit bookkeeping: consumed at start, returned on DLLP arrival
        for reg, got, cls, amount in ((av_ph, ret.ph, CLS_P, 1), (av_pd, ret.pd, CLS_P, head.dc),
                                      (av_nph, ret.nph, CLS_NP, 1),
                                      (av_npd, ret.npd, CLS_NP, head.dc)):
            lk.d.sync += reg.eq(reg + Mux(ret_now, got, 0)
                                - Mux(go & (head.cls == cls), amount, 0))
        take_c = go & (head.cls == CLS_CPL)
        lk.d.sync += [
            cplh_used.eq(cplh_used + take_c - r_c),
            cpld_used.eq(cpld_used + Mux(take_c, head.dc, 0) - Mux(r_c, rel_dc, 0)),
            self.tx_cred.eq(Cat(
                Mux(av_ph > 7, 7, av_ph)[:3], Mux(av_pd > 4095, 4095, av_pd)[:12],
                Mux(av_nph > 7, 7, av_nph)[:3], Mux(av_npd > 7, 7, av_npd)[:3],
                Const(7, 3), Const(4095, 12))),
        ]
        return m

    def _accept(self, lk, txf, txd):
        """TX side: accept beats (ready latency 2), decode the header, queue whole TLPs (beats
        into ``txf``, one descriptor per TLP into ``txd``, with the cycles from its SOP beat to
        its EOP beat, ``span``)."""
        in_tlp, err_acc, hdr, nb = Signal(), Signal(), Signal(32), Signal(9)
        since = Signal(range(SPAN_MAX + 1))     # cycles since the open packet's SOP beat
        sop = self.tx_sop
        take = self.tx_valid & (sop | in_tlp)  # a beat outside a packet without sop: dropped
        dw0 = Mux(sop, self.tx_data[:32], hdr)
        fmt, typ, length = dw0[29:32], dw0[24:29], dw0[:10]
        has_data = fmt[1]
        len_dw = Mux(length == 0, 1024, length)
        is_cpl = typ[1:5] == 0b0101
        is_p = ((typ == 0) & has_data) | (typ[3:5] == 0b10)
        pay = Mux(has_data, len_dw << 2, 0)
        txd_w = Signal(TXD)
        lk.d.comb += [
            txd_w.drop.eq(self.tx_err | (~sop & err_acc)),
            txd_w.cls.eq(Mux(is_cpl, CLS_CPL, Mux(is_p, CLS_P, CLS_NP))),
            txd_w.dc.eq(Mux(has_data, (len_dw + 3) >> 2, 0)),
            txd_w.pay.eq(pay),
            txd_w.wb.eq(Mux(fmt[0], 16, 12) + pay + 8),
            txd_w.nbeats.eq(Mux(sop, 1, nb + 1)),
            txd_w.span.eq(Mux(sop, 0, since)),
            txf.w_data.eq(Cat(self.tx_data, sop, self.tx_eop, self.tx_empty)),
            txf.w_en.eq(take),
            txd.w_data.eq(txd_w),
            txd.w_en.eq(take & self.tx_eop),
            self.tx_ready.eq((txd.level < self.tx_buffer_tlps)
                             & (txf.level + 3 <= self.tx_depth)),
            self.st_overflow.eq(take & (~txf.w_rdy | (self.tx_eop & ~txd.w_rdy))),
        ]
        with lk.If(take):
            lk.d.sync += [in_tlp.eq(~self.tx_eop), err_acc.eq(txd_w.drop), hdr.eq(dw0),
                          nb.eq(txd_w.nbeats)]
        with lk.If(take & sop):
            lk.d.sync += since.eq(1)
        with lk.Elif(since != SPAN_MAX):
            lk.d.sync += since.eq(since + 1)

    def _move(self, lk, txf, mvq, rxf):
        """Mover: copy the started TLP's beats into the receive buffer, or discard them."""
        beat_t = BEAT(txf.r_data)
        move = mvq.r_rdy & txf.r_rdy & (mvq.r_data[0] | rxf.w_rdy)
        lk.d.comb += [
            txf.r_en.eq(move),
            rxf.w_data.eq(txf.r_data),
            rxf.w_en.eq(move & ~mvq.r_data[0]),
            mvq.r_en.eq(move & beat_t.eop),
        ]
