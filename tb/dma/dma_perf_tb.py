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

The points are those of :func:`peach2.sim.bench.dma_plan.plan` (figures ``chain128``,
``scattered``, ``single``, ``chain4k``, ``halo``), or the list ``PEACH2_PARAMS["points"]`` (one
job of a parallel run, :mod:`peach2.sim.bench.dma_run`: usually one point), measured in order,
each from an idle system (but not from reset: a point after others may differ by a cycle or two
from the same point alone).  Writes ``{"points": [...], "paper_bound_gbps", "read_latency_ns",
"costs"}`` to ``PEACH2_PARAMS["result_file"]`` (``costs``: CPU and wall seconds of the set-up and of each
point, not figures).  Other parameters: ``read_latency_ns`` (host memory read latency, default
500), ``progress_file`` (a JSON line per point appended to it as it finishes), and without
``points`` those of :func:`~peach2.sim.bench.dma_plan.plan`: ``quick`` (sizes by 4x, halo N 16
and 64), ``chain`` (transfers per chain of Figures 4 and 7: 128, 32 with ``quick``),
``max_total`` (bytes moved per point at most, default 512 KiB, 128 KiB with ``quick``: chains
are shortened to fit and every point records its count), ``figures``, ``sizes``, ``chains``,
``halo_n`` (a subset).
"""

import json
import time

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.dllp import Dllp
from cocotbext.pcie.core.tlp import TlpType

from peach2.sim.bench.dma_plan import SCATTER_STRIDE, label, plan
from peach2.sim.driver import Chain, contiguous, halo_transfer, memcpy
from peach2.sim.harness.dma import DESC_AREA, DmaHarness, Job
from peach2.sim.pcie import ThroughputMeter
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()

_MRD = (TlpType.MEM_READ, TlpType.MEM_READ_64)
_MWR = (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
_CPLD = (TlpType.CPL_DATA,)
PAPER_BOUND = 4.0 * 256 / (256 + 16 + 2 + 4 + 1 + 1)     # 002 section 4.1: 3.66 GB/s
def _wire_after(records, skip=0, writes=False):
    """Wire bytes of the metered TLPs ``(t0, t1, payload, wire)`` after the first ``skip``
    payload bytes (the descriptor block fetched first), or from the first write on, and the
    time (ns) the first of them took the wire (None if none)."""
    total, seen, on, since = 0, 0, False, None
    for t0, _, payload, wire in sorted(records):
        on = on or (payload > 0 if writes else seen >= skip)
        seen += payload
        if on:
            total += wire
            since = t0 * 1e9 if since is None else since
    return total, since


def _descriptors_after(records, is_desc, skip):
    """Of N's received completions ``records`` (``is_desc``: each is of a descriptor read), the
    wire bytes of descriptor completions after the first ``skip`` payload bytes (the first
    block), and the ns from the end of that block to the start of the first data completion
    (the receive side idle meanwhile, in the ``start`` point: what later blocks could fill; None
    without either)."""
    total, seen, block_end, first_data = 0, 0, None, None
    for (t0, t1, payload, wire), desc in zip(records, is_desc):   # in arrival order
        if seen >= skip and desc:
            total += wire
        if desc and seen < skip <= seen + payload:
            block_end = t1 * 1e9
        if not desc and first_data is None:
            first_data = t0 * 1e9
        seen += payload
    window = None if block_end is None or first_data is None else first_data - block_end
    return total, window


class DllpLog:
    """The data link layer's own packets (ACKs, flow-control updates) one ``SimPort`` sends
    while :attr:`on`: ``records``, ``(ns they took the wire, wire bytes)``.  They share the
    wire with the TLPs, so the bound counts them (docs/dma.md, "What the links allow")."""

    def __init__(self, port):
        self.on, self.records = False, []
        inner = port.handle_tx

        async def handle_tx(pkt):
            if self.on and isinstance(pkt, Dllp):
                self.records.append((get_sim_time("ns"), pkt.get_wire_size()))
            await inner(pkt)
        port.handle_tx = handle_tx  # instance attribute, as ThroughputMeter's

    def start(self):
        self.on, self.records = True, []

    def between(self, since, until):
        """Wire bytes of the DLLPs sent from ``since`` (ns) until ``until`` (none when
        ``since`` is None)."""
        return 0 if since is None else sum(w for t, w in self.records if since <= t <= until)


class Measure:
    """Run one job on node 0 and time it, metering chip 0's port the data leaves on, and for
    the lower bound (docs/dma.md, "What the links allow") every TLP on chip 0's N in both
    directions: the read requests sent, the completions received."""

    def __init__(self, harness):
        self.harness = harness
        chip = harness.cluster.chips[0]
        self.reads = []
        self.desc_tag = {}       # tag: its read is of node 0's descriptor area
        self.rx_desc = []        # per completion metered on N's receive side: of a descriptor
        lo = harness.desc[0]

        def n_tx(tlp):
            if tlp.fmt_type in _MRD:
                self.reads.append(4 * tlp.length)
                self.desc_tag[tlp.tag] = lo <= tlp.address < lo + DESC_AREA
            return tlp.fmt_type in _MWR + _MRD

        def n_rx(tlp):
            if tlp.fmt_type not in _CPLD:
                return False
            self.rx_desc.append(self.desc_tag.get(tlp.tag, False))
            return True
        self.meters = {
            "N": ThroughputMeter.tx_of(chip.models["n"], enabled=False, select=n_tx,
                                       keep_records=True),
            "E": ThroughputMeter.tx_of(chip.models["e"], enabled=False, keep_records=True,
                                       select=lambda t: t.fmt_type in _MWR)}
        self.rx = ThroughputMeter.rx_of(chip.models["n"], enabled=False, keep_records=True,
                                        select=n_rx)
        self.dllps = {"rx": DllpLog(chip.models["n"].upstream_port.other),
                      **{p: DllpLog(m.port) for p, m in self.meters.items()}}

    async def __call__(self, job, port):
        harness = self.harness
        harness.plan(job)
        dst_node = harness.where(job.transfers[0].dst)[0]
        arrivals = harness.cluster.arrivals[dst_node]
        seen = len(arrivals)
        meter = self.meters[port]
        self.reads.clear()
        self.rx_desc.clear()
        for m in {meter, self.meters["N"], self.rx}:
            m.start()
        for log in self.dllps.values():
            log.start()
        drv = harness.drivers[0]
        if job.reg:
            n = await drv.dma_reg_set(job.channel, job.transfers)
            t0 = get_sim_time("ns")
            await drv.dma_reg_start(job.channel, n)
        else:
            if job.images is not None:      # a chain placed by its own addresses (scattered)
                for address, raw in job.images:
                    await drv.memory.write(address, raw)
                await drv.dma_set_head(job.channel, job.head)
            else:
                await drv.dma_desc_set(job.chain)
            t0 = get_sim_time("ns")
            await drv.dma_start(job.channel, adj=job.announced())
        job.status = await drv.dma_wait(job.channel,
                                        pause=lambda: ClockCycles(harness.dut.clk, 250))
        await harness.cluster.quiet(20)
        for m in {meter, self.meters["N"], self.rx}:
            m.stop()
        for log in self.dllps.values():
            log.on = False
        window = harness.window[dst_node][0]
        lo = min(harness.where(t.dst)[1] for t in job.transfers) + window
        hi = max(harness.where(t.dst_span()[1] - 1)[1] for t in job.transfers) + window + 1
        landed = [(t, tlp) for t, tlp in arrivals[seen:] if lo <= tlp.address < hi]
        nbytes = sum(t.bytes for t in job.transfers)
        assert sum(4 * tlp.length for _, tlp in landed) >= nbytes
        t1 = max(t for t, _ in landed)
        harness.apply(job.outcome.writes)
        rep = meter.report()
        skip = 0 if job.reg or not self.reads else self.reads[0]
        rx_wire, rx_since = _wire_after(self.rx.records, skip)
        rx_desc, window = _descriptors_after(self.rx.records, self.rx_desc, skip)
        tx_wire, tx_since = _wire_after(meter.records, writes=True)
        return {"bytes": nbytes, "ns": t1 - t0, "gbps": nbytes / (t1 - t0),
                "port": port, "port_bound_gbps": rep.bound_gbps, "port_gbps": rep.gbps,
                "tlps": rep.tlps,
                "rx_wire_after": rx_wire, "tx_wire_after": tx_wire,
                "rx_desc_after": rx_desc, "rx_window_ns": window,
                "rx_dllp_after": self.dllps["rx"].between(rx_since, t1),
                "tx_dllp_after": self.dllps[port].between(tx_since, t1),
                "desc_done": job.status["desc_done"]}


def _chain_job(harness, src, dst, point, channel=0):
    """The job of a ``chain128``/``scattered``/``chain4k`` point: ``count`` transfers of
    ``size`` bytes; a scattered chain's descriptors sit ``SCATTER_STRIDE`` bytes apart."""
    size, n = point["size"], point["count"]
    node = 1 if point.get("where") == "neighbour" else 0
    job = Job(0, channel, [memcpy(src + i * size, dst(node, 0x1000 + i * size), size)
                           for i in range(n)])
    if point["figure"] == "scattered":
        base = harness.desc[0] + (DESC_AREA // 4) * channel
        if n * SCATTER_STRIDE > DESC_AREA // 4:
            raise ValueError(f"{n} scattered descriptors do not fit channel {channel}'s "
                             f"{DESC_AREA // 4} bytes of descriptor area")
        chain = Chain(channel, base)
        for t in job.transfers:
            chain.add(t)
        chain.place([base + SCATTER_STRIDE * i for i in range(n)])
        job.images, job.head = chain.image(), chain.head
    return job


async def measure_point(harness, measure, point):
    """Measure one point of :func:`peach2.sim.bench.dma_plan.plan`; return its result keys
    (those of ``point`` after ``figure``, then ``burst`` for halo, then :class:`Measure`'s)."""
    src = harness.src[0][0]

    def dst(node, off=0x1000):
        return harness.tca(node, off)
    fig = point["figure"]
    keys = {k: v for k, v in point.items() if k != "figure"}
    if fig in ("chain128", "scattered", "start"):
        # Figures 4 and 7: chained transfers of each size, local and to the neighbour.
        port = "E" if point["where"] == "neighbour" else "N"
        return {**keys, **await measure(_chain_job(harness, src, dst, point), port)}
    if fig == "single":
        # Figure 5: one transfer, with a descriptor or in register mode (local).
        job = Job(0, 1, [memcpy(src, dst(0), point["size"])], reg=point["mode"] == "register")
        return {**keys, **await measure(job, "N")}
    if fig == "chain4k":
        # Figure 6: 4 KiB transfers, chain length 1..128 (local).
        return {**keys, **await measure(_chain_job(harness, src, dst, point, channel=2), "N")}
    # Halo planes of N^3 arrays to the neighbour: one block-stride descriptor against one
    # contiguous descriptor of the same bytes.
    t = halo_transfer(point["n"], point["plane"], src, dst(1, 0), point["n"] - 2, 0)
    tr = t if point["shape"] == "block-stride" else contiguous(t)
    return {**keys, "burst": t.length, **await measure(Job(0, 3, [tr]), "E")}


@cocotb.test()
async def figures(dut):
    """Figures 4-7 of 002 section 4.1, scattered chains and block-stride vs contiguous halo
    planes: the points of ``PARAMS["points"]`` in order, else of
    :func:`peach2.sim.bench.dma_plan.plan` (``quick``, ``chain``, ``max_total`` and the subset
    ``figures``, ``sizes``, ``chains``, ``halo_n``)."""
    cpu0, wall0 = time.process_time(), time.time()
    harness = DmaHarness(dut, 2, host_size=1 << 22, src_size=1 << 22)
    await harness.start(pauses=False)
    latency = PARAMS.get("read_latency_ns", 500)
    for node in range(2):
        harness.host(node).configure_reads(latency_ns=latency)
    points = PARAMS.get("points") or plan(
        PARAMS.get("quick", False), PARAMS.get("chain"), PARAMS.get("max_total"),
        PARAMS.get("figures"), PARAMS.get("sizes"), PARAMS.get("chains"), PARAMS.get("halo_n"))
    measure = Measure(harness)
    progress = PARAMS.get("progress_file")
    out, costs = [], []

    def report(event, **kw):        # one JSON line per event, read by tb/bench/benchmarks.py
        if progress:
            with open(progress, "a") as f:
                f.write(json.dumps({"event": event, **kw}) + "\n")
    cpu, wall = time.process_time(), time.time()
    costs.append({"what": "setup", "cpu_s": round(cpu - cpu0, 2), "wall_s": round(wall - wall0, 2)})
    report("setup", **costs[-1])
    for k, point in enumerate(points):
        t0 = get_sim_time("ns")
        r = {"figure": point["figure"], "read_latency_ns": latency,
             **await measure_point(harness, measure, point)}
        out.append(r)
        dut._log.info("%s: %s", r["figure"], {k: v for k, v in r.items() if k != "figure"})
        now_cpu, now_wall = time.process_time(), time.time()
        costs.append({"what": label(point), "cpu_s": round(now_cpu - cpu, 2),
                      "wall_s": round(now_wall - wall, 2),
                      "sim_us": round((get_sim_time("ns") - t0) / 1000, 1)})
        report("point", k=k, gbps=r["gbps"], **costs[-1])
        cpu, wall = now_cpu, now_wall

    harness.check_memory()
    harness.check_hosts()
    result_file = PARAMS.get("result_file")
    if result_file:
        with open(result_file, "w") as f:
            json.dump({"points": out, "paper_bound_gbps": PAPER_BOUND,
                       "read_latency_ns": latency, "costs": costs}, f, indent=1)
