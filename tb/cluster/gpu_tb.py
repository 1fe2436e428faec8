"""cocotb tests of GPU memory on the HDL sub-cluster (``peach2.sim.pcie.gpu`` on every host).

Every node carries ``gpus`` GPU models (default 2) of 1 MiB each, their BARs placed where the
TCA address map's GPU windows leave port N (002 section 3.5).  Parameters (``PEACH2_PARAMS``):
``topology``, ``pipeline_ns`` as ``cluster_tb``; ``gpus``; ``result_file`` (JSON figures).

- ``gpu_transfers``: at once, node 0's DMA reads its GPU 0 into node 2's GPU 1 (GPU to remote
  GPU), node 1's DMA copies its host memory into node 3's GPU 0 (host to remote GPU), and host
  3 stores into node 1's GPU 1 (PIO); sizes from 1 byte, odd offsets; every byte of every GPU
  and host memory is checked against a model, every chip's drop counters are zero, and the
  GPU's completions took at least the read pipe's time (latency + bytes / bandwidth).
- ``gpu_read_rate``: for each of ``sizes``, a chained DMA of ``descs`` descriptors of that
  size from node 0 to node 1's host memory, once from node 0's host memory and once from its
  GPU 0; the rates from the DMA start to the last byte's arrival, beside the wire-format bound
  of the writes that arrived, go to ``result_file`` (the benchmark of ``bench_gpu.py``); every
  transfer checked byte for byte.
"""

import json
import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time

from peach2.routes import Topology, default_address_map
from peach2.sim.driver import Chain
from peach2.sim.harness import DROP_REASONS as DROPS
from peach2.sim.harness import Cluster
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
GPU_SIZE = 1 << 20


async def start_cluster(dut):
    """The cluster of ``topology`` with ``gpus`` GPUs per node, started; every host's and GPU's
    memory filled with seeded noise.  Returns ``(cluster, shadows)``: shadows of every host
    memory (``"host", node``) and GPU memory (``node, i``)."""
    topo = Topology.parse(PARAMS.get("topology", "ring:4"))
    amap = default_address_map(topo.n_nodes, gpu_size=GPU_SIZE)
    cluster = Cluster(dut, topo, amap, seed=SEED, hdl_cables=True, routes="safe",
                      hardip_pipeline_ns=PARAMS.get("pipeline_ns", 0.0),
                      n_gpus=PARAMS.get("gpus", 2))
    assert cluster.address_map.n_gpus == PARAMS.get("gpus", 2)
    await cluster.reset_and_start()
    rng = random.Random(SEED + 5)
    shadows = {}
    for node in range(topo.n_nodes):
        memories = [("host", node, cluster.memory(node)[1])]
        memories += [(node, i, cluster.gpu_memory(node, i)[1])
                     for i in range(cluster.address_map.n_gpus)]
        for a, b, memory in memories:
            noise = rng.randbytes(len(memory))
            memory[0:len(noise)] = noise
            shadows[(a, b)] = bytearray(noise)
    return cluster, shadows


async def set_chain(cluster, node, src, pieces, channel=0):
    """Register a chain on ``node``'s DMA ``channel`` (``tcaDescSet``): ``pieces`` of
    ``(src offset, dst, size)`` from local bus address ``src``; returns the chain."""
    host, drv = cluster.chips[node].host, cluster.drivers[node]
    drv.memory = host.rc.mem_address_space
    desc, _ = host.alloc(64 * len(pieces))
    await drv.dma_config(mps=cluster.mps, mrrs=512, ext_tags=True)
    chain = Chain(channel, desc)
    for off, dst, size in pieces:
        chain.memcpy(src + off, dst, size)
    await drv.dma_desc_set(chain)
    return chain


async def run_chain(cluster, node, chain):
    """Start a registered chain and poll it to the end; returns the final status."""
    drv = cluster.drivers[node]
    await drv.dma_start(chain.channel)
    return await drv.dma_wait(chain.channel, pause=lambda: ClockCycles(cluster.dut.clk, 32))


