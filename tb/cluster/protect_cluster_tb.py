"""cocotb test of the write protection windows on a ring of 4 (``docs/errors.md``).

Every chip stamps its node number into its PIO and DMA writes (``PROT_CONTROL.stamp``); node 0
opens windows on its host memory and turns the check on.  Hosts 1, 2 and 3 then store into
node 0 and their DMA channels write there, some inside what node 0 allows and some not: node 0's
memory must hold exactly the allowed bytes, its counters the refused TLPs on the ports they
arrived on, ``PROT_SOURCES`` the refused nodes.  The sub-cluster is ``cluster_tb``'s (its
``TB``): same HDL top, same Verilator build as ``test_ring4_all_to_all``.
"""
import random

import cocotb
from cluster_tb import TB

from peach2.sim.driver import memcpy
from peach2.sim.pcie import store_tlps
from peach2.sim.reference import dma as dma_model
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()


@cocotb.test()
async def protection_ring4(dut):
    """PIO and DMA from every other node into node 0: admitted source, refused source, outside
    every window, read-only carve-out for one node; memory byte-exact, counters per port."""
    tb = TB(dut)
    await tb.start()
    cluster, amap = tb.cluster, tb.amap
    rng = random.Random(SEED + 9)
    base, _ = amap.window(0, "host")
    _, memory = cluster.memory(0)
    noise = rng.randbytes(amap.host_size)
    memory[0:amap.host_size] = noise
    shadow = bytearray(noise)
    for drv in cluster.drivers:
        await drv.write_reg("PROT_CONTROL", stamp=1)
        await drv.read_reg("PROT_CONTROL")
    drv0 = cluster.drivers[0]
    half = amap.host_size // 2
    await drv0.set_window(0, base, base + half - 1, sources=0b0110)            # nodes 1, 2
    await drv0.set_window(1, base + 0x4000, base + 0x4FFF, writable=False, sources=0b0100)
    await drv0.write_reg("PROT_CONTROL", enable=1, stamp=1)
    await drv0.read_reg("PROT_CONTROL")

    # (how, source node, offset in node 0's host window, bytes, passes)
    cases = [("pio", 1, 0x1000, 200, True), ("pio", 3, 0x2000, 64, False),
             ("pio", 2, half + 0x100, 16, False), ("dma", 2, 0x3000, 1024, True),
             ("dma", 2, 0x4000, 512, False), ("dma", 1, 0x4800, 256, True),
             ("dma", 3, 0x6000, 128, False), ("dma", 2, half - 64, 128, False)]
    refused = {p: 0 for p in "EWS"}
    sources = set()
    dma_runs = []
    for how, src, off, size, passes in cases:
        data = rng.randbytes(size)
        address = base + off
        if how == "pio":
            tlps = store_tlps(address, size, cluster.mps)
            await cluster.pio_write(src, 0, off, data)
        else:
            tlps = dma_model.write_tlps(address, size, cluster.mps)
            host, drv = cluster.chips[src].host, cluster.drivers[src]
            buf, region = host.alloc(size)
            region[0:size] = data
            await drv.dma_config(mps=cluster.mps, mrrs=512)
            channel = len([r for r in dma_runs if r[0] == src])
            slots = await drv.dma_reg_set(channel, [memcpy(buf, address, size)])
            await drv.dma_reg_start(channel, slots)
            dma_runs.append((src, channel))
        in_port = tb.path(src, address)[-1][3]
        if passes:
            shadow[off:off + size] = data
        elif off + size <= half:
            refused[in_port] += len(tlps)
            sources.add(src)
        else:
            # The last case straddles window 0's end: its writes before the end pass.
            for a, nb in tlps:
                if a - base + nb <= half:
                    shadow[a - base:a - base + nb] = data[a - address:a - address + nb]
                else:
                    refused[in_port] += 1
                    sources.add(src)
    for src, channel in dma_runs:
        await cluster.drivers[src].dma_wait(channel)        # a refused write is no DMA error
    await cluster.quiet(300)

    got = bytes(memory[0:amap.host_size])
    bad = [i for i in range(amap.host_size) if got[i] != shadow[i]]
    assert not bad, f"node 0's memory differs at {len(bad)} bytes, first at {bad[0]:#x}"
    counts = (await cluster.counters())[0]
    assert {p: counts[p]["PROTECTED"] for p in "EWS"} == refused, (counts, refused)
    seen = await drv0.read_fields("PROT_SOURCES")
    assert seen == {"nodes": sum(1 << s for s in sources), "other": 0}, (seen, sources)
    for node in range(1, 4):
        assert not any(c["PROTECTED"] for c in (await cluster.counters())[node].values())
    dut._log.info("refused TLPs per port of node 0: %s, from nodes %s", refused, sorted(sources))
    cluster.check()
