"""The DMA harness: chips with a host each, DMA jobs, a memory shadow from the reference model.

::

    Host 0 (RC: src, descriptors, window memory) --Gen2 x8-- N  chip 0  E ==cable== W  chip 1  N
          reads from chip 0's DMA answered here          DMA: reads out N, writes routed   |
                                                                              Host 1 --+

:class:`DmaHarness` builds a :class:`~peach2.sim.harness.cluster.Cluster` of one chip, or two cabled c0.E -
c1.W (:class:`peach2.sim.hdl.chips_top.Chips`), and gives every node, besides its host window memory
(the DMA destination, filled with noise), a source buffer (noise) and a descriptor area in its
host's memory.  :meth:`DmaHarness.run_jobs` starts DMA jobs (chains or register mode) on any
channels of any nodes at once and waits for them; :meth:`DmaHarness.check_memory` compares every
byte of every window with the shadow the reference model (:mod:`peach2.sim.reference.dma`) keeps, so
bytes outside the destinations are checked to be untouched.  Completion writes are checked to land
after their descriptor's data (a watcher on every host's memory writes), MSIs are caught on the N
hard IP's ``app_msi_*`` pins.
"""

import random
from dataclasses import dataclass

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.tlp import TlpType

from peach2.csr.regmap import DEFAULT_DMA_BUFFER, DEFAULT_DMA_TAGS, REGMAP, DmaError
from peach2.routes import Topology, default_address_map
from peach2.sim.driver import Chain, DmaFault, memcpy
from peach2.sim.harness import Cluster
from peach2.sim.reference import dma as dma_model
from peach2.sim.run import run_inputs

__all__ = ["CLOCK_NS", "DESC_AREA", "MsiCatcher", "Arena", "Job", "DmaHarness", "src_arena", "ctrl_offset"]

CLOCK_NS = 4
DESC_AREA = 1 << 16          # per node: 16 KiB of descriptors per channel


class MsiCatcher:
    """Acknowledge MSI requests on a chip's ``n_app_msi_*`` pins and record the vectors."""

    def __init__(self, dut, prefix):
        self.clk = dut.clk
        self.req = getattr(dut, f"{prefix}n_app_msi_req")
        self.num = getattr(dut, f"{prefix}n_app_msi_num")
        self.ack = getattr(dut, f"{prefix}n_app_msi_ack")
        self.vectors = []
        cocotb.start_soon(self._run())

    async def _run(self):
        self.ack.value = 0
        while True:
            if not int(self.req.value):
                await RisingEdge(self.req)
            await RisingEdge(self.clk)
            self.vectors.append((get_sim_time("ns"), int(self.num.value)))
            self.ack.value = 1
            await RisingEdge(self.clk)
            self.ack.value = 0
            await RisingEdge(self.clk)      # req falls here unless another MSI is pending


