"""cocotb side of ``test_edge_semantics.py``: what a ``RisingEdge`` callback sees, and how an
``EdgeTicker`` steps the models that share it."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotb.utils import get_sim_steps

from peach2.sim.hardip import edge_shows_update
from peach2.sim.run import EdgeTicker, run_inputs

CLOCK = run_inputs()[0].get("clock")


@cocotb.test()
async def edge_values(dut):
    """Read the counter at rising edges and again once the time step settles: equal values mean
    the edge showed the registers after its update.  ``edge_shows_update`` (what ``HardIPModel``
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


class _Stepped:
    """A per-cycle model that records the simulation step of each of its ticks."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def tick(self, now):
        self.log.append((self.name, now))


@cocotb.test()
async def ticker_steps_joined_models(dut):
    """``EdgeTicker`` steps every joined model once per rising edge, in join order; a model that
    left is not stepped until it joins again, and with nobody joined nothing is stepped."""
    if CLOCK == "cocotb":
        Clock(dut.clk, 4, unit="ns").start()
    dut.rst.value = 0
    await RisingEdge(dut.clk)           # not time 0, where a cocotb Clock's first edge is
    await ReadOnly()
    log = []
    ticker = EdgeTicker(dut.clk)
    a, b = _Stepped("a", log), _Stepped("b", log)
    ticker.join(a)
    ticker.join(b)
    ticker.join(a)                      # joining twice steps it once
    # Each change is made once the time step of the last edge has settled (ReadOnly), after
    # the ticker's callback for that edge.
    for change, cycles in ((None, 3), ("leave a", 2), ("leave b", 2), ("join a", 2)):
        if change:
            verb, name = change.split()
            getattr(ticker, verb)({"a": a, "b": b}[name])
        await ClockCycles(dut.clk, cycles)
        await ReadOnly()
    names = "".join(name for name, _ in log)
    assert names == "ababab" + "bb" + "" + "aa", names
    steps = sorted({t for _, t in log})
    period = get_sim_steps(4, "ns")
    gaps = [t1 - t0 for t0, t1 in zip(steps, steps[1:])]
    assert gaps == [period] * 4 + [3 * period] + [period], gaps
    assert all(t0 == t1 for (_, t0), (_, t1) in zip(log[0:6:2], log[1:6:2])), log
