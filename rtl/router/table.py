"""Route lookup: address mask + range registers, first match wins (002 section 3.5)."""

from amaranth.hdl import Mux, Signal

from .common import Port

__all__ = ["route_lookup", "request_address"]


def request_address(hdr):
    """Return the 64-bit address of a memory request header (3-DW or 4-DW)."""
    four = hdr.common.fmt.as_value()[0]
    return Mux(four,
               (hdr.mem64.address_hi << 32) | (hdr.mem64.address_lo << 2),
               hdr.mem32.address << 2)


def route_lookup(m, address, routes):
    """Add the lookup of ``address`` in ``routes`` to ``m``; return ``(hit, port)`` signals.

    ``routes`` is an array view of :data:`~peach2.router.common.RouteEntry`.  Every entry is
    compared at once (the regions are aligned, so this is a compare of upper address bits, not
    a translation table); the lowest-numbered matching entry gives the port.
    """
    hit = Signal()
    port = Signal(Port)
    matches = []
    for entry in routes:
        masked = address & entry.mask
        matches.append(entry.enable & (masked >= entry.lower) & (masked <= entry.upper))
    # Priority: the last assignment wins in Amaranth, so walk from the highest index down.
    m.d.comb += [hit.eq(0), port.eq(Port.N)]
    for match, entry in reversed(list(zip(matches, routes))):
        with m.If(match):
            m.d.comb += [hit.eq(1), port.eq(entry.port)]
    return hit, port