class Arena:
    """Bump allocator with random slack and alignment (so addresses are not all aligned)."""

    def __init__(self, base, size, rng):
        self.base, self.size, self.rng, self.at = base, size, rng, 0

    def alloc(self, n, align=None):
        align = align or self.rng.choice((1, 1, 1, 4, 8, 64, 4096))
        a = -(-(self.base + self.at + self.rng.randrange(64)) // align) * align
        if a + n > self.base + self.size:
            raise MemoryError(f"arena at {self.base:#x} is full ({n} bytes asked)")
        self.at = a + n - self.base
        return a


@dataclass
class Job:
    """One channel start: a chain, register-mode slots (``reg``), or a register-mode queue
    (``queue``: ``transfers`` as started and appended, in order; the test appends them)."""
    node: int
    channel: int
    transfers: list
    reg: bool = False
    queue: bool = False
    chain: Chain = None
    outcome: dma_model.Outcome = None
    status: dict = None
    fault: DmaFault = None
    t_kick: float = None
    images: list = None      # [(address, bytes)] written instead of the chain's own image
    head: int = None         # CH_HEAD with ``images``
    adj: int = None          # CH_CTRL.adj of the start (default: the chain's announced run,
                             # 0 with ``images``)

    def announced(self):
        """``CH_CTRL.adj`` of this job's start."""
        if self.adj is not None:
            return self.adj
        return 0 if self.images is not None else self.chain.announced


class DmaHarness:
    """Clock, reset, ``n_nodes`` chips with hosts, memories, MSI catchers (see module doc)."""

    def __init__(self, dut, n_nodes=2, *, seed=None, host_size=None, src_size=None,
                 mps=256, above_4g=True):
        params, run_seed = run_inputs()     # PEACH2_PARAMS, PEACH2_SEED of this cocotb run
        seed = run_seed if seed is None else seed
        host_size = host_size or params.get("host_size", 1 << 21)
        src_size = src_size or params.get("src_size", 1 << 20)
        self.dut = dut
        self.seed = seed
        self.rng = random.Random(seed)
        dut._log.info("seed %d, %d node(s)", seed, n_nodes)
        Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi").start()
        topo = Topology(2, {(0, "E"): 1, (1, "W"): 0}) if n_nodes == 2 else Topology(1, {})
        self.amap = default_address_map(n_nodes, host_size=host_size)
        # Shortest routes and an ideal hard IP: the DMA figures and evidence were measured so.
        self.cluster = Cluster(dut, topo, self.amap, seed=seed, mps=mps, above_4g=above_4g,
                               routes="shortest", hardip_pipeline_ns=0.0)
        self.n_nodes, self.mps, self.src_size = n_nodes, mps, src_size
        self.msi = [MsiCatcher(dut, chip.prefix) for chip in self.cluster.chips]
        self.shadow = []
        self.seq_waits = [dict() for _ in range(n_nodes)]
        self.seq_errors = []

    @property
    def drivers(self):
        return self.cluster.drivers

    def host(self, node):
        return self.cluster.chips[node].host

    async def start(self, *, pauses=True, idle=0.2, backpressure=0.2, timeout=None,
                    mrrs=512):
        dut = self.dut
        await self.cluster.reset_and_start()
        dut._log.info("hosts enumerated, chips programmed")
        self.src, self.desc, self.window = [], [], []
        for node in range(self.n_nodes):
            host = self.host(node)
            drv = self.drivers[node]
            drv.memory = host.rc.mem_address_space
            src, src_region = host.alloc(self.src_size)
            desc, desc_region = host.alloc(DESC_AREA)
            src_region[0:self.src_size] = self.rng.randbytes(self.src_size)
            self.src.append((src, src_region))
            self.desc.append(desc)
            base, region = self.cluster.memory(node)
            noise = self.rng.randbytes(self.amap.host_size)
            region[0:self.amap.host_size] = noise
            self.shadow.append(bytearray(noise))
            self.window.append((base, region))
            await drv.dma_config(mps=self.mps, mrrs=mrrs, ext_tags=True, timeout=timeout)
            for c in range(4):
                await drv.dma_set_vector(c, 2 * c + 1 + node)
            self._watch(node)
        if pauses:
            self.cluster.set_pauses(random.Random(self.seed + 1), idle=idle,
                                    backpressure=backpressure)

    # -- memories ----------------------------------------------------------------------------

    def read_src(self, node):
        """Return ``read(address, n)`` of node's source buffer (sync, no simulation time)."""
        base, region = self.src[node]

        def read(address, n):
            if not (base <= address and address + n <= base + self.src_size):
                raise ValueError(f"read of {n} bytes at {address:#x} outside node {node}'s "
                                 f"source buffer")
            return bytes(region[address - base:address - base + n])
        return read

    def tca(self, node, offset):
        """TCA address of byte ``offset`` of ``node``'s host window."""
        return self.amap.window(node, "host")[0] + offset

    def where(self, tca):
        """Return ``(node, offset)`` of a TCA address in a host window."""
        node = self.amap.node_of(tca)
        if node is None or node >= self.n_nodes:
            raise ValueError(f"{tca:#x} is in no node's region")
        base, size = self.amap.window(node, "host")
        if not 0 <= tca - base < size:
            raise ValueError(f"{tca:#x} is outside node {node}'s host window")
        return node, tca - base

    def in_window(self, tca, n=1):
        """Whether bytes ``[tca, tca + n)`` lie in one host window."""
        try:
            return self.where(tca)[0] == self.where(tca + n - 1)[0]
        except ValueError:
            return False

    def snapshot(self):
        """Remember the shadows (the message of a later :meth:`check_memory` says whether bad
        bytes were never written or written wrong)."""
        self._before = [bytes(s) for s in self.shadow]

    def apply(self, writes, shadow=None):
        """Apply model writes ``[(tca, bytes)]`` to the shadows."""
        shadow = shadow or self.shadow
        for tca, data in writes:
            node, off = self.where(tca)
            shadow[node][off:off + len(data)] = data

    def check_memory(self, dont_care=(), jobs=()):
        """Compare every window with its shadow; ``dont_care`` is ``[(tca, n, new)]`` spans
        whose bytes may hold either the shadow's value or the one in ``new`` (the writes of a
        failed descriptor), or, with ``new`` a list of byte strings, any of those (bytes that
        concurrent channels write with different data).  ``jobs`` only help the message name
        the write that went wrong."""
        for tca, n, new in dont_care:
            node, off = self.where(tca)
            got = bytes(self.window[node][1][off:off + n])
            old = self.shadow[node][off:off + n]
            news = new if isinstance(new, list) else [new]
            for i in range(n):
                assert got[i] == old[i] or any(got[i] == x[i] for x in news), \
                    f"byte {tca + i:#x} holds {got[i]:#04x}, none of the values it may hold"
            self.shadow[node][off:off + n] = got
        problems = []
        for node in range(self.n_nodes):
            got = bytes(self.window[node][1][0:self.amap.host_size])
            want = bytes(self.shadow[node])
            if got != want:
                bad = [i for i in range(len(got)) if got[i] != want[i]]
                msg = (f"node {node} window differs at {len(bad)} bytes, offsets {bad[0]:#x} .. "
                       f"{bad[-1]:#x}")
                msg += self._blame(node, bad, got, jobs)
                self.shadow[node][:] = got      # report once, go on from what is there
                problems.append(msg)
        if self.seq_errors:
            problems += self.seq_errors[:5]
            self.seq_errors.clear()
        if problems:
            raise AssertionError("\n".join(problems))

    def _blame(self, node, bad, got, jobs):
        """Name the jobs' descriptors whose writes cover the first differing bytes."""
        out = []
        first = bad[0]
        for job in jobs:
            for k, (_, d) in enumerate(job.outcome.descriptors):
                for b, (s, t, n) in enumerate(dma_model.bursts(d)):
                    try:
                        tn, off = self.where(t)
                    except ValueError:
                        continue
                    if tn == node and off <= first < off + n:
                        cnt = sum(1 for i in bad if off <= i < off + n)
                        before = getattr(self, "_before", None)
                        old = before is not None and all(
                            got[i] == before[node][i] for i in bad if off <= i < off + n)
                        out.append(f"\n  node {job.node} ch {job.channel} "
                                   f"{'reg slot' if job.reg else 'desc'} {k} burst {b}: src "
                                   f"{s:#x} dst {t:#x} length {n} count "
                                   f"{d['count'] if d['ext'] else 1} gaps {d['src_gap']}/"
                                   f"{d['dst_gap']}; {cnt} bad bytes in this burst, from "
                                   f"offset {first - off}; got {got[first:first + 8].hex()} "
                                   f"want {bytes(self.shadow[node][first:first + 8]).hex()}"
                                   f"{' (never written: old bytes)' if old else ''}")
        return "".join(out[:4]) or "\n  (no job wrote there)"

    def _watch(self, node):
        """Check each completion write lands after its descriptor's data (002: seq polling)."""
        rc = self.host(node).rc
        base, region = self.window[node]
        for ft in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            handler = rc.rx_tlp_handler[ft]

            async def watched(tlp, handler=handler):
                await handler(tlp)
                lo, hi = tlp.address, tlp.address + 4 * tlp.length
                for phys, (checks, what) in list(self.seq_waits[node].items()):
                    if lo <= phys < hi:
                        for off, data in checks:
                            if bytes(region[off:off + len(data)]) != data:
                                self.seq_errors.append(f"completion write {what} at {phys:#x} "
                                                       f"landed before the data at offset "
                                                       f"{off:#x}")
                        del self.seq_waits[node][phys]
            rc.register_rx_tlp_handler(ft, watched)

    # -- jobs --------------------------------------------------------------------------------

    def plan(self, job, routable=None, readable=None):
        """Compute the job's expected outcome; arm the completion-write order checks."""
        read = self.read_src(job.node)
        if job.queue:
            job.outcome = dma_model.run_queue(job.transfers, read, routable=routable,
                                              readable=readable)
        elif job.reg:
            job.outcome = dma_model.run_slots(job.transfers, read, routable=routable,
                                              readable=readable)
        else:
            base = self.desc[job.node] + (DESC_AREA // 4) * job.channel
            job.chain = Chain(job.channel, base)
            for t in job.transfers:
                job.chain.add(t)
            images = dict(job.images or job.chain.image())
            head = job.chain.head if job.head is None else job.head
            job.outcome = dma_model.run_chain(
                head, lambda a, n: images[a][:n] + bytes(max(0, n - len(images[a]))),
                announced=job.announced(), read_src=read, routable=routable,
                readable=readable)
        for k, (_, tca, _) in enumerate(job.outcome.seq_writes):
            d = job.outcome.descriptors[k][1]
            node, off = self.where(tca)
            data = []
            for s, t, n in dma_model.bursts(d):
                tnode, toff = self.where(t)
                if tnode == node:
                    data.append((toff, read(s, n)))
            phys = self.window[node][0] + off
            self.seq_waits[node][phys] = (data, f"node {job.node} ch {job.channel} desc {k}")
        return job.outcome

    async def kick(self, job):
        drv = self.drivers[job.node]
        if job.reg:
            n = await drv.dma_reg_set(job.channel, job.transfers)
            job.t_kick = get_sim_time("ns")
            await drv.dma_reg_start(job.channel, n)
        elif job.images is not None:
            for address, raw in job.images:
                await drv.memory.write(address, raw)
            await drv.dma_set_head(job.channel, job.head)
            job.t_kick = get_sim_time("ns")
            await drv.dma_start(job.channel, adj=job.announced())
        else:
            await drv.dma_desc_set(job.chain)
            job.t_kick = get_sim_time("ns")
            await drv.dma_start(job.channel, adj=job.announced())

    async def wait(self, job):
        try:
            job.status = await self.drivers[job.node].dma_wait(
                job.channel, pause=lambda: ClockCycles(self.dut.clk, 20), max_polls=20000)
        except DmaFault as exc:
            job.fault = exc

    async def run_jobs(self, jobs):
        """Plan, start and wait for ``jobs`` together; return them (statuses filled in)."""
        for job in jobs:
            if job.outcome is None:
                self.plan(job)
        await _all(self.kick(j) for j in jobs)
        await _all(self.wait(j) for j in jobs)
        return jobs

    def check_job(self, job):
        """Assert the channel's final registers agree with the model's outcome."""
        o = job.outcome
        kind = "queue" if job.queue else "reg" if job.reg else "chain"
        what = f"node {job.node} channel {job.channel} ({kind})"
        if o.error == DmaError.NONE:
            assert job.fault is None, f"{what}: {job.fault}"
            assert (job.status["desc_done"], job.status["bytes"]) == (o.desc_done, o.bytes), \
                f"{what}: DESC_DONE/BYTES {job.status['desc_done']}/{job.status['bytes']}, " \
                f"expected {o.desc_done}/{o.bytes}"
        else:
            assert job.fault is not None, f"{what}: expected {o.error.name}, finished cleanly"
            f = job.fault
            # Faults are reported in order (docs/dma.md): every descriptor before the failing
            # one is done and counted; CH_BYTES may include part of the failing descriptor.
            # CH_DESC_ADDR must name the failing descriptor.
            failing = o.descriptors[o.desc_done][1] if len(o.descriptors) > o.desc_done \
                else None
            extra = 0 if failing is None else sum(n for _, _, n in dma_model.bursts(failing))
            assert (f.error, f.desc_addr) == (o.error, o.desc_addr) \
                and f.desc_done == o.desc_done and o.bytes <= f.bytes <= o.bytes + extra, \
                f"{what}: {f}; expected {o.error.name} at {o.desc_addr:#x} after " \
                f"{o.desc_done} descriptor(s), {o.bytes} bytes (+ part of the failing one)"

    async def settle(self, idle_cycles=500, limit_cycles=200_000):
        """Wait until no host has received a memory write for ``idle_cycles`` cycles.

        A channel is idle once its last write has *entered* the output port; writes to another
        node may still be on their way (docs/registers.md: poll the completion write).
        """
        waited = 0
        while True:
            await self.cluster.quiet(20)
            n = sum(len(a) for a in self.cluster.arrivals)
            await ClockCycles(self.dut.clk, idle_cycles)
            waited += idle_cycles
            if n == sum(len(a) for a in self.cluster.arrivals):
                return
            assert waited < limit_cycles, "host memory writes never stop arriving"

    def msi_counts(self, node):
        """Return ``{vector: count}`` of the MSIs node's chip raised."""
        out = {}
        for _, v in self.msi[node].vectors:
            out[v] = out.get(v, 0) + 1
        return out

    def check_hosts(self):
        """Hosts and models saw no protocol violation; DMA reads stayed within the default
        build's tags and completion buffer (the chips here are default builds)."""
        self.cluster.check()
        for node in range(self.n_nodes):
            rc = self.host(node).rc
            reads, nbytes = rc.max_outstanding
            assert reads <= DEFAULT_DMA_TAGS and nbytes <= DEFAULT_DMA_BUFFER, \
                f"node {node}: {reads} reads / {nbytes} bytes outstanding at once"

    # -- random transfers ------------------------------------------------------------------

    def random_transfer(self, rng, node, src_arena, dst_arenas, max_len, *, seq_arena=None):
        """A random descriptor: plain, block-stride or halo-like; any alignment, any node."""
        dnode = rng.randrange(self.n_nodes)
        shape = rng.choice(("plain", "plain", "plain", "stride", "small"))
        gaps = (0, 0)
        count = None
        if shape == "plain":
            length = int(2 ** rng.uniform(0, max_len.bit_length() - 1))
        elif shape == "small":
            length = rng.randrange(1, 80)
        else:
            length = rng.choice((1, 3, 8, 8, 64, 200, 256, 1000, 2048))
            count = rng.randrange(1, max(2, min(64, max_len // length)))
            gaps = (rng.choice((0, 4, 8, 100, 1024)), rng.choice((0, 3, 8, 100, 1024)))
        span_s = (count or 1) * (length + gaps[0])
        span_d = (count or 1) * (length + gaps[1])
        src = src_arena.alloc(span_s)
        dst = self.tca(dnode, dst_arenas[dnode].alloc(span_d))
        seq = None
        if seq_arena is not None and rng.random() < 0.3:
            seq = (self.tca(dnode, seq_arena[dnode].alloc(4, align=4)), rng.getrandbits(32))
        return memcpy(src, dst, length, count=count, src_gap=gaps[0] if count else 0,
                      dst_gap=gaps[1] if count else 0, seq=seq, irq=rng.random() < 0.2)

    def arenas(self, rng, node_share=1, part=0):
        """Fresh source, destination and completion-write arenas (``part`` of ``node_share``
        slices of every memory, so concurrent users get disjoint bytes)."""
        sz = self.amap.host_size - 8192
        seq_sz = 8192 // node_share
        dst = [Arena(part * (sz // node_share), sz // node_share, rng)
               for _ in range(self.n_nodes)]
        seq = [Arena(sz + part * seq_sz, seq_sz, rng) for _ in range(self.n_nodes)]
        return dst, seq


async def _all(coros):
    tasks = [cocotb.start_soon(c) for c in coros]
    return [await t for t in tasks]


def src_arena(harness, node, rng, share=1, part=0):
    """A source arena on ``part`` of ``share`` slices of node's source buffer."""
    base, _ = harness.src[node]
    size = harness.src_size // share
    return Arena(base + part * size, size, rng)


def ctrl_offset(channel):
    """Byte offset of CH_CTRL of ``channel`` (for raw writes the driver refuses)."""
    return REGMAP["CH_CTRL"].offset_of(channel)
