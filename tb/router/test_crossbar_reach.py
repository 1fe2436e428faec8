"""``peach2.router.crossbar.Crossbar``'s ``reach`` (Amaranth simulator).

``reach`` removes the grant logic of input/output pairs the top's wiring never uses.  The
claim in its docstring is that it changes nothing else: two crossbars, one with the top's
``reach`` and one without, driven with the same random packets (destinations inside
``reach``), random idles and random backpressure, must show the same ``ready`` at every input
and the same beat at every output in every cycle.  Bits of ``i_dest`` outside an input's
``reach`` are ignored, and a bad ``reach`` is refused.
"""

import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.sim import Simulator

from peach2.router.crossbar import Crossbar
from peach2.top import CROSSBAR_REACH as REACH

N_IN, N_OUT = 9, 6


def test_the_tops_reach():
    """The reach the top gives its crossbar: N, E, W, S anywhere; register completions (4)
    and DMA reads (7) to N only; UR completions (5), DMA writes (6) and inline puts (8) to the
    four ports."""
    assert REACH == (0b111111,) * 4 + (0b000001, 0b001111, 0b001111, 0b000001, 0b001111)


class _Pair(Elaboratable):
    def __init__(self):
        self.full = Crossbar(N_IN, N_OUT)
        self.cut = Crossbar(N_IN, N_OUT, reach=REACH)

    def elaborate(self, platform):
        m = Module()
        m.submodules.full = self.full
        m.submodules.cut = self.cut
        return m


def _packets(rng, k, count):
    """``count`` packets of input ``k``: (one-hot destination inside its reach, beats)."""
    outs = [j for j in range(N_OUT) if REACH[k] >> j & 1]
    return [(1 << rng.choice(outs), rng.choice([1, 1, 2, 5])) for _ in range(count)]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_reach_changes_no_cycle(seed):
    """``slow`` (45 s each in Amaranth's simulator): the crossbar's order, no loss and no
    duplication are proved by ``peach2 prove`` (tb/formal), the reach rule by the test below."""
    rng = random.Random(seed)
    dut = _Pair()
    queues = [_packets(rng, k, 20) for k in range(N_IN)]
    p_valid, p_ready = rng.choice([0.4, 0.9]), rng.choice([0.3, 0.8, 1.0])
    moved = []

    async def testbench(ctx):
        beat_no = [0] * N_IN            # beat of the current packet at each input
        for cycle in range(20000):
            if not any(queues) and not any(ctx.get(o.valid) for o in dut.full.o):
                break
            offers = []
            for k in range(N_IN):
                offer = bool(queues[k]) and rng.random() < p_valid
                dest, beats = queues[k][0] if queues[k] else (1, 1)
                for x in (dut.full, dut.cut):
                    ctx.set(x.i[k].valid, offer)
                    ctx.set(x.i[k].p.first, beat_no[k] == 0)
                    ctx.set(x.i[k].p.last, beat_no[k] == beats - 1)
                    ctx.set(x.i[k].p.data, (k << 16) | (len(queues[k]) << 4) | beat_no[k])
                    ctx.set(x.i_dest[k], dest)
                offers.append(offer)
            for j in range(N_OUT):
                ready = rng.random() < p_ready
                ctx.set(dut.full.o[j].ready, ready)
                ctx.set(dut.cut.o[j].ready, ready)
            for k in range(N_IN):
                ready = ctx.get(dut.full.i[k].ready)
                assert ready == ctx.get(dut.cut.i[k].ready), f"cycle {cycle}: ready of input {k}"
                if offers[k] and ready:
                    beat_no[k] += 1
                    if beat_no[k] == queues[k][0][1]:
                        queues[k].pop(0)
                        beat_no[k] = 0
            for j in range(N_OUT):
                a, b = dut.full.o[j], dut.cut.o[j]
                assert ctx.get(a.valid) == ctx.get(b.valid), f"cycle {cycle}: valid of output {j}"
                if ctx.get(a.valid):
                    assert ctx.get(a.p.data) == ctx.get(b.p.data), f"cycle {cycle}: output {j}"
                    if ctx.get(a.ready):
                        moved.append(ctx.get(a.p.data))
            await ctx.tick()
        else:
            raise AssertionError("the crossbars did not drain")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert not any(queues) and len(moved) > 100


def test_dest_outside_reach_is_ignored():
    """Register completions (input 4) reach only N: a destination of E is never granted."""
    dut = Crossbar(N_IN, N_OUT, reach=REACH)

    async def testbench(ctx):
        ctx.set(dut.i[4].valid, 1)
        ctx.set(dut.i[4].p.first, 1)
        ctx.set(dut.i[4].p.last, 1)
        ctx.set(dut.i_dest[4], 0b000010)
        for j in range(N_OUT):
            ctx.set(dut.o[j].ready, 1)
        for _ in range(40):
            assert not ctx.get(dut.i[4].ready)
            assert not any(ctx.get(o.valid) for o in dut.o)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("reach", [[0b111111] * 7, [0] + [0b1] * 7, [0b1000000] * 8])
def test_bad_reach_is_refused(reach):
    with pytest.raises(ValueError, match="reach must be"):
        Crossbar(N_IN, N_OUT, reach=reach)
