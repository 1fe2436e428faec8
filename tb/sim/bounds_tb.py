"""cocotb side of ``test_bounded_waits``: the simulation platform's waits end in simulated time.

Runs on any small design (only its clock is used).
"""

import gc

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Event, Timer
from cocotb.utils import get_sim_time

from peach2.csr.regmap import REGMAP
from peach2.sim.driver import Driver, DriverError
from peach2.sim.hardip import Stuck
from peach2.sim.hardip.device import wait_drained
from peach2.sim.run import run_inputs


class BusyBar:
    """BAR 0 of a chip whose DMA channels never finish: ``CH_STATUS.busy`` reads 1."""

    def __init__(self):
        self.reads = 0

    async def read(self, offset, length):
        await Timer(500, "ns")                 # one register read's round trip
        self.reads += 1
        busy = REGMAP["CH_STATUS"].encode(busy=1)
        return busy.to_bytes(4, "little")[:length].ljust(length, b"\0")

    async def write(self, offset, data):
        await Timer(100, "ns")


@cocotb.test()
async def stuck_queue_raises(dut):
    """A queue that never moves raises Stuck one bound after the last move."""
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    t0 = get_sim_time("ns")
    try:
        await wait_drained(lambda: 3, Event(), 2000, "test queue")
    except Stuck as e:
        assert "test queue: 3 TLPs have not moved for 2000 ns" in str(e), str(e)
    else:
        raise AssertionError("a queue that never moved was waited for without end")
    assert get_sim_time("ns") - t0 == 2000, get_sim_time("ns") - t0


@cocotb.test()
async def slow_queue_is_waited_for(dut):
    """A queue that moves less often than the bound's period but steadily is not cut short:
    10 TLPs leaving one per 1500 ns with a 2000 ns bound take 15000 ns and pass."""
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    left, idle = [10], Event()

    async def drain():
        while left[0]:
            await Timer(1500, "ns")
            left[0] -= 1
        idle.set()

    cocotb.start_soon(drain())
    t0 = get_sim_time("ns")
    await wait_drained(lambda: left[0], idle, 2000, "slow queue")
    assert get_sim_time("ns") - t0 == 15000, get_sim_time("ns") - t0


@cocotb.test()
async def dma_wait_is_bounded(dut):
    """``dma_wait`` on a channel that stays busy raises after ``timeout_ns`` of simulated time,
    naming the channel and its status."""
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    drv = Driver(BusyBar())
    t0 = get_sim_time("ns")
    try:
        await drv.dma_wait(2, timeout_ns=20_000)
    except DriverError as e:
        assert "DMA channel 2 still busy after" in str(e) and " ns" in str(e), str(e)
    else:
        raise AssertionError("dma_wait returned on a busy channel")
    waited = get_sim_time("ns") - t0
    assert 20_000 <= waited <= 20_000 + 10 * 500, waited


@cocotb.test()
async def collector_thresholds(dut):
    """The simulator's Python runs with the thresholds the runner's policy sets (the pytest
    side passes them as ``thresholds``; this module does not import the policy)."""
    params, _ = run_inputs()
    assert list(gc.get_threshold()) == params["thresholds"], gc.get_threshold()