async def dma_chain(cluster, node, src, pieces, channel=0):
    """:func:`set_chain`, then :func:`run_chain`."""
    return await run_chain(cluster, node, await set_chain(cluster, node, src, pieces, channel))


def check_memories(cluster, shadows):
    """Every host and GPU memory equals its shadow, byte for byte."""
    for (a, b), shadow in shadows.items():
        memory = cluster.memory(b)[1] if a == "host" else cluster.gpu_memory(a, b)[1]
        got = bytes(memory[0:len(shadow)])
        if got != bytes(shadow):
            bad = [k for k in range(len(shadow)) if got[k] != shadow[k]]
            where = f"host {b}" if a == "host" else f"node {a} GPU {b}"
            raise AssertionError(f"{where} memory differs at {len(bad)} bytes, offsets "
                                 f"{bad[0]:#x}..{bad[-1]:#x}")


async def check_no_drops(cluster):
    for node, ports in enumerate(await cluster.counters()):
        for port, counts in ports.items():
            for reason in DROPS:
                assert counts[reason] == 0, f"chip {node} port {port}: {reason} = {counts[reason]}"


def plan_pieces(rng, shadow_src, shadow_dst, dst_base, count, max_size):
    """``count`` pieces of 1 .. ``max_size`` bytes at odd offsets, disjoint in the destination;
    applies them to ``shadow_dst``.  Returns ``[(src offset, dst address, size)]``."""
    pieces, slot = [], len(shadow_dst) // count
    for k in range(count):
        size = rng.randint(1, max_size) if k else max_size
        src = rng.randrange(len(shadow_src) - size)
        dst = k * slot + rng.randrange(slot - size)
        shadow_dst[dst:dst + size] = shadow_src[src:src + size]
        pieces.append((src, dst_base + dst, size))
    return pieces


@cocotb.test()
async def gpu_transfers(dut):
    """GPU -> remote GPU and host -> remote GPU by DMA, PIO into a remote GPU, at once."""
    cluster, shadows = await start_cluster(dut)
    amap, n, rng = cluster.address_map, cluster.n_nodes, random.Random(SEED + 6)
    a, b, c, d = 0, n // 2, 1, (1 + n // 2) % n     # on a ring of 4: two hops each
    gpu_to_gpu = plan_pieces(rng, shadows[(a, 0)], shadows[(b, 1)], amap.gpu_base(b, 1), 4, 4096)
    host_to_gpu = plan_pieces(rng, shadows[("host", c)], shadows[(d, 0)], amap.gpu_base(d, 0), 4,
                              4096)
    stores = []
    for k in range(8):
        size = rng.randint(1, 300)
        off = k * 4096 + rng.randrange(4096 - size)
        stores.append((off, rng.randbytes(size)))
        shadows[(c, 1)][off:off + size] = stores[-1][1]

    async def pio():
        for off, data in stores:
            await cluster.pio_write(d, c, off, data, window=("gpu", 1))

    t0 = get_sim_time("ns")
    tasks = [cocotb.start_soon(dma_chain(cluster, a, cluster.gpu_memory(a, 0)[0], gpu_to_gpu)),
             cocotb.start_soon(dma_chain(cluster, c, cluster.memory(c)[0], host_to_gpu)),
             cocotb.start_soon(pio())]
    for task in tasks:
        await task
    for (node, i), pieces in (((b, 1), gpu_to_gpu), ((d, 0), host_to_gpu)):
        await cluster.wait_gpu_bytes(node, i, sum(p[2] for p in pieces))
    await cluster.wait_gpu_bytes(c, 1, sum(len(s) for _, s in stores))
    dut._log.info("GPU %d.0 -> GPU %d.1 (%d B), host %d -> GPU %d.0 (%d B), PIO host %d -> GPU "
                  "%d.1 (%d B) in %.0f ns", a, b, sum(p[2] for p in gpu_to_gpu), c, d,
                  sum(p[2] for p in host_to_gpu), d, c, sum(len(s) for _, s in stores),
                  get_sim_time("ns") - t0)
    await cluster.quiet()
    check_memories(cluster, shadows)
    gpu = cluster.gpus[a][0].function
    assert gpu.reads > 0, "the DMA did not read GPU 0 of node 0"
    # the read pipe: no faster than its latency plus the data at its bandwidth (1 ns rounding)
    span = gpu.last_completion_ns - gpu.first_read_ns
    least = gpu.read_latency_ns + gpu.bytes_read / gpu.read_bandwidth * 1e9
    assert span >= least - 1, f"GPU read {gpu.bytes_read} B in {span} ns, pipe needs {least}"
    dut._log.info("GPU 0.0 returned %d B in %.0f ns from the first read (%.0f MB/s; pipe: "
                  "%.0f ns at least)", gpu.bytes_read, span, gpu.bytes_read / span * 1e3, least)
    for node in range(n):
        assert cluster.bytes_received(node) == 0, f"host {node} received writes meant for GPUs"
    await check_no_drops(cluster)
    cluster.check()


