"""Small gateware helpers shared by several blocks."""

__all__ = ["count_saturating", "dw_mask"]


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
