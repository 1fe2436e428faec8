"""``peach2.router.linkstate.LinkState``'s ``dropping`` after a reset and after a loss (Amaranth
simulator; docs/errors.md, "Reset and link loss").

After a reset no port needs the ``HOLD`` cycles until its link is first lost: ``dropping``
falls two cycles after the release when the link is in L0 throughout, or as soon as the link
is seen up and the port is empty.  Every loss after that, a link that flaps before ``dropping``
first fell included, waits ``HOLD`` empty cycles after the link is back.
"""

from amaranth.sim import Simulator

from peach2.router.linkstate import HOLD, LTSSM_L0, LinkState

DOWN = 0x02                     # an LTSSM state that is not L0 (Polling)


def _run(bench):
    dut = LinkState()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench(dut))
    sim.run()


def _dropping(ctx, dut, p):
    return ctx.get(dut.dropping) >> p & 1


async def _cycles_until_clear(ctx, dut, p, limit):
    """Cycles until port ``p``'s ``dropping`` is 0 (``None`` if not within ``limit``)."""
    for n in range(limit):
        if not _dropping(ctx, dut, p):
            return n
        await ctx.tick()
    return None


def test_links_up_through_reset_clear_in_two_cycles():
    """Every link in L0 from the first cycle: ``dropping`` is 1 in cycles 0 and 1, 0 from 2."""
    def bench(dut):
        async def run(ctx):
            for p in range(4):
                ctx.set(dut.ltssm[p], LTSSM_L0)
            seen = []
            for _ in range(6):
                seen.append(ctx.get(dut.dropping))
                await ctx.tick()
            assert seen == [0xF, 0xF, 0, 0, 0, 0], seen
        return run
    _run(bench)


def test_fresh_port_waits_for_empty_not_hold():
    """Port 1 comes up while something is held for it (``queued``): it clears in the second
    cycle after the port is empty (``empty`` is a register), not ``HOLD`` cycles later."""
    def bench(dut):
        async def run(ctx):
            ctx.set(dut.queued, 0b0010)
            await ctx.tick().repeat(20)             # link down since the reset
            assert _dropping(ctx, dut, 1)
            ctx.set(dut.ltssm[1], LTSSM_L0)
            await ctx.tick().repeat(30)
            assert _dropping(ctx, dut, 1)           # up, but not empty
            ctx.set(dut.queued, 0)
            n = await _cycles_until_clear(ctx, dut, 1, HOLD)
            assert n == 2, n
        return run
    _run(bench)


def test_loss_after_first_clear_waits_hold():
    """Up from the reset, lost, back: ``dropping`` falls ``HOLD`` + 2 cycles after the link is
    back (registered ``link_up``, then ``HOLD`` empty cycles counted from 0)."""
    def bench(dut):
        async def run(ctx):
            ctx.set(dut.ltssm[2], LTSSM_L0)
            await ctx.tick().repeat(3)
            assert not _dropping(ctx, dut, 2)
            ctx.set(dut.ltssm[2], DOWN)
            await ctx.tick().repeat(10)
            assert _dropping(ctx, dut, 2)
            ctx.set(dut.ltssm[2], LTSSM_L0)
            n = await _cycles_until_clear(ctx, dut, 2, 4 * HOLD)
            assert n == HOLD + 2, n
        return run
    _run(bench)


def test_flap_before_first_clear_waits_hold():
    """Port 3 comes up while not empty, goes down again before ``dropping`` fell, comes back:
    that was a loss, so it waits ``HOLD`` empty cycles too."""
    def bench(dut):
        async def run(ctx):
            ctx.set(dut.busy, 0b1000)
            ctx.set(dut.ltssm[3], LTSSM_L0)
            await ctx.tick().repeat(10)
            assert _dropping(ctx, dut, 3)
            ctx.set(dut.ltssm[3], DOWN)
            await ctx.tick().repeat(5)
            ctx.set(dut.ltssm[3], LTSSM_L0)
            ctx.set(dut.busy, 0)
            n = await _cycles_until_clear(ctx, dut, 3, 4 * HOLD)
            assert n == HOLD + 2, n
        return run
    _run(bench)
