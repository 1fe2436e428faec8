"""Test top with several PEACH2 chips side by side, every pin brought out (simulation only).

Chip ``i`` is submodule ``c<i>``; its pin ``<name>`` (``n_rx_st_data``, ``e_tx_cred``, ...)
becomes top-level port ``c<i>_<name>``.  The chips share the top's clock and reset; they are not
connected to each other in HDL: the links between them are the hard-IP models and the timed
cocotbext-pcie links of :mod:`peach2.sim.harness.cluster`.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from peach2.top import PEACH2

__all__ = ["Chips", "chip_prefix"]


def chip_prefix(index):
    """Return the pin prefix of chip ``index`` in :class:`Chips` (``"c0_"``)."""
    return f"c{index}_"


class Chips(wiring.Component):
    """``n`` PEACH2 instances with flat, prefixed pins.

    Parameters
    ----------
    n : int
        Number of chips.
    **kwargs
        Passed to every :class:`~peach2.top.PEACH2`.

    Members
    -------
    c<i>_<pin> : the pins of chip ``i`` (see :class:`~peach2.top.PEACH2`), same direction.
    """

    def __init__(self, n=2, **kwargs):
        if n < 1:
            raise ValueError(f"need at least one chip, not {n}")
        self._chips = [PEACH2(**kwargs) for _ in range(n)]
        #: Netlist cache key (``peach2.sim.run.runner``): every chip is the same design.
        self.design_key = f"Chips({n}, {self._chips[0].design_key})"
        members = {}
        for i, chip in enumerate(self._chips):
            for name, member in chip.signature.members.items():
                members[f"{chip_prefix(i)}{name}"] = member
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for i, chip in enumerate(self._chips):
            m.submodules[f"c{i}"] = chip
            for name, member in chip.signature.members.items():
                outer = getattr(self, f"{chip_prefix(i)}{name}")
                if member.flow == In:
                    m.d.comb += getattr(chip, name).eq(outer)
                else:
                    m.d.comb += outer.eq(getattr(chip, name))
        return m
