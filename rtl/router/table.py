"""Route lookup: address mask + range registers, first match wins (002 section 3.5)."""

from amaranth.hdl import Mux, Signal

from ..util import not_below
from .common import Port

__all__ = ["route_lookup", "route_matches", "route_select", "route_first", "request_address"]


def request_address(hdr):
    """Return the 64-bit address of a memory request header (3-DW or 4-DW)."""
    four = hdr.common.fmt.as_value()[0]
    return Mux(four,
               (hdr.mem64.address_hi << 32) | (hdr.mem64.address_lo << 2),
               hdr.mem32.address << 2)


def route_matches(m, address, routes):
    """Return one 1-bit value per entry of ``routes``: the entry matches ``address``.

    Entry ``i`` matches when it is enabled and ``lower <= (address & mask) <= upper``.  Every
    entry is compared at once (the regions are aligned, so this is a compare of upper address
    bits, not a translation table).  Each bound is checked by the borrow of a subtraction, so
    that it maps to one carry chain (Yosys maps a plain ``<=`` of 64 bits to a tree of LUTs
    in the ALM flow).  ``m`` is unused, kept for symmetry with :func:`route_select`.
    """
    matches = []
    for entry in routes:
        masked = (address & entry.mask)[:len(entry.lower)]
        matches.append(entry.enable & not_below(masked, entry.lower)
                       & not_below(entry.upper, masked))
    return matches


def route_select(m, matches, routes):
    """Add the priority choice among ``matches`` to ``m``; return ``(hit, port)`` signals.

    ``matches`` is one 1-bit value per entry of ``routes`` (for example registered results of
    :func:`route_matches`); the lowest-numbered match gives the port.
    """
    hit = Signal()
    port = Signal(Port)
    # Priority: the last assignment wins in Amaranth, so walk from the highest index down.
    m.d.comb += [hit.eq(0), port.eq(Port.N)]
    for match, entry in reversed(list(zip(matches, routes))):
        with m.If(match):
            m.d.comb += [hit.eq(1), port.eq(entry.port)]
    return hit, port


def route_first(m, matches, values, name):
    """Add to ``m`` a 1-bit signal ``name`` that is ``values[k]`` of the lowest-numbered ``k``
    whose ``matches[k]`` is set (0 without a match), chosen like :func:`route_select`'s port:
    e.g. whether the first matching entry's port is down."""
    first = Signal(name=name)
    for k in reversed(range(len(matches))):
        with m.If(matches[k]):
            m.d.comb += first.eq(values[k])
    return first


def route_lookup(m, address, routes):
    """Add the lookup of ``address`` in ``routes`` to ``m``; return ``(hit, port)`` signals.

    ``routes`` is an array view of :data:`~peach2.router.common.RouteEntry`.  Combinational:
    the same compare as :func:`route_matches` and choice as :func:`route_select`, in the same
    cycle (the ingress registers the matches between the two instead).
    """
    matches = []
    for entry in routes:
        masked = address & entry.mask
        matches.append(entry.enable & (masked >= entry.lower) & (masked <= entry.upper))
    return route_select(m, matches, routes)
