"""Write protection windows: rules on every link port, the PIO and DMA source stamp,
windows opened and closed under traffic (cocotb, ``protect_tb``; docs/errors.md).

The chip is the same build as ``test_router.py``'s (one Verilator build for both).
"""

from pathlib import Path

from peach2.sim.run import run_cocotb
from peach2.top import PEACH2

HERE = Path(__file__).parent


def run(name, testcase, seed=41, simulator="verilator", **params):
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="protect_tb", name=name,
               test_dir=HERE, testcase=testcase, params=params, seed=seed, simulator=simulator,
               library=True)


def test_window_rules_stamps_and_traffic():
    """``protect_tb``'s cases in one simulation (each from its own reset; one start-up instead
    of three): the window rules on every link port, the PIO and DMA source stamp, windows
    opened and closed under traffic."""
    run("router-protect", ["window_rules", "stamp_sources", "open_close_during_traffic"])
