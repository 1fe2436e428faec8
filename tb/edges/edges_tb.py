"""cocotb side of ``test_edge_semantics.py``: what a ``RisingEdge`` callback sees."""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from peach2.sim.hardip import edge_shows_update


CLOCK = json.loads(os.environ.get("PEACH2_PARAMS", "{}")).get("clock")


@cocotb.test()
async def edge_values(dut):
    """Read the counter at rising edges and again once the time step settles: equal values mean
    the edge showed the registers after its update.  ``edge_shows_update`` (what ``HardIP``
    goes by, given ``hdl_clock``) must say the same."""
    if CLOCK == "cocotb":
        Clock(dut.clk, 4, unit="ns").start()
    dut.rst.value = 0
    seen = []
    for _ in range(4):
        await RisingEdge(dut.clk)
        at_edge = int(dut.count.value)
        await ReadOnly()
        seen.append(at_edge == int(dut.count.value))
    assert len(set(seen)) == 1, f"edges disagree: {seen}"
    predicted = edge_shows_update(hdl_clock=CLOCK == "hdl")
    dut._log.info("%s, clock from %s: the edge shows the registers %s the update", cocotb.SIM_NAME,
                  CLOCK, "after" if seen[0] else "before")
    assert predicted == seen[0], f"edge_shows_update says {predicted}, the simulator {seen[0]}"
