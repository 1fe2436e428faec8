"""Receive adapter: Stratix IV hard IP Avalon-ST 128 (RX) to the internal TLP stream."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..util import RegisterSlice, count_saturating, dw_mask
from .align import ends_low, payload_dws, payload_start, select_lanes
from .layouts import TLPHeader
from .stream import TLPBeat, TLPStream

__all__ = ["AvalonST128RX"]


_RXBeat = data.StructLayout({
    "data":   128,
    "sop":    1,
    "eop":    1,
    "empty":  1,
    "err":    1,
    # Start-of-packet decode of the header in `data`, computed as the beat is written:
    "bar":      8,      # rx_st_bardec for a memory request, else 0
    "s_mod":    2,      # s mod 4 (see peach2.tlp.align)
    "len":      11,     # payload DWs
    "len_le4":  1,      # len <= 4
    "len_mask": 4,      # dw_mask(len)
    "two":      1,      # the header predicts two Avalon beats
    "togo":     9,      # predicted Avalon beats - 2
    "exp_low":  1,      # predicted rx_st_empty of the last beat
    "sop_bad":  1,      # outside a packet: drop the beat and the rest of its packet
    "g_single": 1,      # outside a packet: a good single-beat TLP
    "g_start":  1,      # outside a packet: a good start of a longer TLP
})


class _RXState:
    """The receive adapter's per-packet registers."""

    def __init__(self):
        self.hdr      = Signal(TLPHeader)
        self.bar      = Signal(8)
        self.s_mod    = Signal(2)        # s mod 4: 3, 0 or 1
        self.rem      = Signal(11)       # payload DWs not yet sent on o_tlp
        self.rem_le4  = Signal()         # rem <= 4: the next output beat is the last
        self.rem_mask = Signal(4)        # dw_mask(rem)
        self.togo     = Signal(9)        # Avalon beats the header predicts after the head beat
        self.last_exp = Signal()         # the head beat is the last one the header predicts
        self.feo      = Signal()         # an output beat may leave with the head beat (s != 5 or
                                         # the second beat taken)
        self.exp_low  = Signal()         # predicted rx_st_empty of the last beat
        self.prev     = Signal(128)      # previous Avalon beat (alignment carry)
        self.emitted  = Signal()         # a beat of this packet has left
        self.perr     = Signal()         # rx_st_err seen in this packet
        self.pmal     = Signal()         # framing disagreed with the header
        self.in_pkt   = Signal()
        self.flush    = Signal()         # one more output beat from `prev`
        self.discard  = Signal()         # drop Avalon beats up to end of packet


