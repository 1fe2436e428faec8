"""DMA benchmarks: the papers' Figures 4-7 and the halo planes, measured as 002 section 4.1 does.

::

    Host 0 (RC, read latency stated) --Gen2 x8-- N chip 0 E ==cable== W chip 1 N -- Host 1
      src, descriptors, window           DMA      |                             window memory
      local destination <-- writes via N --------+  neighbour destination <-- writes via E, N

Time runs from the kick (the host's ``CH_CTRL`` write call; descriptors or register slots are set
up before, as the paper's driver does) to the last write of the transfer landing in destination
memory (the root complex's memory-write handler), idle system, no backpressure.  Completion is
detected by polling ``CH_STATUS`` every 1 us, as in 002 section 4.1.  Each point also meters the
link the data leaves on (chip 0's N for local, E for the neighbour) to give the wire bound of
exactly the TLPs sent there: for local, the DMA's read requests share N's transmit side with the
writes, so that bound is below 3.66 GB/s.

Writes a JSON list of points to ``PEACH2_PARAMS["result_file"]``.  Other parameters:
``read_latency_ns`` (host memory read latency, default 500), ``quick`` (fewer points: sizes by
4x, halo N 16 and 64), ``progress_file`` (a line per point appended to it as it finishes),
``chain`` (transfers per chain of Figures 4 and 7: 128, 32 with ``quick``) and ``max_total``
(bytes moved per point at most, default 512 KiB, 128 KiB with ``quick``): chains are shortened
to fit and every point records its count (simulation time).
"""

import json

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.tlp import TlpType

from dma_harness import PARAMS, DmaHarness, Job
from peach2.sim.dma import contiguous, halo_transfer, memcpy
from peach2.sim.throughput import ThroughputMeter

