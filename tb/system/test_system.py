"""Two PEACH2 chips with a host each, cabled chip to chip: PIO stores both ways, latency (cocotb).

One build runs every cocotb test of ``system_tb``, on Verilator: the top is two instances of the
chip's library, compiled once for every top of the chip (docs/testing.md).  The latency benchmark writes JSON when given a result file::

    from test_system import run
    run("system-latency", testcase="pio_latency", result_file="latency.json")
"""

from pathlib import Path

import pytest

from peach2.sim.hdl import Chips
from peach2.sim.run import run_cocotb

HERE = Path(__file__).parent


def run(name, testcase=None, seed=41, **params):
    """Build the two-chip top and run ``system_tb`` (all tests, or ``testcase``)."""
    return run_cocotb(component=Chips(2), toplevel="two_chips", test_module="system_tb",
                      name=name, test_dir=HERE, testcase=testcase, params=params, seed=seed,
                      simulator="verilator")


def test_two_chips():
    """Stores both ways byte-exact with counters checked, and the PIO latency, on one cable."""
    run("system-two_chips")


@pytest.mark.slow
def test_two_chips_ring():
    """A ring of two (two cables; node 1 reaches node 0 through c1.E -> c0.W), host memory
    below 4 GiB (N rewrites 4-DW headers to 3-DW), four rounds of stores."""
    run("system-two_chips-ring", seed=42, topology="ring", above_4g=False, rounds=4)