class AvalonST128RX(wiring.Component):
    """Stratix IV hard IP for PCI Express, 128-bit Avalon-ST receive side, to the TLP stream.

    Removes the hard IP's quad-word alignment padding so that payload DW 0 leaves in lane 0 of
    the first beat, beside the header (see :mod:`peach2.tlp.stream`).  Framing rules are those of
    the vendor's user guide (Stratix IV GX hard IP, IP Compiler for PCI Express, Avalon-ST 128;
    ``docs/adapters.md``).

    Behaviour
    ---------
    - ``rx_st_ready`` honours ready latency 2: it is a register that falls while the input FIFO
      still has room for the up to two beats the hard IP may send after seeing it low.
    - One Avalon beat is accepted per cycle in the steady state.  When the payload is rotated
      (``s`` = 3 or 5, see :mod:`peach2.tlp.align`) and its last DWs sit in the final Avalon
      beat's upper lanes, one extra output cycle sends them; the next packet's start-of-packet
      beat is taken in that same cycle, so back-to-back packets see no bubble unless the next
      packet is a single-beat TLP.
    - ``o_tlp`` is driven from registers, with a skid register behind them: a beat leaves two
      cycles after the Avalon beat that completes it enters the FIFO, and ``o_tlp.ready`` reaches
      only those registers, none of the adapter's decisions.
    - A TLP flagged by ``rx_st_err``, or whose framing disagrees with its header (``eop`` not on
      the beat the length field predicts, wrong ``empty``, a TLP prefix, a new ``sop`` before
      ``eop``, a beat outside a packet), is dropped and counted once: in ``err_count`` when
      ``rx_st_err`` was seen, else in ``malformed_count``.  When the problem shows on the
      start-of-packet beat the TLP never appears on ``o_tlp``; otherwise it has started to flow
      (cut-through) and its last beat leaves with ``err`` set, so downstream discards it.
    - Headers leave normalised: DW 3 of a 3-DW header is zero, ``td`` is cleared (digests do not
      travel inside the chip; the hard IP variant must have ECRC forwarding off, so none reaches
      the adapter), and ``bar`` is the hard IP's ``rx_st_bardec`` for memory requests, zero for
      every other TLP.

    Members
    -------
    rx_st_data, rx_st_sop, rx_st_eop, rx_st_empty, rx_st_valid, rx_st_err, rx_st_bardec, rx_st_be : In
        From the hard IP (``rx_st_*0``).  ``rx_st_be`` is not needed: byte enables travel in the
        header's ``first_be``/``last_be``.
    rx_st_ready, rx_st_mask : Out
        To the hard IP.  ``rx_st_mask`` follows ``np_hold``.
    np_hold : In(1)
        Ask the hard IP to hold back non-posted requests.
    o_tlp : Out(TLPStream())
        Received TLPs.
    err_count, malformed_count : Out(counter_width)
        Saturating counts of dropped TLPs.
    err_event, malformed_event : Out(1)
        One-cycle strobe per TLP counted (for a register block's own counters); registered, high
        the cycle after the adapter ends the TLP, when the count moves.
    """

    def __init__(self, *, fifo_depth=8, counter_width=32):
        """``fifo_depth`` (at least 5) sets the input FIFO that absorbs ready latency 2."""
        if fifo_depth < 5:
            raise ValueError(f"fifo_depth must be at least 5 to take one beat per cycle with "
                             f"ready latency 2, not {fifo_depth}")
        self._fifo_depth = fifo_depth
        super().__init__({
            "rx_st_data":      In(128),
            "rx_st_sop":       In(1),
            "rx_st_eop":       In(1),
            "rx_st_empty":     In(1),
            "rx_st_valid":     In(1),
            "rx_st_err":       In(1),
            "rx_st_bardec":    In(8),
            "rx_st_be":        In(16),
            "rx_st_ready":     Out(1),
            "rx_st_mask":      Out(1),
            "np_hold":         In(1),
            "o_tlp":           Out(TLPStream()),
            "err_count":       Out(counter_width),
            "malformed_count": Out(counter_width),
            "err_event":       Out(1),
            "malformed_event": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        fifo = self._input_fifo(m)

        # -- the head beat and its stored start-of-packet decode ---------------------------------
        cur = data.View(_RXBeat, fifo.r_data)
        c_fmt = data.View(TLPHeader, cur.data).common.fmt.as_value()
        c_has_data = c_fmt[1]
        # The header as it travels inside the chip: DW 3 of a 3-DW header zero, no digest (td is
        # DW 0 bit 15).  Built as one expression: Icarus never evaluates an `always @*` block
        # that Amaranth emits for a constant-only assignment.
        c_hdr_out = Cat(cur.data[:15], Const(0, 1), cur.data[16:96],
                        Mux(c_fmt[0], cur.data[96:128], 0))

        # -- per-packet state --------------------------------------------------------------------
        st = _RXState()

        # -- output register with a skid buffer: o_tlp is driven from registers, and o_tlp.ready
        # reaches only these registers, never the decisions below. ------------------------------
        m.submodules.out = out = RegisterSlice(TLPBeat)
        wiring.connect(m, out.o, wiring.flipped(self.o_tlp))
        nv = out.i.valid                # the next output beat
        nxt = out.i.p
        rdy = out.i.ready               # the registers take a beat this cycle if nv

        # -- drop counters: the strobes are registered (high the cycle after the TLP ends) -------
        ev_err = Signal()
        ev_mal = Signal()
        m.d.sync += [self.err_event.eq(ev_err), self.malformed_event.eq(ev_mal)]
        count_saturating(m, self.err_count, self.err_event)
        count_saturating(m, self.malformed_count, self.malformed_event)

        def offset(sm):
            # RX rotation: internal lane j of beat k comes from Avalon position s + 4k + j.
            return Mux(sm == 0, 4, sm)

        def end_packet(err, mal):
            m.d.comb += [ev_err.eq(err), ev_mal.eq(mal & ~err)]

        # -- the next output beat's contents -----------------------------------------------------
        # Three sources, told apart by registers alone: a flush of `prev` after the end of a
        # packet, a beat of the packet in progress, or a single-beat packet at the head.  `nv`
        # (below) says whether there is one; `flush` and a packet in progress never coincide
        # with each other's emission (see the input side).
        in_prog = st.flush | st.in_pkt
        last_short = cur.eop & ~st.last_exp
        is_last = st.rem_le4 | last_short
        perr_next = st.perr | cur.err
        pmal_next = st.pmal | last_short | (st.last_exp & ~cur.eop) \
            | (cur.eop & st.last_exp & (cur.empty != st.exp_low))
        m.d.comb += [
            nxt.hdr.eq(Mux(in_prog, st.hdr.as_value(), c_hdr_out)),
            nxt.bar.eq(Mux(in_prog, st.bar, cur.bar)),
            nxt.data.eq(select_lanes(Mux(st.flush | (st.in_pkt & st.feo), st.prev, cur.data),
                                     Mux(st.flush, st.prev, cur.data),
                                     offset(Mux(in_prog, st.s_mod, cur.s_mod)))),
            nxt.dw_en.eq(Mux(in_prog, st.rem_mask, Cat(c_has_data, Const(0, 3)))),
            nxt.first.eq(~in_prog | ~st.emitted),
            nxt.last.eq(st.flush | ~st.in_pkt | is_last),
            nxt.err.eq(Mux(st.flush, st.perr | st.pmal,
                           st.in_pkt & is_last & (perr_next | pmal_next))),
        ]

        # -- decisions: flat conditions on the state registers and the stored head decode ------
        # `discard` is only ever set together with `in_pkt`.
        # Each kind is written twice: without the FIFO's `r_rdy` for its read enable (the FIFO
        # ignores `r_en` while empty), and with it for the state updates.
        emit = Signal()     # a beat of the packet in progress sends an output beat
        m.d.comb += emit.eq(st.feo | cur.eop)
        # The output registers are free this cycle (for an immediate emission) only without a
        # flush; a flush finishing this cycle frees the packet registers for a new start.
        regs_free = ~st.flush | rdy
        cont = st.in_pkt & ~st.discard & ~cur.sop     # a beat of the packet in progress
        skip = st.discard & ~cur.sop               # a beat to drop up to the end of packet
        drop = ~st.in_pkt & cur.sop_bad            # a stray beat, or a TLP to drop at its start
        single = ~st.in_pkt & cur.g_single         # a good single-beat TLP
        start = ~st.in_pkt & cur.g_start           # a good TLP of two Avalon beats or more
        take = Signal()
        m.d.comb += [
            take.eq((st.in_pkt & ~cur.sop & (st.discard | ~emit | rdy))
                    | (~st.in_pkt & Mux(cur.g_single, ~st.flush & rdy, regs_free))),
            fifo.r_en.eq(take),
        ]
        hv = fifo.r_rdy
        cut      = Signal()     # a new start of packet while a packet is in progress
        t_skip   = Signal()
        t_cont   = Signal()
        t_drop   = Signal()
        t_start  = Signal()
        m.d.comb += [
            cut.eq(hv & st.in_pkt & cur.sop),
            t_skip.eq(hv & skip),
            t_cont.eq(hv & cont & (~emit | rdy)),
            t_drop.eq(hv & drop & regs_free),
            t_start.eq(hv & start & regs_free),
            nv.eq(st.flush | (hv & ((cont & emit) | (single & ~st.flush)))),
        ]

        # -- output side: the alignment carry left after the end of packet ----------------------
        with m.If(st.flush & rdy):
            m.d.sync += st.flush.eq(0)

        # -- input side --------------------------------------------------------------------------
        with m.If(cut):
            # A new packet starts before the current one ended: end the current one as
            # malformed (with `err` if part of it has left) and take the new one next cycle.
            with m.If(~st.discard):
                m.d.sync += [st.flush.eq(st.emitted), st.pmal.eq(1)]
                end_packet(st.perr, 1)
            m.d.sync += [st.discard.eq(0), st.in_pkt.eq(0)]

        with m.If(t_skip & cur.eop):
            m.d.sync += [st.discard.eq(0), st.in_pkt.eq(0)]

        with m.If(t_cont):
            m.d.sync += [
                st.feo.eq(1),
                st.togo.eq(st.togo - 1),
                st.last_exp.eq(st.togo == 1),
                st.perr.eq(perr_next),
                st.pmal.eq(pmal_next),
            ]
            with m.If(emit):
                m.d.sync += [
                    st.rem.eq(Mux(st.rem_le4, 0, st.rem - 4)),
                    st.rem_le4.eq(st.rem_le4 | (st.rem <= 8)),
                    st.rem_mask.eq(Mux(st.rem_le4, 0, dw_mask(st.rem - 4))),
                    st.emitted.eq(1),
                ]
            with m.If(cur.eop):
                m.d.sync += [st.in_pkt.eq(0), st.flush.eq(~is_last)]
                end_packet(perr_next, pmal_next)
            with m.Elif(st.last_exp):
                # Data is complete but the packet goes on: finish it, then drop the rest.
                m.d.sync += [st.discard.eq(1), st.flush.eq(~is_last)]
                end_packet(perr_next, 1)

        with m.If(t_drop):
            # A stray beat, or a start of packet with rx_st_err, a TLP prefix or framing that
            # disagrees with its header: nothing has left, drop the whole packet.
            with m.If(~cur.eop):
                m.d.sync += [st.in_pkt.eq(1), st.discard.eq(1)]
            end_packet(cur.sop & cur.err, 1)

        # The alignment carry.
        with m.If(t_cont | t_start):
            m.d.sync += st.prev.eq(cur.data)

        with m.If(t_start):
            self._load_packet(m, st, cur, c_hdr_out)

        return m

    def _input_fifo(self, m):
        """The FIFO behind ``rx_st_*`` (ready latency 2), each beat stored with its
        start-of-packet decode; ``rx_st_ready`` and ``rx_st_mask``.  Returns the FIFO."""
        # -- ready latency 2: a small FIFO absorbs the beats still in flight ----------------------
        # First-word fall-through (LUTRAM-sized): a beat is readable the cycle after it arrives.
        # Each beat is stored with its start-of-packet decode (computed from the hard IP's
        # outputs as it is written, meaningful only on a `sop` beat), so that the decisions at the
        # FIFO's head start from stored bits instead of header arithmetic.
        m.submodules.fifo = fifo = SyncFIFO(width=_RXBeat.size, depth=self._fifo_depth)
        w_beat = data.View(_RXBeat, fifo.w_data)
        w_hdr = data.View(TLPHeader, self.rx_st_data)
        w_fmt = w_hdr.common.fmt.as_value()
        w_len = payload_dws(w_hdr)
        w_s = payload_start(w_hdr)
        w_total = Mux(w_fmt[1], w_s + w_len, 3 + w_fmt[0])
        # One Avalon beat: a header-only TLP (3 or 4 DWs), or a 3-DW header with s = 3 and one
        # payload DW (4 DWs); so avalon_beats(w_total) == 1 without the adder, and the expected
        # `empty` of such a beat is always 0.
        w_single = ~w_fmt[1] | (~w_fmt[0] & w_hdr.dw[2][2] & (w_hdr.common.length == 1))
        w_length = w_hdr.common.length
        w_s3 = ~w_fmt[0] & w_hdr.dw[2][2]
        w_s5 = w_fmt[0] & w_hdr.dw[3][2]
        w_long = w_fmt[1] & ((w_length == 0) | (w_length >= 6)
                             | (~w_s3 & (w_length == 5)) | (w_s5 & (w_length == 4)))
        w_sop_bad = self.rx_st_err | w_fmt[2] | Mux(
            w_single, ~self.rx_st_eop | self.rx_st_empty, self.rx_st_eop)
        w_is_mem = w_hdr.common.type.as_value()[1:] == 0      # MEM or MEM_LOCKED
        m.d.comb += [
            w_beat.data.eq(self.rx_st_data),
            w_beat.sop.eq(self.rx_st_sop),
            w_beat.eop.eq(self.rx_st_eop),
            w_beat.empty.eq(self.rx_st_empty),
            w_beat.err.eq(self.rx_st_err),
            w_beat.bar.eq(Mux(w_is_mem, self.rx_st_bardec, 0)),
            w_beat.s_mod.eq(w_s[:2]),
            w_beat.len.eq(w_len),
            w_beat.len_le4.eq(w_len <= 4),
            w_beat.len_mask.eq(dw_mask(w_len)),
            # Two beats: neither one nor three or more (s + L >= 9, with payload).
            w_beat.two.eq(~w_single & ~w_long),
            # avalon_beats(w_total) - 2 = (s + L + 3) // 4 - 2, as one addition.
            w_beat.togo.eq((w_len + (w_s - 5)) >> 2),
            w_beat.exp_low.eq(ends_low(w_total)),
            # Outside a packet: a beat without sop, or a start of packet with rx_st_err, a TLP
            # prefix (not supported), or framing that disagrees with the header (a single beat
            # must end with the right `empty`, a longer TLP must not end on its first beat), is
            # dropped whole; the others are good single-beat TLPs or good starts.
            w_beat.sop_bad.eq(~self.rx_st_sop | w_sop_bad),
            w_beat.g_single.eq(self.rx_st_sop & ~w_sop_bad & w_single),
            w_beat.g_start.eq(self.rx_st_sop & ~w_sop_bad & ~w_single),
            fifo.w_en.eq(self.rx_st_valid),
            self.rx_st_mask.eq(self.np_hold),
        ]
        # Registered: beats permitted at t-2 and t-1 may still arrive after ready falls at t, and
        # level can grow by one more while this register updates.
        m.d.sync += self.rx_st_ready.eq(fifo.level <= self._fifo_depth - 4)
        return fifo

    def _load_packet(self, m, st, cur, c_hdr_out):
        """A good TLP of two Avalon beats or more starts: its head decode into the state."""
        m.d.sync += [
            st.hdr.eq(c_hdr_out),
            st.bar.eq(cur.bar),
            st.s_mod.eq(cur.s_mod),
            st.rem.eq(cur.len),
            st.rem_le4.eq(cur.len_le4),
            st.rem_mask.eq(cur.len_mask),
            st.togo.eq(cur.togo),
            st.last_exp.eq(cur.two),
            st.feo.eq(cur.s_mod != 1),
            st.exp_low.eq(cur.exp_low),
            st.emitted.eq(0),
            st.perr.eq(0),
            st.pmal.eq(0),
            st.in_pkt.eq(1),
        ]