_MRD = (TlpType.MEM_READ, TlpType.MEM_READ_64)
_MWR = (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
PAPER_BOUND = 4.0 * 256 / (256 + 16 + 2 + 4 + 1 + 1)     # 002 section 4.1: 3.66 GB/s


class Measure:
    """Run one job on node 0 and time it, metering chip 0's port the data leaves on."""

    def __init__(self, harness):
        self.harness = harness
        chip = harness.cluster.chips[0]
        self.meters = {
            "N": ThroughputMeter.tx_of(chip.models["n"], enabled=False,
                                       select=lambda t: t.fmt_type in _MWR + _MRD),
            "E": ThroughputMeter.tx_of(chip.models["e"], enabled=False,
                                       select=lambda t: t.fmt_type in _MWR)}

    async def __call__(self, job, port):
        harness = self.harness
        harness.plan(job)
        dst_node = harness.where(job.transfers[0].dst)[0]
        arrivals = harness.cluster.arrivals[dst_node]
        seen = len(arrivals)
        meter = self.meters[port]
        meter.start()
        drv = harness.drivers[0]
        if job.reg:
            n = await drv.dma_reg_set(job.channel, job.transfers)
            t0 = get_sim_time("ns")
            await drv.dma_reg_start(job.channel, n)
        else:
            await drv.dma_desc_set(job.chain)
            t0 = get_sim_time("ns")
            await drv.dma_start(job.channel)
        job.status = await drv.dma_wait(job.channel,
                                        pause=lambda: ClockCycles(harness.dut.clk, 250))
        await harness.cluster.quiet(20)
        meter.stop()
        window = harness.window[dst_node][0]
        lo = min(harness.where(t.dst)[1] for t in job.transfers) + window
        hi = max(harness.where(t.dst_span()[1] - 1)[1] for t in job.transfers) + window + 1
        landed = [(t, tlp) for t, tlp in arrivals[seen:] if lo <= tlp.address < hi]
        nbytes = sum(t.bytes for t in job.transfers)
        assert sum(4 * tlp.length for _, tlp in landed) >= nbytes
        t1 = max(t for t, _ in landed)
        harness.apply(job.outcome.writes)
        rep = meter.report()
        return {"bytes": nbytes, "ns": t1 - t0, "gbps": nbytes / (t1 - t0),
                "port": port, "port_bound_gbps": rep.bound_gbps, "port_gbps": rep.gbps,
                "tlps": rep.tlps,
                "desc_done": job.status["desc_done"]}


def sizes(quick):
    if quick:       # 8 B to 128 KiB by 4x, and 4 KiB (where the goal starts)
        return sorted({8 << (2 * i) for i in range(8)} | {4096})
    return [8 << i for i in range(15)]


@cocotb.test()
async def figures(dut):
    """Figures 4-7 of 002 section 4.1 and block-stride vs contiguous halo planes."""
    harness = DmaHarness(dut, 2, host_size=1 << 22, src_size=1 << 22)
    await harness.start(pauses=False)
    latency = PARAMS.get("read_latency_ns", 500)
    for node in range(2):
        harness.host(node).configure_reads(latency_ns=latency)
    quick = PARAMS.get("quick", False)
    max_total = PARAMS.get("max_total", 1 << 17 if quick else 1 << 19)
    measure = Measure(harness)
    src = harness.src[0][0]
    out = []

    def dst(node, off=0x1000):
        return harness.tca(node, off)

    # A subset (a check of single points): "figures" names the figures to run, "sizes" the
    # sizes of Figures 4, 5 and 7, "chains" the chain lengths of Figure 6, "halo_n" the arrays
    # of the halo planes.
    wanted = set(PARAMS.get("figures") or ("chain128", "single", "chain4k", "halo"))
    only_sizes = PARAMS.get("sizes")
    fig_sizes = [s for s in sizes(quick) if not only_sizes or s in only_sizes]
    chains = (PARAMS.get("chains") or [1, 2, 4, 8, 16, 32, 64, 128]) if "chain4k" in wanted else []
    halo_n = (PARAMS.get("halo_n") or ([16, 64] if quick else [16, 32, 64])
              if "halo" in wanted else [])
    total = (2 * len(fig_sizes) * (("chain128" in wanted) + ("single" in wanted))
             + len(chains) + 6 * len(halo_n))
    progress = PARAMS.get("progress_file")

    def record(fig, **kw):
        out.append({"figure": fig, "read_latency_ns": latency, **kw})
        r = out[-1]
        dut._log.info("%s: %s", fig, {k: v for k, v in r.items() if k != "figure"})
        if progress:        # one line per point, printed by tb/benchmarks.py as it runs
            label = " ".join(f"{k}={r[k]}" for k in ("where", "mode", "shape", "plane", "n",
                                                     "size", "count") if k in r)
            with open(progress, "a") as f:
                f.write(f"dma: point {len(out)} of {total} done ({fig} {label}, "
                        f"{r.get('gbps', 0):.3f} GB/s), {total - len(out)} left\n")

    # Figures 4 and 7: 128 chained transfers of each size, local and to the neighbour.
    chain = PARAMS.get("chain", 32 if quick else 128)
    for size in fig_sizes if "chain128" in wanted else ():
        n = max(1, min(chain, max_total // size))
        for where, node, port in (("local", 0, "N"), ("neighbour", 1, "E")):
            job = Job(0, 0, [memcpy(src + i * size, dst(node, 0x1000 + i * size), size)
                             for i in range(n)])
            r = await measure(job, port)
            record("chain128", where=where, size=size, count=n, **r)

    # Figure 5: one transfer, with a descriptor or in register mode (local).
    for size in fig_sizes if "single" in wanted else ():
        for reg in (False, True):
            job = Job(0, 1, [memcpy(src, dst(0), size)], reg=reg)
            r = await measure(job, "N")
            record("single", mode="register" if reg else "descriptor", size=size, **r)

    # Figure 6: 4 KiB transfers, chain length 1..128 (local), in quick mode too (the figure's
    # range); "chains" picks some of them.
    for n in chains:
        job = Job(0, 2, [memcpy(src + 4096 * i, dst(0, 0x1000 + 4096 * i), 4096)
                         for i in range(n)])
        r = await measure(job, "N")
        record("chain4k", count=n, size=4096, **r)

    # Halo planes of N^3 arrays to the neighbour: one block-stride descriptor against one
    # contiguous descriptor of the same bytes.
    for n in halo_n:
        for plane in ("jk", "ik", "ij"):
            t = halo_transfer(n, plane, src, dst(1, 0), n - 2, 0)
            for shape, tr in (("block-stride", t), ("contiguous", contiguous(t))):
                r = await measure(Job(0, 3, [tr]), "E")
                burst = t.length
                record("halo", n=n, plane=plane, shape=shape, burst=burst, **r)

    harness.check_memory()
    harness.check_hosts()
    result_file = PARAMS.get("result_file")
    if result_file:
        with open(result_file, "w") as f:
            json.dump({"points": out, "paper_bound_gbps": PAPER_BOUND,
                       "read_latency_ns": latency}, f, indent=1)
