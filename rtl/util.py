"""Small gateware helpers shared by several blocks."""

from amaranth.hdl import Cat, Const, Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RegisterSlice", "count_saturating", "dw_mask", "below", "not_below", "members_with_prefix",
           "forward_members"]


class RegisterSlice(wiring.Component):
    """A stream register slice that cuts both directions: ``o`` comes from a register, and
    ``i.ready`` is a register.

    Two registers of ``shape``: the main one drives ``o``; the skid register takes the beat that
    arrives in a cycle where the main one is held (``o.valid & ~o.ready``).  ``i.ready`` is
    "the skid register is empty", so a producer's handshake never depends on ``o.ready`` in the
    same cycle, and ``o.ready`` reaches only the two registers' enables.  A beat taken at
    ``i`` is at ``o`` one cycle later; one beat moves every cycle while ``o.ready`` is high
    (after a stall the skid beat leaves first, with no idle cycle at ``o``).  Capacity: two
    beats.

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    """

    def __init__(self, shape):
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        skid = Signal.like(i.p)
        skid_valid = Signal()
        m.d.comb += i.ready.eq(~skid_valid)
        with m.If(~o.valid | o.ready):
            with m.If(skid_valid):
                m.d.sync += [o.p.eq(skid), o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [o.p.eq(i.p), o.valid.eq(i.valid)]
        with m.Elif(i.valid & ~skid_valid):
            m.d.sync += [skid.eq(i.p), skid_valid.eq(1)]
        return m


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


def below(a, b):
    """Return ``a < b`` (unsigned) as the borrow of ``a - b``: one carry chain, as
    :func:`not_below`, its output not inverted."""
    a, b = Value.cast(a), Value.cast(b)
    n = max(len(a), len(b))
    return (Cat(a, Const(0, n + 1 - len(a))) - Cat(b, Const(0, n + 1 - len(b))))[n]


def not_below(a, b):
    """Return ``a >= b`` (unsigned) as the borrow of ``a - b``.

    One carry chain: Yosys maps a plain ``>=`` to a tree of LUTs in the ALM flow, several
    levels deep for a dozen bits or more.
    """
    return ~below(a, b)
