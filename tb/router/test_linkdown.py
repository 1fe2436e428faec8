"""A port's link lost and back with writes toward it still queued, and a register read right
after a reset with the links in L0 (``linkdown_tb``, docs/errors.md "Reset and link loss").
Same chip build as ``test_router.py``'s."""

from pathlib import Path

from peach2.sim.run import run_cocotb
from peach2.top import PEACH2

HERE = Path(__file__).parent


def test_link_down_flushes_queued_and_read_after_reset():
    """``linkdown_tb``'s cases in one simulation (each from its own reset): writes queued toward
    a port whose link goes down are flushed, and a register read right after reset is answered
    (on four-state Icarus too, in ``test_router_icarus.py``)."""
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="linkdown_tb",
               name="router-linkdown", test_dir=HERE, testcase=["flush_queued", "read_after_reset"],
               seed=43, simulator="verilator", library=True)