@cocotb.test()
async def gpu_read_rate(dut):
    """Chained DMAs from node 0's host memory and from its GPU 0 into node 1's host memory,
    for every size of ``sizes``: rate from the DMA start (the ``CH_CTRL`` start write) to the
    last byte's arrival, beside the wire-format bound of the writes that arrived; host memory
    reads take ``host_read_latency_ns`` (default 500)."""
    cluster, shadows = await start_cluster(dut)
    # host memory answers reads after the same 500 ns as the DMA benchmarks (and the GPU model)
    cluster.chips[0].host.configure_reads(latency_ns=PARAMS.get("host_read_latency_ns", 500))
    descs = PARAMS.get("descs", 16)
    dst = cluster.address_map.window(1, "host")[0]
    points = []
    for size in PARAMS.get("sizes", [4096]):
        for source in ("host", "gpu"):
            src, shadow = ((cluster.memory(0)[0], shadows[("host", 0)]) if source == "host"
                           else (cluster.gpu_memory(0, 0)[0], shadows[(0, 0)]))
            total = descs * size
            if total > len(shadow):
                raise ValueError(f"{descs} x {size} bytes do not fit the {len(shadow)}-byte "
                                 f"memories")
            shadows[("host", 1)][0:total] = shadow[0:total]
            chain = await set_chain(cluster, 0, src, [(k * size, dst + k * size, size)
                                                      for k in range(descs)])
            first, before = len(cluster.arrivals[1]), cluster.bytes_received(1)
            t0 = get_sim_time("ns")
            await run_chain(cluster, 0, chain)
            await cluster.wait_bytes(1, before + total, timeout_ns=10_000_000)
            writes = [w for _, w in cluster.arrivals[1][first:]]
            ns = cluster.arrivals[1][-1][0] - t0
            bound = 4e9 * sum(w.get_payload_size() for w in writes) / sum(
                w.get_wire_size() for w in writes)
            points.append({"source": source, "size": size, "descs": descs, "bytes": total,
                           "ns": ns, "mb_s": total / ns * 1e3, "bound_mb_s": bound / 1e6})
            dut._log.info("DMA %d x %d B from node 0's %s memory to host 1: %.0f ns, %.0f MB/s "
                          "(writes' wire bound %.0f MB/s)", descs, size, source, ns,
                          points[-1]["mb_s"], bound / 1e6)
            check_memories(cluster, shadows)
    await check_no_drops(cluster)
    cluster.check()
    if PARAMS.get("result_file"):
        gpu = cluster.gpus[0][0].function
        with open(PARAMS["result_file"], "w") as f:
            json.dump({"points": points, "gpu_read_bandwidth": gpu.read_bandwidth,
                       "host_read_latency_ns": cluster.chips[0].host.read_latency_ns,
                       "gpu_read_latency_ns": gpu.read_latency_ns,
                       "topology": PARAMS.get("topology")}, f, indent=1)
