"""cocotb side of ``test_verilator_library``: two accumulators count their own inputs."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

CYCLES = 37


@cocotb.test()
async def two_instances(dut):
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.a.value = 0
    dut.b.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    assert int(dut.total_a.value) == 0 and int(dut.total_b.value) == 0, "not reset"
    dut.a.value = 3
    dut.b.value = 250
    await ClockCycles(dut.clk, CYCLES)
    dut.a.value = 0
    dut.b.value = 0
    await ClockCycles(dut.clk, 3)
    assert int(dut.total_a.value) == 3 * CYCLES, int(dut.total_a.value)
    assert int(dut.total_b.value) == (250 * CYCLES) % (1 << 16), int(dut.total_b.value)
