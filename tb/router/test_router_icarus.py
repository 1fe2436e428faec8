"""The router's reduced cases on four-state Icarus, where an X that two-state Verilator would
hide shows: a register read right after a reset with the links in L0 (``linkdown_tb``, the
defect of issue 33) and the protection windows' rules (``protect_tb``).

Both run in one simulation: loading the chip's netlist costs Icarus about 20 s, more than
either test.  That netlist is the README's ``peach2 generate`` Verilog (the default core, the
same conversion), so this is also the suite's check that Icarus compiles it.  Their Verilator
runs are in ``test_linkdown.py`` and ``test_protect.py``.
"""

from pathlib import Path

from peach2.sim.run import run_cocotb
from peach2.top import PEACH2

HERE = Path(__file__).parent


def test_read_after_reset_and_window_rules_on_icarus():
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module=["linkdown_tb", "protect_tb"],
               name="router-icarus", test_dir=HERE,
               testcase=["read_after_reset", "window_rules"], seed=44, simulator="icarus",
               library=True)
