"""Reference functions the harnesses compare the blocks with, written from the documents (not
from the blocks' code): the route lookup and the N translation (``docs/architecture.md``,
"Address map and routing" and "N translation"; 002 section 3.5)."""

from amaranth.hdl import Cat, Const, Mux

from peach2.tlp.layouts import Type

__all__ = ["address_of", "first_match", "translated"]


def address_of(hdr):
    """The byte address of a memory request: DW 2 (3-DW header) or DWs 2 and 3 (4-DW), with
    the two reserved low bits cleared (``docs/stream.md`` section 3: a DW read as a number uses
    the PCIe bit numbering)."""
    four = hdr.common.fmt.as_value()[0]
    dw2, dw3 = hdr.dw[2], hdr.dw[3]
    return Mux(four, Cat(Const(0, 2), dw3[2:], dw2), Cat(Const(0, 2), dw2[2:], Const(0, 32)))


def first_match(address, routes, mutant=None):
    """One-hot: the lowest-numbered enabled entry with ``lower <= (A & mask) <= upper`` (zero
    when none matches).  ``mutant="strict"`` compares ``<`` instead of ``<=`` at the upper
    bound (a wrong reference, for the flow's own test)."""
    hits = []
    for entry in routes:
        masked = address & entry.mask
        upper_ok = masked < entry.upper if mutant == "strict" else masked <= entry.upper
        hits.append(entry.enable & (masked >= entry.lower) & upper_ok)
    firsts = [hit & ~Cat(*hits[:k]).any() for k, hit in enumerate(hits)]
    return Cat(*firsts)


def is_memory_request(hdr):
    """MRd, MWr and MRdLk (type MEM or MEM_LOCKED): the requests the N translation rewrites."""
    typ = hdr.common.type.as_value()
    return (typ == Type.MEM.value) | (typ == Type.MEM_LOCKED.value)


def translated(hdr, offset):
    """The header a memory request leaves N with: address ``A - offset`` (modulo 2^64), a 3-DW
    header when that is below 4 GiB (PCIe base specification), else a 4-DW one; DWs 0 and 1
    unchanged but for the format's header-size bit, the processing hint (the address DW's two
    low bits) kept.  Any other header unchanged.  ``offset`` is DW aligned."""
    four = hdr.common.fmt.as_value()[0]
    ph = Mux(four, hdr.dw[3][:2], hdr.dw[2][:2])
    new = (address_of(hdr) - offset)[:64]
    small = new < (1 << 32)
    fmt = Cat(~small, hdr.common.fmt.as_value()[1:])
    dw0 = Cat(hdr.dw[0][:29], fmt)
    low = Cat(ph, new[2:32])
    out = Mux(small, Cat(dw0, hdr.dw[1], low, Const(0, 32)),
              Cat(dw0, hdr.dw[1], new[32:], low))
    return Mux(is_memory_request(hdr), out, hdr.as_value())
