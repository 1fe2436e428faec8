"""N-port egress translation: shared TCA addresses to the host's own (002 section 3.5)."""

from amaranth.hdl import Cat, Const, Mux

from ..tlp.layouts import Type
from .table import request_address

__all__ = ["translate_header"]


def translate_header(hdr, offset):
    """Return the header of a request leaving through N: its address minus ``offset``.

    "PEACH2 keeps the offset given to each node, and subtracts it from the address of the
    arriving packet header before sending it to the host" (002 section 3.5).  A translated
    address below 4 GiB takes a 3-DW header, as the PCIe base specification requires; one at or
    above takes a 4-DW header.  The payload does not move: the internal stream carries no
    alignment padding, the TX adapter re-aligns for the new header.  Headers other than memory
    requests (completions) come back unchanged.

    ``hdr`` is a :class:`~peach2.tlp.layouts.TLPHeader` view; returns a 128-bit value.  Built
    from expressions only (see AvalonST128RX on Icarus).
    """
    typ = hdr.common.type.as_value()
    is_mem = typ[1:] == (Type.MEM.value >> 1)
    translated = (request_address(hdr) - offset)[:64]
    high = translated[32:].any()
    dw0 = Cat(hdr.dw[0][:29], high, hdr.dw[0][30:])          # fmt bit 0: 4-DW header
    ph = Mux(hdr.common.fmt.as_value()[0], hdr.dw[3][:2], hdr.dw[2][:2])
    dw2 = Mux(high, translated[32:], Cat(ph, translated[2:32]))
    dw3 = Mux(high, Cat(ph, translated[2:32]), Const(0, 32))
    return Mux(is_mem, Cat(dw0, hdr.dw[1], dw2, dw3), hdr.as_value())
