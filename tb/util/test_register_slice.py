"""``peach2.util.RegisterSlice`` on its own (Amaranth simulator).

Every beat offered at ``i`` leaves ``o`` once, in order, under random idles and random
backpressure; ``i.ready`` never follows ``o.ready`` within a cycle; the slice moves a beat every
cycle when nothing stalls and leaves no idle cycle at ``o`` after a stall.
"""

import random

import pytest
from amaranth.sim import Simulator

from peach2.util import RegisterSlice


def _run(testbench_factory, width=16):
    dut = RegisterSlice(width)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench_factory(dut))
    sim.run()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_order_and_no_loss_under_random_stalls(seed):
    rng = random.Random(seed)
    sent = [rng.randrange(1 << 16) for _ in range(400)]
    got = []
    p_valid, p_ready = rng.choice([0.3, 0.7, 1.0]), rng.choice([0.3, 0.7, 1.0])

    def factory(dut):
        async def testbench(ctx):
            pending = list(sent)
            for _ in range(20000):
                if not pending and len(got) == len(sent):
                    break
                offer = bool(pending) and rng.random() < p_valid
                ctx.set(dut.i.valid, offer)
                if pending:
                    ctx.set(dut.i.p, pending[0])
                ctx.set(dut.o.ready, rng.random() < p_ready)
                # Sample the handshakes of this cycle before the clock edge.
                if offer and ctx.get(dut.i.ready):
                    pending.pop(0)
                if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                    got.append(ctx.get(dut.o.p))
                await ctx.tick()
            else:
                raise AssertionError(f"slice stalled: {len(got)} of {len(sent)} beats out")
        return testbench

    _run(factory)
    assert got == sent


def test_ready_does_not_follow_output_ready():
    seen = []

    def factory(dut):
        async def testbench(ctx):
            rng = random.Random(7)
            for _ in range(300):
                ctx.set(dut.i.valid, rng.random() < 0.8)
                ctx.set(dut.i.p, rng.randrange(1 << 16))
                ctx.set(dut.o.ready, 0)
                low = ctx.get(dut.i.ready)
                ctx.set(dut.o.ready, 1)
                high = ctx.get(dut.i.ready)
                seen.append((low, high))
                ctx.set(dut.o.ready, rng.random() < 0.5)
                await ctx.tick()
        return testbench

    _run(factory)
    assert all(low == high for low, high in seen)
    assert {low for low, _ in seen} == {0, 1}        # both values occurred


def test_full_rate_and_no_bubble_after_stall():
    cycles = []

    def factory(dut):
        async def testbench(ctx):
            ctx.set(dut.i.valid, 1)
            value = 0
            for cycle in range(60):
                ctx.set(dut.i.p, value)
                stall = 20 <= cycle < 23
                ctx.set(dut.o.ready, 0 if stall else 1)
                if ctx.get(dut.i.ready):
                    value += 1
                if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                    cycles.append((cycle, ctx.get(dut.o.p)))
                await ctx.tick()
        return testbench

    _run(factory)
    beats = [v for _, v in cycles]
    assert beats == list(range(len(beats)))
    moved = [c for c, _ in cycles]
    # One cycle of latency, then a beat every cycle except the three stalled ones.
    assert moved[0] == 1
    assert moved == [c for c in range(1, 60) if not 20 <= c < 23]
