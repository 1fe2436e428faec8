"""Elaborate a component and write its Verilog in two visible steps.

``amaranth.back.verilog.convert`` elaborates, lowers to RTLIL and runs Yosys in one call; the
``peach2`` command splits it so that each step can print a progress line (``peach2.progress``).
The Verilog is the same as ``verilog.convert(top, name=..., emit_src=False)`` writes.
"""

from amaranth.back import rtlil, verilog
from amaranth.hdl import Fragment, Value
from amaranth.hdl._ir import PortDirection
from amaranth.lib import wiring

__all__ = ["component_ports", "elaborate", "to_verilog"]


def component_ports(component):
    """The top-level ports of ``component`` as ``{name: (value, PortDirection)}``, named
    ``a__b`` for member path ``(a, b)`` as ``verilog.convert`` names them."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        direction = PortDirection.Input if member.flow == wiring.In else PortDirection.Output
        ports["__".join(map(str, path))] = (Value.cast(value), direction)
    return ports


def elaborate(component):
    """Elaborate ``component`` (no platform); return its fragment."""
    return Fragment.get(component, None)


def to_verilog(component, name, progress=None):
    """Return the Verilog of ``component`` as module ``name``.

    ``progress(text)``, if given, is called before elaboration and before the conversion.
    """
    if progress:
        progress(f"elaborating {name}...")
    fragment = elaborate(component)
    if progress:
        progress("converting to Verilog (RTLIL, then Yosys)...")
    text, _ = verilog.convert_fragment(fragment, component_ports(component), name,
                                       emit_src=False)
    return text


def to_rtlil(fragment, component, name):
    """Return the RTLIL of the elaborated ``fragment`` of ``component`` as module ``name``."""
    text, _ = rtlil.convert_fragment(fragment, component_ports(component), name,
                                     emit_src=False)
    return text
