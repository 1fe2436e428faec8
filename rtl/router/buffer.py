"""Per-input packet buffer in block RAM, cut-through."""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..tlp.layouts import TLPHeader
from ..tlp.stream import TLPStream
from .egress import translate_header

__all__ = ["PacketBuffer"]


_DataEntry = data.StructLayout({"data": 128, "dw_en": 4, "first": 1, "last": 1, "err": 1})


class PacketBuffer(wiring.Component):
    """A FIFO of TLPs with a per-packet side value (the crossbar destination).

    Beats go to one FIFO (payload and flags), headers with their BAR hit and destination to a
    second one, one entry per packet, so block RAM is not spent on a header per beat.  A packet
    is visible at the output as soon as its first beat is in (cut-through, 002 section 3.3's
    packet buffers).

    Members
    -------
    i_tlp : In(TLPStream())
    i_dest : In(dest_width)
        Sampled with the first beat.
    o_tlp : Out(TLPStream())
        ``hdr`` and ``bar`` are valid on the first beat only.
    o_dest : Out(dest_width)
        The destination of the packet whose first beat is at the output.
    offset : In(64)
        With ``translate_bit`` set: packets whose destination has that bit (the N port) are
        stored with the header :func:`~peach2.router.egress.translate_header` makes, so the
        N-port egress costs no pipeline stage of its own.
    """

    def __init__(self, *, depth=128, max_packets=16, dest_width=5, translate_bit=None):
        self._depth = depth
        self._max_packets = max_packets
        self._dest_width = dest_width
        self._translate_bit = translate_bit
        super().__init__({
            "i_tlp":  In(TLPStream()),
            "i_dest": In(dest_width),
            "o_tlp":  Out(TLPStream()),
            "o_dest": Out(dest_width),
            "offset": In(64),
        })

    def elaborate(self, platform):
        m = Module()
        head = data.StructLayout({"hdr": TLPHeader, "bar": 8, "dest": self._dest_width})
        m.submodules.dfifo = dfifo = SyncFIFOBuffered(width=_DataEntry.size, depth=self._depth)
        m.submodules.hfifo = hfifo = SyncFIFOBuffered(width=head.size, depth=self._max_packets)
        i, o = self.i_tlp, self.o_tlp

        w_d = data.View(_DataEntry, dfifo.w_data)
        w_h = data.View(head, hfifo.w_data)
        m.d.comb += [
            i.ready.eq(dfifo.w_rdy & (hfifo.w_rdy | ~i.p.first)),
            w_d.data.eq(i.p.data), w_d.dw_en.eq(i.p.dw_en), w_d.first.eq(i.p.first),
            w_d.last.eq(i.p.last), w_d.err.eq(i.p.err),
            dfifo.w_en.eq(i.valid & i.ready),
            w_h.hdr.eq(i.p.hdr if self._translate_bit is None else
                       Mux(self.i_dest[self._translate_bit],
                           translate_header(i.p.hdr, self.offset), i.p.hdr.as_value())),
            w_h.bar.eq(i.p.bar), w_h.dest.eq(self.i_dest),
            hfifo.w_en.eq(i.valid & i.ready & i.p.first),
        ]

        r_d = data.View(_DataEntry, dfifo.r_data)
        r_h = data.View(head, hfifo.r_data)
        m.d.comb += [
            o.valid.eq(dfifo.r_rdy & (hfifo.r_rdy | ~r_d.first)),
            o.p.data.eq(r_d.data), o.p.dw_en.eq(r_d.dw_en), o.p.first.eq(r_d.first),
            o.p.last.eq(r_d.last), o.p.err.eq(r_d.err),
            o.p.hdr.eq(r_h.hdr), o.p.bar.eq(r_h.bar),
            self.o_dest.eq(r_h.dest),
            dfifo.r_en.eq(o.valid & o.ready),
            hfifo.r_en.eq(o.valid & o.ready & r_d.first),
        ]
        return m
