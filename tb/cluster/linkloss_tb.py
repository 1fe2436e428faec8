"""cocotb tests of link loss and chip reset under traffic on a ring of 4 (``docs/errors.md``,
"Reset and link loss"), and of a register read right after a chip reset
(``read_after_chip_reset``, any topology: node 0 is reset).

Both tests run the same scenario around one event, ``cable`` (the cable node 0 E - node 1 W
goes down and comes back) or ``reset`` (chip 1 is held in reset, its two cables down, then
released and programmed again):

1. Before: every pair of nodes (source, destination) runs PIO stores into its own slot of the
   destination's host window (phase 1 slots); node 2's DMA channel 0 copies a buffer to node 3;
   node 0's DMA channel 0 runs a chain toward node 1.  The event happens in the middle.
2. During: node 0's DMA channel 1, started toward node 1, must end with DST_LINK_DOWN; a PIO
   read by host 0 into node 1's window is answered with UR; a PIO store by host 0 into node 1
   is dropped and counted (COUNT[N][LINK_DOWN] of node 0); PORT_STATUS of the ports facing the
   lost link shows the link down and ``dropping``.
3. Checks after the traffic stopped: every pair whose path avoids the lost link (or chip) has its
   bytes byte-exact; every other pair's slot holds, byte for byte, either what was there or what
   was written (nothing corrupted); node 2's DMA completed byte-exact.
4. After: the link (chip) is back; the ports become ready (PORT_STATUS); every pair runs PIO
   into fresh (phase 2) slots and node 0's channel 0 copies to node 1 again: all byte-exact.
   No write into a phase 1 slot reaches any host after the link was back (the hosts' arrival
   logs, with times).
"""
import random

import cocotb
from cluster_tb import TB
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.tlp import CplStatus

from peach2.params import DmaError
from peach2.sim.driver import DmaFault, memcpy
from peach2.sim.harness import cable_index, set_cable, wait_port_ready
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
SLOT = 0x2000           # bytes of one (source, phase) slot in a destination's window
PHASE = 0x40000         # phase 2 slots start here
DMA_AT = 0x80000        # DMA destinations in the windows


def slot(src, phase):
    return (phase - 1) * PHASE + src * SLOT


async def pio_flow(tb, rng, src, dst, phase, shadow, count, gap):
    """``count`` stores of 1..256 bytes from ``src`` into its phase slot at ``dst``."""
    off = slot(src, phase)
    for _ in range(count):
        size = rng.randint(1, 256)
        data = rng.randbytes(size)
        await tb.cluster.pio_write(src, dst, off, data)
        shadow[dst][off:off + size] = data
        off += size
        await ClockCycles(tb.dut.clk, gap)


async def dma_copy(tb, node, channel, dst, off, size, rng):
    """Start a register-mode copy of ``size`` fresh bytes from ``node`` to ``dst``; return the
    data."""
    host, drv = tb.cluster.chips[node].host, tb.cluster.drivers[node]
    buf, region = host.alloc(size)
    data = rng.randbytes(size)
    region[0:size] = data
    base, _ = tb.amap.window(dst, "host")
    slots = await drv.dma_reg_set(channel, [memcpy(buf, base + off, size)])
    await drv.dma_reg_start(channel, slots)
    return data


async def dma_result(drv, channel):
    try:
        await drv.dma_wait(channel)
        return DmaError.NONE
    except DmaFault as fault:
        return fault.error


def lost_nodes(tb, event):
    """What the event cuts: a set of (node, port) ends and, for a reset, the node."""
    cl = tb.cluster
    if event == "cable":
        j = cable_index(cl, 0, "E")
        a, pa, b, pb, _ = cl.cables[j]
        return [j], {(a, pa), (b, pb)}, None
    js = [j for j, c in enumerate(cl.cables) if 1 in (c[0], c[2])]
    ends = {(c[0], c[1]) for c in cl.cables if c[2] == 1} | {(c[2], c[3]) for c in cl.cables
                                                             if c[0] == 1}
    return js, ends, 1


def crosses(tb, src, dst, ends, node):
    base, _ = tb.amap.window(dst, "host")
    hops = tb.path(src, base)
    return (node in (src, dst)) or any((a, pa) in ends or (b, pb) in ends
                                       for a, pa, b, pb in hops)


