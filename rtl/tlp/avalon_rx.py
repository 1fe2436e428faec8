"""Receive adapter: Stratix IV hard IP Avalon-ST 128 (RX) to the internal TLP stream."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..util import count_saturating, dw_mask
from .align import avalon_beats, ends_low, payload_dws, payload_start, select_lanes
from .layouts import TLPHeader
from .stream import TLPStream

__all__ = ["AvalonST128RX"]


_RXBeat = data.StructLayout({
    "data":   128,
    "sop":    1,
    "eop":    1,
    "empty":  1,
    "err":    1,
    "bardec": 8,
})


class AvalonST128RX(wiring.Component):
    """Stratix IV hard IP for PCI Express, 128-bit Avalon-ST receive side, to the TLP stream.

    Removes the hard IP's quad-word alignment padding so that payload DW 0 leaves in lane 0 of
    the first beat, beside the header (see :mod:`peach2.tlp.stream`).  Framing rules are those of
    brief section 3 (Stratix IV GX hard IP, IP Compiler for PCI Express, Avalon-ST 128).

    Behaviour
    ---------
    - ``rx_st_ready`` honours ready latency 2: it is a register that falls while the input FIFO
      still has room for the up to two beats the hard IP may send after seeing it low.
    - One Avalon beat is accepted per cycle in the steady state.  When the payload is rotated
      (``s`` = 3 or 5, see :mod:`peach2.tlp.align`) and its last DWs sit in the final Avalon
      beat's upper lanes, one extra output cycle sends them; the next packet's start-of-packet
      beat is taken in that same cycle, so back-to-back packets see no bubble unless the next
      packet is a single-beat TLP.
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
        One-cycle strobe per TLP counted (for a register block's own counters).
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

        # -- ready latency 2: a small FIFO absorbs the beats still in flight ----------------------
        # First-word fall-through (LUTRAM-sized): a beat is readable the cycle after it arrives.
        m.submodules.fifo = fifo = SyncFIFO(width=_RXBeat.size, depth=self._fifo_depth)
        w_beat = data.View(_RXBeat, fifo.w_data)
        m.d.comb += [
            w_beat.data.eq(self.rx_st_data),
            w_beat.sop.eq(self.rx_st_sop),
            w_beat.eop.eq(self.rx_st_eop),
            w_beat.empty.eq(self.rx_st_empty),
            w_beat.err.eq(self.rx_st_err),
            w_beat.bardec.eq(self.rx_st_bardec),
            fifo.w_en.eq(self.rx_st_valid),
            self.rx_st_mask.eq(self.np_hold),
        ]
        # Registered: beats permitted at t-2 and t-1 may still arrive after ready falls at t, and
        # level can grow by one more while this register updates.
        m.d.sync += self.rx_st_ready.eq(fifo.level <= self._fifo_depth - 4)

        # -- the head beat and its header, decoded for a possible start of packet ----------------
        cur = data.View(_RXBeat, fifo.r_data)
        cur_hdr = data.View(TLPHeader, cur.data)
        c_fmt = cur_hdr.common.fmt.as_value()
        c_has_data = c_fmt[1]
        c_len = payload_dws(cur_hdr)
        c_s = payload_start(cur_hdr)
        c_total = Mux(c_has_data, c_s + c_len, 3 + c_fmt[0])
        c_beats = avalon_beats(c_total)
        c_single = c_beats == 1
        c_bad_fmt = c_fmt[2]              # TLP prefixes are not supported
        # The header as it travels inside the chip: DW 3 of a 3-DW header zero, no digest (td is
        # DW 0 bit 15).  Built as one expression: Icarus never evaluates an `always @*` block
        # that Amaranth emits for a constant-only assignment.
        c_hdr_out = data.View(TLPHeader, Cat(
            cur.data[:15], Const(0, 1), cur.data[16:96], Mux(c_fmt[0], cur.data[96:128], 0)))
        c_is_mem = cur_hdr.common.type.as_value()[1:] == 0      # MEM or MEM_LOCKED
        c_bar = Mux(c_is_mem, cur.bardec, 0)

        # -- per-packet state --------------------------------------------------------------------
        hdr      = Signal(TLPHeader)
        bar      = Signal(8)
        s_mod    = Signal(2)        # s mod 4: 3, 0 or 1
        rem      = Signal(11)       # payload DWs not yet sent on o_tlp
        n_beats  = Signal(9)        # Avalon beats the header predicts
        cnt      = Signal(9)        # Avalon beats taken so far
        exp_low  = Signal()         # predicted rx_st_empty of the last beat
        prev     = Signal(128)      # previous Avalon beat (alignment carry)
        emitted  = Signal()         # a beat of this packet has left
        perr     = Signal()         # rx_st_err seen in this packet
        pmal     = Signal()         # framing disagreed with the header
        in_pkt   = Signal()
        flush    = Signal()         # one more output beat from `prev`
        discard  = Signal()         # drop Avalon beats up to end of packet

        out = self.o_tlp
        ev_err = Signal()
        ev_mal = Signal()
        count_saturating(m, self.err_count, ev_err)
        count_saturating(m, self.malformed_count, ev_mal)
        m.d.comb += [self.err_event.eq(ev_err), self.malformed_event.eq(ev_mal)]

        def offset(sm):
            # RX rotation: internal lane j of beat k comes from Avalon position s + 4k + j.
            return Mux(sm == 0, 4, sm)

        def end_packet(err, mal):
            m.d.comb += [ev_err.eq(err), ev_mal.eq(mal & ~err)]

        # -- output side: the alignment carry left after the end of packet ----------------------
        with m.If(flush):
            m.d.comb += [
                out.valid.eq(1),
                out.p.hdr.eq(hdr),
                out.p.bar.eq(bar),
                out.p.data.eq(select_lanes(prev, prev, offset(s_mod))),
                out.p.dw_en.eq(dw_mask(rem)),
                out.p.first.eq(~emitted),
                out.p.last.eq(1),
                out.p.err.eq(perr | pmal),
            ]
            with m.If(out.ready):
                m.d.sync += flush.eq(0)
        # The output port is free this cycle (for an immediate emission) only without a flush; a
        # flush finishing this cycle frees the packet registers for a new start of packet.
        regs_free = ~flush | out.ready

        # -- input side --------------------------------------------------------------------------
        take = Signal()
        m.d.comb += fifo.r_en.eq(take)

        with m.If(fifo.r_rdy & (discard | in_pkt) & cur.sop):
            # A new packet starts before the current one ended: end the current one as
            # malformed (with `err` if part of it has left) and take the new one next cycle.
            with m.If(~discard):
                m.d.sync += [flush.eq(emitted), pmal.eq(1)]
                end_packet(perr, 1)
            m.d.sync += [discard.eq(0), in_pkt.eq(0)]

        with m.Elif(fifo.r_rdy & discard):
            m.d.comb += take.eq(1)
            with m.If(cur.eop):
                m.d.sync += [discard.eq(0), in_pkt.eq(0)]

        with m.Elif(fifo.r_rdy & in_pkt):
            first_emit_ok = (s_mod != 1) | (cnt >= 2)
            last_expected = cnt == n_beats - 1
            short = cur.eop & ~last_expected
            long_ = last_expected & ~cur.eop
            bad_low = cur.eop & last_expected & (cur.empty != exp_low)
            emit = first_emit_ok | cur.eop
            n_out = Mux(rem > 4, 4, rem)
            is_last = (rem <= 4) | short
            perr_next = perr | cur.err
            pmal_next = pmal | short | long_ | bad_low
            m.d.comb += [
                out.valid.eq(emit),
                out.p.hdr.eq(hdr),
                out.p.bar.eq(bar),
                out.p.data.eq(select_lanes(Mux(first_emit_ok, prev, cur.data), cur.data,
                                           offset(s_mod))),
                out.p.dw_en.eq(dw_mask(n_out)),
                out.p.first.eq(~emitted),
                out.p.last.eq(is_last),
                out.p.err.eq(is_last & (perr_next | pmal_next)),
                take.eq(~emit | out.ready),
            ]
            with m.If(take):
                m.d.sync += [
                    prev.eq(cur.data),
                    cnt.eq(cnt + 1),
                    perr.eq(perr_next),
                    pmal.eq(pmal_next),
                ]
                with m.If(emit):
                    m.d.sync += [rem.eq(rem - n_out), emitted.eq(1)]
                with m.If(cur.eop):
                    m.d.sync += [in_pkt.eq(0), flush.eq(~is_last)]
                    end_packet(perr_next, pmal_next)
                with m.Elif(long_):
                    # Data is complete but the packet goes on: finish it, then drop the rest.
                    m.d.sync += [discard.eq(1), flush.eq(~is_last)]
                    end_packet(perr_next, 1)

        with m.Elif(fifo.r_rdy):
            # Expecting a start of packet.
            with m.If(~cur.sop):
                # A beat outside any packet: drop up to its end of packet.
                with m.If(regs_free):
                    m.d.comb += take.eq(1)
                    with m.If(~cur.eop):
                        m.d.sync += [in_pkt.eq(1), discard.eq(1)]
                    end_packet(0, 1)
            with m.Elif(c_single):
                bad_single = cur.err | c_bad_fmt | ~cur.eop | (cur.empty != ends_low(c_total))
                with m.If(bad_single):
                    with m.If(regs_free):
                        m.d.comb += take.eq(1)
                        with m.If(~cur.eop):
                            m.d.sync += [in_pkt.eq(1), discard.eq(1)]
                        end_packet(cur.err, 1)
                with m.Elif(~flush):
                    m.d.comb += [
                        out.valid.eq(1),
                        out.p.hdr.eq(c_hdr_out),
                        out.p.bar.eq(c_bar),
                        out.p.data.eq(select_lanes(cur.data, cur.data, offset(c_s[:2]))),
                        out.p.dw_en.eq(Mux(c_has_data, 0b0001, 0)),
                        out.p.first.eq(1),
                        out.p.last.eq(1),
                        take.eq(out.ready),
                    ]
            with m.Else():
                with m.If(regs_free):
                    m.d.comb += take.eq(1)
                    with m.If(cur.eop | cur.err | c_bad_fmt):
                        # Nothing has left yet: drop the whole packet.
                        with m.If(~cur.eop):
                            m.d.sync += [in_pkt.eq(1), discard.eq(1)]
                        end_packet(cur.err, 1)
                    with m.Else():
                        m.d.sync += [
                            hdr.eq(c_hdr_out),
                            bar.eq(c_bar),
                            s_mod.eq(c_s[:2]),
                            rem.eq(c_len),
                            n_beats.eq(c_beats),
                            cnt.eq(1),
                            exp_low.eq(ends_low(c_total)),
                            prev.eq(cur.data),
                            emitted.eq(0),
                            perr.eq(0),
                            pmal.eq(0),
                            in_pkt.eq(1),
                        ]

        return m
