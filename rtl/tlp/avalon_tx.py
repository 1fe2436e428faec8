"""Transmit adapter: the internal TLP stream to Stratix IV hard IP Avalon-ST 128 (TX)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..util import count_saturating
from .align import ends_low, internal_beats, payload_dws, payload_start, select_lanes
from .layouts import TLPHeader
from .stream import TLPStream

__all__ = ["AvalonST128TX", "LUTRAM_DEPTH"]

#: Packet FIFOs up to this many beats are built for distributed RAM (MLAB on Stratix IV).
LUTRAM_DEPTH = 64


_TXData = data.StructLayout({
    "data":  128,
    "dw_en": 4,
    "last":  1,
    "err":   1,
})


# A header in the header FIFO, with its Avalon framing decoded as it is written (so that starting
# a packet needs no header arithmetic at the FIFO's head).
_TXHead = data.StructLayout({
    "hdr":     TLPHeader,
    "s_mod":   2,       # s mod 4 (see peach2.tlp.align)
    "s3":      1,       # s == 3 with payload: payload DW 0 goes out beside the header
    "low":     1,       # tx_st_empty of the last beat
    "single":  1,       # one Avalon beat
    "two":     1,       # two Avalon beats
    "long":    1,       # three Avalon beats or more
    "av_left": 9,       # Avalon beats - 2
    "nb":      9,       # internal beats
    "nb1":     1,       # nb == 1
    "nb2":     1,       # nb == 2
})


class _TXState:
    """The transmit adapter's per-packet registers and its drop strobes.

    Beat indices are kept as down-counters with their "one left" / "none left" flags in
    registers, so that no comparison of two counters sits in front of a decision.
    """

    def __init__(self):
        self.s_mod    = Signal(2)
        self.low      = Signal()     # tx_st_empty of the last beat
        self.av_left  = Signal(9)    # Avalon beats after the next one
        self.av_last  = Signal()     # the next Avalon beat is the last (av_left == 0)
        self.past2    = Signal()     # two Avalon beats or more have been presented
        self.int_left = Signal(9)    # internal beats still to take
        self.int_none = Signal()     # int_left == 0
        self.int_one  = Signal()     # int_left == 1: the next internal beat should be the last
        self.carry    = Signal(128)  # last internal beat taken
        self.int_done = Signal()     # the internal packet's last beat has been taken
        self.overlong = Signal()     # the internal packet has more beats than its length says
        self.aborting = Signal()     # ended early with err: pad to three beats, then nullify
        self.ev_underrun = Signal()
        self.ev_malformed = Signal()
        self.ev_dropped = Signal()


class AvalonST128TX(wiring.Component):
    """The TLP stream to the Stratix IV hard IP for PCI Express, 128-bit Avalon-ST transmit side.

    Inserts the hard IP's quad-word alignment (``docs/adapters.md``): header DWs first, the payload
    rotated so that its first DW sits in an even lane when address bit 2 (lower-address bit 2
    for completions) is 0 and in an odd lane when it is 1, ``tx_st_empty`` set when the packet
    ends in the low quad word.

    Behaviour
    ---------
    - A nullified TLP always has three Avalon beats or more (the hard IP accepts nothing
      shorter): a packet that ends early with ``err`` after it started is padded to three.
    - Ready latency 2: a beat is presented at cycle ``t`` only when ``tx_st_ready`` was high at
      ``t-2``.  Outputs are registers.
    - The hard IP requires ``tx_st_valid`` to stay high from ``sop`` to ``eop`` on every ready
      cycle.  A packet therefore starts only when it lies completely in the packet FIFO
      (store-and-forward), or, with ``start_level`` set, as soon as that many beats are buffered
      (cut-through: then the source must deliver the rest of the packet without gaps).  A gap
      that still happens is an underrun: ``tx_st_valid`` drops and ``underrun_count`` counts the
      cycle.  A FIFO full with a partial packet also starts it, so no packet size deadlocks;
      if that packet's header says one or two beats it is overlong, and is dropped as
      malformed instead.
    - A packet whose last beat carries ``err`` is dropped and counted in ``dropped_count``.  When
      it lies whole in the FIFO before it starts (always, in store-and-forward) nothing of it
      is sent.  A packet already started (cut-through) is nullified: it ends at once with
      ``tx_st_eop`` and ``tx_st_err``.  The hard IP accepts nullification only for posted and
      completion TLPs with payload longer than two beats, so TLPs of one or two Avalon beats
      are always held whole, whatever ``start_level``.
    - A packet whose beat count disagrees with its length field is counted in
      ``malformed_count`` and treated the same way: dropped unsent when held whole, else
      nullified with the rest of it dropped.
    - In the steady state one beat leaves per cycle with no bubble between packets; the link,
      not the adapter, sets the pace (a 256-byte write is 16 beats inside, 17 or 18 here).

    Members
    -------
    i_tlp : In(TLPStream())
        TLPs to send.
    tx_st_data, tx_st_sop, tx_st_eop, tx_st_empty, tx_st_valid, tx_st_err : Out
        To the hard IP (``tx_st_*0``).
    tx_st_ready, tx_cred : In
        From the hard IP.  ``tx_cred`` is not used: the hard IP holds ``tx_st_ready`` low while
        the link partner lacks credits for the packet at its head.
    underrun_count, malformed_count, dropped_count : Out(counter_width)
        Saturating event counts (underrun: cycles; malformed and dropped: packets).
    sent_event : Out(1)
        One-cycle strobe per TLP sent whole (its last beat goes out without ``tx_st_err``); a
        register, high while that last beat is on ``tx_st_*``.
    """

    def __init__(self, *, depth=512, hdr_depth=32, start_level=None, counter_width=32):
        if depth < 4 or hdr_depth < 2:
            raise ValueError(f"depth must be at least 4 and hdr_depth at least 2, not {depth} "
                             f"and {hdr_depth}")
        if start_level is not None and not 1 <= start_level <= depth:
            raise ValueError(f"start_level must be in 1..{depth}, not {start_level}")
        self._depth = depth
        self._hdr_depth = hdr_depth
        self._start_level = depth if start_level is None else start_level
        super().__init__({
            "i_tlp":           In(TLPStream()),
            "tx_st_data":      Out(128),
            "tx_st_sop":       Out(1),
            "tx_st_eop":       Out(1),
            "tx_st_empty":     Out(1),
            "tx_st_valid":     Out(1),
            "tx_st_err":       Out(1),
            "tx_st_ready":     In(1),
            "tx_cred":         In(36),
            "underrun_count":  Out(counter_width),
            "malformed_count": Out(counter_width),
            "dropped_count":   Out(counter_width),
            "sent_event":      Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        dfifo, hfifo, sfifo, room_d = self._input_side(m)

        # -- head of the FIFOs -------------------------------------------------------------------
        d = data.View(_TXData, dfifo.r_data)
        hh = data.View(_TXHead, hfifo.r_data)
        h = hh.hdr
        h_fmt = h.common.fmt.as_value()
        h_four = h_fmt[0]
        h_has_data = h_fmt[1]

        # -- per-packet state --------------------------------------------------------------------
        st = _TXState()
        count_saturating(m, self.underrun_count, st.ev_underrun)
        count_saturating(m, self.malformed_count, st.ev_malformed)
        count_saturating(m, self.dropped_count, st.ev_dropped)

        # Ready latency 2 with registered outputs: the beat computed at t is seen at t+1 and
        # needs tx_st_ready at t-1.
        advance = Signal()
        m.d.sync += advance.eq(self.tx_st_ready)

        m.d.sync += [
            self.tx_st_valid.eq(0),
            self.tx_st_sop.eq(0),
            self.tx_st_eop.eq(0),
            self.tx_st_err.eq(0),
            self.tx_st_empty.eq(0),
            self.sent_event.eq(0),
        ]

        # A complete packet at the head that ended with `err` is dropped without a trace on the
        # link (the hard IP may only nullify some TLPs, and not those of one or two beats).
        head_bad = sfifo.r_rdy & sfifo.r_data.any()
        # Cut-through only for TLPs of three or more Avalon beats: the hard IP cannot nullify
        # shorter ones, so those are always held whole.
        can_start = hfifo.r_rdy & dfifo.r_rdy & (
            (sfifo.r_rdy & ~sfifo.r_data.any())
            | (hh.long & ((dfifo.level >= self._start_level) | ~room_d)))

        with m.FSM():
            with m.State("IDLE"):
                with m.If(hfifo.r_rdy & head_bad):
                    m.d.comb += [hfifo.r_en.eq(1),
                                 st.ev_dropped.eq(sfifo.r_data[0]),
                                 st.ev_malformed.eq(sfifo.r_data[1])]
                    m.next = "DROP"
                with m.Elif(hfifo.r_rdy & ~sfifo.r_rdy & ~dfifo.w_rdy & ~hh.long):
                    # A TLP of one or two beats that fills the FIFO without ending is overlong.
                    m.d.comb += [hfifo.r_en.eq(1), st.ev_malformed.eq(1)]
                    m.next = "DROP"
                with m.Elif(advance & can_start):
                    m.d.comb += hfifo.r_en.eq(1)
                    s3 = hh.s3
                    lane3 = Mux(h_four, h.dw[3], Mux(s3, d.data[:32], 0))
                    beat0 = Cat(h.dw[0], h.dw[1], h.dw[2], lane3)
                    m.d.sync += [
                        st.s_mod.eq(hh.s_mod),
                        st.low.eq(hh.low),
                        st.av_left.eq(hh.av_left),
                        st.av_last.eq(hh.two),
                        st.past2.eq(0),
                        st.int_left.eq(hh.nb),
                        st.int_none.eq(0),
                        st.int_one.eq(hh.nb1),
                        st.int_done.eq(0),
                        st.overlong.eq(0),
                        st.aborting.eq(0),
                    ]
                    with m.If(~h_has_data | s3):
                        abort = self._take_internal(m, st, d, dfifo, hh.nb1, hh.nb, hh.nb2)
                        single = hh.single
                        overlong0 = ~d.last & hh.nb1
                        self._emit(m, beat0, 1, single, single & (abort | overlong0), hh.low)
                        with m.If(single):
                            m.next = "IDLE"
                            with m.If(overlong0):
                                m.d.comb += st.ev_malformed.eq(1)
                                m.next = "DROP"
                        with m.Else():
                            # Only TLPs of three or more beats start before they are whole,
                            # and the hard IP nullifies nothing shorter: pad an early end.
                            m.d.sync += st.aborting.eq(abort)
                            m.next = "DATA"
                    with m.Else():
                        self._emit(m, beat0, 1, 0, 0, 0)
                        m.next = "DATA"

            with m.State("DATA"):
                with m.If(advance):
                    need = ~st.int_done & ~st.int_none & ~st.aborting
                    with m.If(need & ~dfifo.r_rdy):
                        m.d.comb += st.ev_underrun.eq(1)
                    with m.Else():
                        lanes = select_lanes(st.carry, d.data,
                                             Mux(st.s_mod == 0, 4, 4 - st.s_mod))
                        abort = Signal()
                        with m.If(need):
                            m.d.comb += abort.eq(self._take_internal(
                                m, st, d, dfifo, st.int_one, st.int_left, st.int_left == 2))
                        stop = abort | st.aborting
                        # An internal packet that is still going at its predicted end is overlong.
                        over = st.overlong | (need & ~d.last & st.int_one)
                        # A nullified TLP needs three beats or more: `past2` says this beat is
                        # the third or later.
                        end = st.av_last | (stop & st.past2)
                        self._emit(m, lanes, 0, end, (stop | over) & end, Mux(stop, 0, st.low))
                        m.d.sync += [st.av_left.eq(st.av_left - 1),
                                     st.av_last.eq(st.av_left == 1), st.past2.eq(1)]
                        with m.If(stop & ~end):
                            m.d.sync += st.aborting.eq(1)
                        with m.If(end):
                            m.next = "IDLE"
                            with m.If(over & ~stop):
                                m.d.comb += st.ev_malformed.eq(1)
                                m.next = "DROP"

            with m.State("DROP"):
                # Discard the rest of an overlong internal packet.
                with m.If(dfifo.r_rdy):
                    m.d.comb += dfifo.r_en.eq(1)
                    with m.If(d.last):
                        m.next = "IDLE"

        return m

    def _emit(self, m, data_, sop, eop, err, empty):
        """Present an Avalon beat on ``tx_st_*`` in the next cycle."""
        m.d.sync += [
            self.tx_st_data.eq(data_),
            self.tx_st_valid.eq(1),
            self.tx_st_sop.eq(sop),
            self.tx_st_eop.eq(eop),
            self.tx_st_err.eq(err),
            self.tx_st_empty.eq(empty),
            # Registered like the beat: high while the eop beat is on tx_st_*.
            self.sent_event.eq(eop & ~err),
        ]

    def _take_internal(self, m, st, d, dfifo, one, left, two):
        """Take the head internal beat ``d``, ``one`` saying it should be the packet's last,
        ``left`` the count still to take before it and ``two`` whether that is 2; return
        abort."""
        early = d.last & ~one
        m.d.comb += dfifo.r_en.eq(1)
        m.d.sync += [st.carry.eq(d.data), st.int_done.eq(d.last),
                     st.int_left.eq(left - 1), st.int_none.eq(one), st.int_one.eq(two)]
        with m.If(~d.last & one):
            m.d.sync += st.overlong.eq(1)
        with m.If(d.last & d.err):
            m.d.comb += st.ev_dropped.eq(1)
        with m.Elif(early):
            m.d.comb += st.ev_malformed.eq(1)
        return early | (d.last & d.err)

    def _input_side(self, m):
        """The packet FIFOs, the header decode written with each packet and the per-packet
        status; returns the data, header and status FIFOs and the data FIFO's room flag."""
        # -- packet FIFO: payload beats, and one header per packet ------------------------------
        # Up to LUTRAM_DEPTH beats the FIFO reads asynchronously (readable one cycle after a
        # write); deeper ones are block RAM with a registered read (two cycles).
        fifo_cls = SyncFIFO if self._depth <= LUTRAM_DEPTH else SyncFIFOBuffered
        m.submodules.dfifo = dfifo = fifo_cls(width=_TXData.size, depth=self._depth)
        m.submodules.hfifo = hfifo = SyncFIFO(width=_TXHead.size, depth=self._hdr_depth)
        # Status of each complete packet ([0] ended with `err`, [1] beat count disagrees with
        # its length field), so that a bad packet held whole is dropped unsent.
        m.submodules.sfifo = sfifo = SyncFIFO(width=2, depth=self._hdr_depth)
        i = self.i_tlp
        w_d = data.View(_TXData, dfifo.w_data)
        # Room flags from registers: at most one beat is written per cycle, so a FIFO holding at
        # most depth - 2 entries in the previous cycle has room now.  `i_tlp.ready` then comes
        # from flip-flops through one LUT, and no path runs from the FIFO levels through the
        # crossbar's grant into the other blocks (the 6-level budget); each FIFO gives up one entry.
        room_d, room_h, room_s = Signal(), Signal(), Signal()
        m.d.sync += [room_d.eq(dfifo.level <= self._depth - 2),
                     room_h.eq(hfifo.level <= self._hdr_depth - 2),
                     room_s.eq(sfifo.level <= self._hdr_depth - 2)]
        m.d.comb += [
            i.ready.eq(room_d & (room_h | ~i.p.first) & (room_s | ~i.p.last)),
            w_d.data.eq(i.p.data),
            w_d.dw_en.eq(i.p.dw_en),
            w_d.last.eq(i.p.last),
            w_d.err.eq(i.p.err),
            dfifo.w_en.eq(i.valid & i.ready),
            hfifo.w_en.eq(i.valid & i.ready & i.p.first),
        ]
        # The framing decode of the header, in closed forms where they are short: the payload
        # starts at s = 3 only for a 3-DW header with address bit 2 set; one Avalon beat is a
        # header-only TLP or s = 3 with one payload DW; three beats or more is s + L >= 9.
        ih = i.p.hdr
        i_fmt = ih.common.fmt.as_value()
        i_four = i_fmt[0]
        i_has_data = i_fmt[1]
        i_length = ih.common.length
        i_len = payload_dws(ih)
        i_s = payload_start(ih)
        i_s3 = i_has_data & ~i_four & ih.dw[2][2]
        i_s5 = i_four & ih.dw[3][2]
        i_single = ~i_has_data | (i_s3 & (i_length == 1))
        i_long = i_has_data & ((i_length == 0) | (i_length >= 6)
                               | (~i_s3 & (i_length == 5)) | (i_s5 & (i_length == 4)))
        i_nb1 = ~i_has_data | ((i_length != 0) & (i_length <= 4))
        i_nb2 = i_has_data & (i_length >= 5) & (i_length <= 8)
        w_h = data.View(_TXHead, hfifo.w_data)
        m.d.comb += [
            w_h.hdr.eq(ih),
            w_h.s_mod.eq(i_s[:2]),
            w_h.s3.eq(i_s3),
            w_h.low.eq(ends_low(Mux(i_has_data, i_s + i_len, 3 + i_four))),
            w_h.single.eq(i_single),
            w_h.two.eq(~i_single & ~i_long),
            w_h.long.eq(i_long),
            # (s + L + 3) // 4 - 2 as one addition
            w_h.av_left.eq((i_len + (i_s - 5)) >> 2),
            w_h.nb.eq(internal_beats(ih)),
            w_h.nb1.eq(i_nb1),
            w_h.nb2.eq(i_nb2),
        ]

        # One status entry per complete packet (written with its last beat): while the status
        # FIFO has an entry, the packet at the head is complete.
        pkt_in = dfifo.w_en & i.p.last
        pkt_out = dfifo.r_en & data.View(_TXData, dfifo.r_data).last
        # Beat count check at the input: beats the current input packet should still have after
        # the last one written, and whether that is exactly one.
        in_left = Signal(9)
        in_one = Signal()
        with m.If(dfifo.w_en):
            with m.If(i.p.first):
                m.d.sync += [in_left.eq(internal_beats(i.p.hdr) - 1), in_one.eq(i_nb2)]
            with m.Else():
                m.d.sync += [in_left.eq(in_left - 1), in_one.eq(in_left == 2)]
        # The beat is the packet's last: the count disagrees unless exactly one was expected.
        in_bad_count = Mux(i.p.first, ~i_nb1, ~in_one)
        m.d.comb += [
            sfifo.w_data.eq(Cat(i.p.err, ~i.p.err & in_bad_count)),
            sfifo.w_en.eq(pkt_in),
            sfifo.r_en.eq(pkt_out),
        ]
        return dfifo, hfifo, sfifo, room_d

