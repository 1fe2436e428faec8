"""Quad-word alignment of the Stratix IV hard IP's Avalon-ST framing, shared by both adapters.

The hard IP places the first payload DW of a TLP in an even DW lane when address bit 2 is 0 and in
an odd lane when it is 1 (bit 2 of the lower address for completions), as the vendor's user
guide of the IP Compiler for PCI Express says.  Counting
DW positions from lane 0 of the start-of-packet beat, the first payload DW therefore sits at
position ``s``:

========  ============  ===
header    address[2]    s
========  ============  ===
3 DW      1             3
3 DW      0             4
4 DW      0             4
4 DW      1             5
========  ============  ===

so payload DW ``k`` is at Avalon position ``s + k``.  Only ``s mod 4`` matters to the datapath:
the payload is rotated by that many lanes against the internal stream, where payload DW ``k`` sits
in lane ``k mod 4`` (see :mod:`peach2.tlp.stream`).
"""

from amaranth.hdl import Cat, Mux, Value

__all__ = ["payload_dws", "internal_beats", "payload_start", "avalon_beats", "ends_low",
           "select_lanes"]


def payload_dws(hdr):
    """Return the payload length in DWs that a header's ``length`` field gives (0 means 1024)."""
    return Mux(hdr.common.length == 0, 1024, hdr.common.length)


def internal_beats(hdr):
    """Return how many internal-stream beats carry the TLP (one for a TLP without payload)."""
    return Mux(hdr.common.fmt.as_value()[1], (payload_dws(hdr) + 3) >> 2, 1)


def payload_start(hdr):
    """Return ``s``, the Avalon DW position of the first payload DW (3, 4 or 5), for a header.

    ``hdr`` is a :class:`~peach2.tlp.layouts.TLPHeader` view.  Bit 2 of header DW 2 is address
    bit 2 of a 3-DW request and lower-address bit 2 of a completion; bit 2 of DW 3 is address
    bit 2 of a 4-DW request.
    """
    four_dw = hdr.common.fmt.as_value()[0]
    addr2 = Mux(four_dw, hdr.dw[3][2], hdr.dw[2][2])
    # 3 + four_dw gives the header size; one pad DW follows when the parity is wrong.
    return 3 + four_dw + (four_dw ^ addr2 ^ 1)


def avalon_beats(total_dws):
    """Return how many 128-bit Avalon beats ``total_dws`` DWs of header, pad and payload take."""
    return (total_dws + 3) >> 2


def ends_low(total_dws):
    """Return the ``empty`` flag of the last beat: the packet ends in lane 0 or 1."""
    return (total_dws[:2] == 1) | (total_dws[:2] == 2)


def select_lanes(low, high, offset):
    """Return 4 DW lanes taken from the 8 lanes ``Cat(low, high)`` starting at lane ``offset``.

    ``offset`` is an Amaranth value in 0..4; used to rotate payload between the two framings.
    """
    both = Cat(low, high)
    offset = Value.cast(offset).as_unsigned()
    return Cat(*(both.word_select(offset + lane, 32) for lane in range(4)))
