"""N-port egress: translate shared TCA addresses to the host's own (002 section 3.5)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..tlp.layouts import TLPHeader, Type
from ..tlp.stream import TLPStream
from .table import request_address

__all__ = ["OffsetSubtract"]


class OffsetSubtract(wiring.Component):
    """Subtract the node offset from the address of every memory request leaving through N.

    "PEACH2 keeps the offset given to each node, and subtracts it from the address of the
    arriving packet header before sending it to the host" (002 section 3.5).  A translated
    address below 4 GiB leaves with a 3-DW header, as the PCIe base specification requires;
    one at or above leaves with a 4-DW header.  The payload does not move: the internal stream
    carries no alignment padding, the TX adapter re-aligns for the new header.  Other TLPs
    (completions) pass unchanged.  One register stage.

    Members
    -------
    i_tlp : In(TLPStream())
    o_tlp : Out(TLPStream())
    offset : In(64)
        The node offset (registers OFFSET_LO/OFFSET_HI).
    """

    i_tlp:  In(TLPStream())
    o_tlp:  Out(TLPStream())
    offset: In(64)

    def elaborate(self, platform):
        m = Module()
        i, o = self.i_tlp, self.o_tlp
        h = i.p.hdr
        typ = h.common.type.as_value()
        is_mem = typ[1:] == (Type.MEM.value >> 1)
        translated = Signal(64)
        m.d.comb += translated.eq(request_address(h) - self.offset)
        high = translated[32:].any()

        # The rewritten header, built as expressions (see AvalonST128RX on Icarus).
        dw0 = Cat(h.dw[0][:29], high, h.dw[0][30:])       # fmt bit 0 = 4-DW header
        ph = Mux(h.common.fmt.as_value()[0], h.dw[3][:2], h.dw[2][:2])
        dw2 = Mux(high, translated[32:], Cat(ph, translated[2:32]))
        dw3 = Mux(high, Cat(ph, translated[2:32]), Const(0, 32))
        new_hdr = Cat(dw0, h.dw[1], dw2, dw3)

        m.d.comb += i.ready.eq(~o.valid | o.ready)
        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(i.valid & i.ready):
            m.d.sync += [o.valid.eq(1), o.p.eq(i.p)]
            with m.If(i.p.first & is_mem):
                m.d.sync += o.p.hdr.eq(new_hdr)
        return m