async def scenario(dut, event):
    tb = TB(dut)
    await tb.start()
    cl, amap, n = tb.cluster, tb.amap, tb.topology.n_nodes
    rng = random.Random(SEED + 19)
    mems = [cl.memory(d)[1] for d in range(n)]
    noise = [rng.randbytes(amap.host_size) for _ in range(n)]
    for d in range(n):
        mems[d][0:amap.host_size] = noise[d]
    shadow = [bytearray(x) for x in noise]
    for drv in cl.drivers:
        await drv.dma_config(mps=cl.mps, mrrs=512)
    cables, ends, gone = lost_nodes(tb, event)
    pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
    cut = {p for p in pairs if crosses(tb, *p, ends, gone)}
    dut._log.info("event %s: cables %s, ends %s; pairs cut %s", event, cables, sorted(ends),
                  sorted(cut))

    # 1. Traffic, and the event in its middle.  Node 1's own stores stop before a reset.
    flows = [cocotb.start_soon(pio_flow(tb, random.Random(SEED + 100 * s + d), s, d, 1, shadow,
                                        12, 40))
             for s, d in pairs if not (event == "reset" and s == 1)]
    dma_b = await dma_copy(tb, 2, 0, 3, DMA_AT, 4096, rng)
    await dma_copy(tb, 0, 0, 1, DMA_AT, 8192, rng)
    await ClockCycles(dut.clk, 600)
    t_down = get_sim_time("ns")
    if event == "cable":
        set_cable(cl, cables[0], False)
    else:
        dut.c1_reset.value = 1
    await ClockCycles(dut.clk, 20)

    # 2. While the link (chip) is gone.
    drv0 = cl.drivers[0]
    before = (await drv0.counters("N"))["LINK_DOWN"]
    await cl.pio_write(0, 1, slot(0, 1) + SLOT - 64, bytes(64))     # one TLP, dropped
    await dma_copy(tb, 0, 1, 1, DMA_AT + 0x4000, 1024, rng)
    sent = len(cl.chips[0].sent["n"])
    base1, _ = amap.window(1, "host")
    try:
        await drv0.tca_bar.read(base1 - amap.tca_base, 4, timeout=20_000, timeout_unit="ns")
    except Exception as exc:        # the root complex reports the UR completion
        dut._log.info("PIO read toward the lost link: %r", exc)
    urs = [t for t in cl.chips[0].sent["n"][sent:] if t.is_completion()
           and t.status == CplStatus.UR]
    assert len(urs) == 1, f"node 0 answered the read with {len(urs)} UR completions"
    assert await dma_result(drv0, 1) == DmaError.DST_LINK_DOWN
    await cl.quiet(200)
    # Host 0's stores toward node 1 (this one and the flows') are dropped at node 0's N.
    assert (await drv0.counters("N"))["LINK_DOWN"] - before >= 1
    for node, port in ends:
        if node == gone:
            continue
        st = await cl.drivers[node].read_fields("PORT_STATUS", "NEWS".index(port))
        assert st["link_up"] == 0 and st["dropping"] == 1, (node, port, st)
    for f in flows:
        await f
    result_a = await dma_result(drv0, 0)
    assert result_a in (DmaError.NONE, DmaError.DST_LINK_DOWN), result_a
    assert await dma_result(cl.drivers[2], 0) == DmaError.NONE
    shadow[3][DMA_AT:DMA_AT + len(dma_b)] = dma_b
    await cl.quiet(300)

    # 3. Byte-exact where the path avoids the event, nothing corrupted where it does not.
    for s, d in pairs:
        lo, hi = slot(s, 1), slot(s, 1) + SLOT
        got = bytes(mems[d][lo:hi])
        if (s, d) in cut:
            bad = [k for k in range(SLOT) if got[k] not in (noise[d][lo + k], shadow[d][lo + k])]
        else:
            bad = [k for k in range(SLOT) if got[k] != shadow[d][lo + k]]
        assert not bad, f"{s}->{d}: {len(bad)} bytes wrong, first at {lo + bad[0]:#x}"
    assert bytes(mems[3][DMA_AT:DMA_AT + len(dma_b)]) == dma_b, "node 2's DMA to node 3"
    lost = {p: await cl.drivers[p[0]].counters(p[1]) for p in ends if p[0] != gone}
    dut._log.info("during: DMA 0 ch0 %s; LINK_FLUSHED at the lost ends %s", result_a.name,
                  {p: c["LINK_FLUSHED"] for p, c in lost.items()})

    # 4. Back: the link comes up (the chip is released and programmed again).
    if event == "cable":
        set_cable(cl, cables[0], True)
    else:
        dut.c1_reset.value = 0
        await ClockCycles(dut.clk, 300)
        await cl.program(1)
        await cl.drivers[1].dma_config(mps=cl.mps, mrrs=512)
    t_up = get_sim_time("ns")
    for node, port in ends:
        await wait_port_ready(cl, node, port)
    await ClockCycles(dut.clk, 100)
    flows = [cocotb.start_soon(pio_flow(tb, random.Random(SEED + 7 + 100 * s + d), s, d, 2,
                                        shadow, 6, 10))
             for s, d in pairs]
    data_a = await dma_copy(tb, 0, 0, 1, DMA_AT + 0x8000, 8192, rng)
    data_r = await dma_copy(tb, 1, 2, 0, DMA_AT + 0x8000, 2048, rng)
    for f in flows:
        await f
    assert await dma_result(drv0, 0) == DmaError.NONE
    assert await dma_result(cl.drivers[1], 2) == DmaError.NONE
    shadow[1][DMA_AT + 0x8000:DMA_AT + 0x8000 + 8192] = data_a
    shadow[0][DMA_AT + 0x8000:DMA_AT + 0x8000 + 2048] = data_r
    after = [(d, lo, hi) for d in range(n)
             for lo, hi in ((PHASE, PHASE + n * SLOT), (DMA_AT + 0x8000, DMA_AT + 0x8000 + 8192))]
    # A DMA is done once its last write has entered the chip's output port: let the writes
    # still on their way arrive (at most 20 us), then compare.
    for _ in range(40):
        if all(bytes(mems[d][lo:hi]) == shadow[d][lo:hi] for d, lo, hi in after):
            break
        await ClockCycles(dut.clk, 125)
    for d, lo, hi in after:
        got = bytes(mems[d][lo:hi])
        bad = [k for k in range(hi - lo) if got[k] != shadow[d][lo + k]]
        assert not bad, f"after: node {d} wrong at {len(bad)} bytes, first at {lo + bad[0]:#x}"
    for d in range(n):
        dut._log.info("node %d counters %s", d, {p: {k: v for k, v in c.items() if v}
                                                 for p, c in (await cl.counters())[d].items()})
    # The store dropped while the link was down never arrived.
    lo = slot(0, 1) + SLOT - 64
    assert bytes(mems[1][lo:lo + 64]) == noise[1][lo:lo + 64], "a dropped store arrived"
    # Nothing written before the event arrives after the link is back.
    for d in range(n):
        phys = cl.memory(d)[0]
        late = [(t, tlp.address) for t, tlp in cl.arrivals[d]
                if t >= t_up and (0 <= tlp.address - phys < PHASE
                                  or DMA_AT <= tlp.address - phys < DMA_AT + 0x8000)]
        assert not late, f"node {d}: writes from before the event arrived after it: {late[:4]}"
    dut._log.info("event %s at %.0f ns, back at %.0f ns; every check passed", event, t_down,
                  t_up)
    cl.check()


