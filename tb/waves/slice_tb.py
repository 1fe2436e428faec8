"""cocotb side of ``test_waves``: a few beats through ``RegisterSlice(16)`` to fill a waveform.

Every beat offered at ``i`` must leave ``o`` in order (so the recorded run is a real one).
"""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

BEATS = [0x1234, 0xBEEF, 0x0001, 0xFFFF, 0x8000]


@cocotb.test()
async def beats_through(dut):
    """Five beats in, the same five out, with one cycle of backpressure on ``o``."""
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.rst.value = 1
    dut.i__valid.value = 0
    dut.o__ready.value = 1
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    pending, got = list(BEATS), []
    for cycle in range(40):
        dut.i__valid.value = int(bool(pending))
        dut.i__payload.value = pending[0] if pending else 0
        dut.o__ready.value = int(cycle != 3)
        await ReadOnly()
        took = bool(pending) and int(dut.i__ready.value) == 1
        if int(dut.o__valid.value) and int(dut.o__ready.value):
            got.append(int(dut.o__payload.value))
        await RisingEdge(dut.clk)
        if took:
            pending.pop(0)
        if len(got) == len(BEATS):
            break
    assert got == BEATS, f"beats out {got!r}, expected {BEATS!r}"
