"""Small gateware helpers shared by several blocks."""

from amaranth.lib import wiring

__all__ = ["count_saturating", "dw_mask", "members_with_prefix", "forward_members"]


def members_with_prefix(component, prefix):
    """Return ``{name: member}`` of ``component``'s signature whose names start with ``prefix``
    (a string or a tuple of strings)."""
    return {name: member for name, member in component.signature.members.items()
            if name.startswith(prefix)}


def forward_members(m, inner, outer, members, outer_prefix=""):
    """Connect ``members`` of submodule ``inner`` to the same-named ports of ``outer``.

    ``outer``'s port is ``outer_prefix + name``; inputs flow in, outputs flow out.
    """
    for name, member in members.items():
        port = getattr(outer, outer_prefix + name)
        if member.flow == wiring.In:
            m.d.comb += getattr(inner, name).eq(port)
        else:
            m.d.comb += port.eq(getattr(inner, name))


def count_saturating(m, counter, event):
    """Add statements that increment ``counter`` on ``event``; the counter stops at all-ones."""
    with m.If(event & ~counter.all()):
        m.d.sync += counter.eq(counter + 1)


def dw_mask(count):
    """Return a 4-bit lane enable with the lowest ``min(count, 4)`` lanes set.

    ``count`` is an Amaranth value; used for ``dw_en`` of a beat that carries ``count`` DWs.
    """
    return ((count >= 1).as_unsigned()
            | ((count >= 2).as_unsigned() << 1)
            | ((count >= 3).as_unsigned() << 2)
            | ((count >= 4).as_unsigned() << 3))
