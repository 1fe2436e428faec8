"""Test top with several PEACH2 chips side by side, every pin brought out (simulation only).

Chip ``i`` is instance ``c<i>`` of module ``peach2``; its pin ``<name>`` (``n_rx_st_data``,
``e_tx_cred``, ...) becomes top-level port ``c<i>_<name>``.  The chips share the top's clock
and reset; they are not connected to each other in HDL: the links between them are the
hard-IP models and the timed cocotbext-pcie links of :mod:`peach2.sim.harness.cluster`.

The chip is its own netlist (the runner's cache, shared with every other top of the same chip
options) and, on Verilator, a library compiled once for every top that uses the chip (the
sub-cluster tops, the router's tests): a new ``Chips`` top costs its few lines, not another
compile of the chip.  The instance keeps its name and hierarchy, so ``dut.c0.dma`` is there on
Icarus; on Verilator a library shows only its ports, so a test that looks inside a chip there
(a ``.vlt`` rule opening its signals) builds the chips into the top (``library=False``).
"""

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from peach2.sim.run import module_sources
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
    library : bool
        On Verilator, link the chip's library (default; nothing inside a chip is visible)
        rather than compile the chips into the top.
    **kwargs
        Passed to every :class:`~peach2.top.PEACH2`.

    Members
    -------
    c<i>_<pin> : the pins of chip ``i`` (see :class:`~peach2.top.PEACH2`), same direction.
    """

    def __init__(self, n=2, *, library=True, **kwargs):
        if n < 1:
            raise ValueError(f"need at least one chip, not {n}")
        self.n, self.library = n, library
        self._chip = PEACH2(**kwargs)
        #: Netlist cache key (``peach2.sim.run.runner``): the instances; the chip is its own.
        self.design_key = f"Chips({n}, instances of {self._chip.design_key})"
        members = {}
        for i in range(n):
            for name, member in self._chip.signature.members.items():
                members[f"{chip_prefix(i)}{name}"] = member
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for i in range(self.n):
            ports = {f"{'i' if member.flow == In else 'o'}_{name}":
                     getattr(self, f"{chip_prefix(i)}{name}")
                     for name, member in self._chip.signature.members.items()}
            m.submodules[f"c{i}"] = Instance("peach2", i_clk=ClockSignal("sync"),
                                             i_rst=ResetSignal("sync"), **ports)
        return m

    def extra_sources(self, build_dir, simulator, waves=False):
        """The chip's netlist, or on Verilator its library
        (:func:`~peach2.sim.run.module_sources`)."""
        return module_sources(self._chip, "peach2", build_dir, simulator, library=self.library,
                              waves=waves)[0]