@cocotb.test()
async def cable_down_ring4(dut):
    """One cable of a ring of 4 down in the middle of PIO and DMA traffic, then up again."""
    await scenario(dut, "cable")


@cocotb.test()
async def chip_reset_ring4(dut):
    """Chip 1 of a ring of 4 reset in the middle of PIO and DMA traffic, then programmed again."""
    await scenario(dut, "reset")


#: A register read right after a chip reset must be answered within this (ns): a read's round
#: trip through the calibrated hard-IP pipelines takes a few hundred ns.
READ_BOUND_NS = 4000


@cocotb.test()
async def read_after_chip_reset(dut):
    """Chip 0 reset through ``c0_reset`` (its host's link stays up), its host reads a register
    at once after the release: answered with the right data within READ_BOUND_NS; then the
    chip is programmed again (``Cluster.program``, which reads CONTROL back) and its host's
    stores into its own window arrive."""
    tb = TB(dut)
    await tb.start()
    cl = tb.cluster
    drv, clk = cl.drivers[0], dut.clk
    ident = await drv.read_reg("ID")
    assert (await drv.read_fields("CONTROL"))["pio_enable"] == 1
    dut.c0_reset.value = 1
    await ClockCycles(clk, 100)
    dut.c0_reset.value = 0
    await ClockCycles(clk, 2)
    t0 = get_sim_time("ns")
    try:
        got = await with_timeout(drv.read_reg("ID"), READ_BOUND_NS, "ns")
    except SimTimeoutError:
        raise AssertionError(f"a register read sent right after chip 0's reset was not "
                             f"answered within {READ_BOUND_NS} ns") from None
    dut._log.info("register read right after the chip reset answered in %.0f ns",
                  get_sim_time("ns") - t0)
    assert got == ident, hex(got)
    assert await drv.read_reg("CONTROL") == 0           # the reset cleared the enables
    st = await drv.read_fields("PORT_STATUS", 0)
    assert st["link_up"] == 1 and st["dropping"] == 0, st
    await with_timeout(cl.program(0), READ_BOUND_NS * 10, "ns")
    rng = random.Random(SEED + 23)
    data = rng.randbytes(64)
    await cl.pio_write(0, 0, 0x100, data)
    await drv.read_reg("ID")                            # the store has reached the host
    await ClockCycles(clk, 200)
    assert bytes(cl.memory(0)[1][0x100:0x140]) == data
    assert (await drv.counters("N"))["LINK_FLUSHED"] == 0
