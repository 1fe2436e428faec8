"""Random traffic on every host and every DMA channel of a sub-cluster, checked by a scoreboard.

The scoreboard soak (``docs/errors.md``, "Scoreboard soak").  :class:`Soak` drives a started
:class:`~peach2.sim.harness.cluster.Cluster` through its drivers (no second driver):

- **PIO**: for every (source host, destination node), its own task stores random data, 1 B to
  ``max_pio`` bytes (mostly small), at random offsets (any alignment) into the destination's
  host window, with random idle cycles between stores, never more than ``pio_window`` bytes
  stored and not yet arrived (a CPU's stores stall on the link's credits);
- **DMA**: every channel of every chip runs one job after another, each a chain of 1-6
  descriptors or 1-4 register-mode slots (``reg_share`` of the jobs), every descriptor to a
  random destination node, with a random size and alignment, a random block-stride shape in
  ``stride_share`` of them (2-16 bursts, random gaps on both sides), a completion write in some;
  the expected writes come from the reference model (:func:`peach2.sim.reference.dma.
  transfer_writes` on the source bytes); each job's ``CH_BYTES`` and error code are checked;
- **pauses** (set by the caller): seeded random RX idle and TX backpressure on every host's
  hard-IP model (:meth:`~peach2.sim.harness.cluster.Cluster.set_pauses`).

Every ordering domain (a host's stores, or one DMA channel, into one destination node) owns a
slot of the destination's host window (20 slots per window on a ring of 4), so the scoreboard
(:class:`~peach2.sim.reference.scoreboard.Scoreboard`) knows every byte's final value; every memory write a
host receives is checked against it as it arrives (:meth:`~peach2.sim.harness.cluster.Cluster.on_write`),
and every window byte once the traffic has drained.  :meth:`Soak.run` ends after ``tlps``
checked writes, then waits for the rest, compares memories and returns the figures.
"""

import time

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.tlp import TlpType

from peach2.params import N_DMA_CHANNELS, REASON_TABLE, DmaError
from peach2.sim.driver import Chain, DmaFault, memcpy
from peach2.sim.hardip import describe
from peach2.sim.reference import Scoreboard
from peach2.sim.reference import dma as dma_model

__all__ = ["Soak", "SoakStalled", "DROP_REASONS"]


class SoakStalled(AssertionError):
    """No write arrived for the soak's ``fail_ns`` of simulated time (the message holds the
    hosts' and cables' state)."""


#: Counter reasons that must stay 0 on every port in a clean run: every reason of
#: ``peach2.params.REASON_TABLE`` but the two traffic counts, so a reason added there is
#: checked here without another list to update.
DROP_REASONS = tuple(name for name, _, _ in REASON_TABLE if name not in ("RX_TLPS", "TX_TLPS"))

_SRC_ARENA = 1 << 16        # source bytes per DMA channel in its host's memory
_DESC_AREA = 1 << 12        # descriptors per DMA channel


class Soak:
    """Random PIO and DMA traffic on ``cluster`` checked by a scoreboard (see module doc).

    Parameters
    ----------
    cluster : Cluster
        Started (hosts enumerated, chips programmed), without the protection windows on.
    rng : random.Random
        Draws everything (sizes, offsets, data, destinations, shapes, idle times).
    max_pio : int
        Largest store, bytes.
    max_dma : int
        Largest descriptor, bytes (block-stride: bursts times length).
    reg_share, stride_share, seq_share : float
        Share of DMA jobs in register mode, of descriptors with a block-stride shape, of
        descriptors with a completion write.
    pio_idle : int
        Largest idle time between two stores of one PIO task, cycles.
    pio_window : int
        Bytes a PIO task may have stored and not yet seen arrive before its next store waits
        (a CPU's stores stall when the link has no credits; the root complex model queues
        without bound, and completions for DMA reads may not pass the stores queued before
        them, so an unbounded backlog would delay them past the DMA's completion timeout).
    dma_timeout : int or None
        ``DMA_TIMEOUT`` of every chip, cycles (None: the chip's default, 1 ms).
    log : callable
        ``log(text)`` for progress lines.
    """

    def __init__(self, cluster, rng, *, max_pio=512, max_dma=8192, reg_share=0.3,
                 stride_share=0.4, seq_share=0.2, pio_idle=32, pio_window=2048,
                 dma_timeout=None, log=print):
        self.cluster, self.rng, self.log = cluster, rng, log
        self.max_pio, self.max_dma = max_pio, max_dma
        self.reg_share, self.stride_share, self.seq_share = reg_share, stride_share, seq_share
        self.pio_idle, self.pio_window, self.dma_timeout = pio_idle, pio_window, dma_timeout
        self.amap = cluster.address_map
        n = cluster.n_nodes
        self.sources = [("pio",)] + [("dma", c) for c in range(N_DMA_CHANNELS)]
        self.slot = (self.amap.host_size // (n * len(self.sources))) & ~63
        initial = []
        for node in range(n):
            noise = rng.randbytes(self.amap.host_size)
            cluster.memory(node)[1][0:self.amap.host_size] = noise
            initial.append(noise)
        self.scoreboard = Scoreboard(initial)
        for dst in range(n):
            for src in range(n):
                for k, source in enumerate(self.sources):
                    lo = (src * len(self.sources) + k) * self.slot
                    self.scoreboard.add_domain(self._domain(src, source, dst), dst, lo,
                                               lo + self.slot)
        self.stopping = False
        self.jobs = self.descriptors = self.stores = 0
        self.dma_bytes = self.pio_bytes = 0
        bases = [cluster.memory(i)[0] for i in range(n)]
        cluster.on_write(lambda node, tlp: self.scoreboard.arrive_tlp(node, bases[node], tlp))

    @staticmethod
    def _domain(src, source, dst):
        return (src,) + source + (dst,)

    # -- PIO -------------------------------------------------------------------------------------

    def _size(self, largest):
        """Mostly small: 1-8 bytes a third of the time, up to 256 half, up to ``largest``."""
        r = self.rng.random()
        top = 8 if r < 0.3 else 256 if r < 0.8 else largest
        return self.rng.randint(1, min(top, largest))

    async def pio_flow(self, src, dst):
        """Host ``src`` stores into node ``dst`` until :attr:`stopping`."""
        rng, sb = self.rng, self.scoreboard
        domain = self._domain(src, ("pio",), dst)
        dom = self.scoreboard.domains[domain]
        lo = dom.lo
        while not self.stopping:
            while dom.issued - dom.arrived > self.pio_window:     # a CPU's store stalls
                await Timer(256, "ns")
            size = self._size(self.max_pio)
            off = lo + rng.randrange(self.slot - size + 1)
            data = rng.randbytes(size)
            sb.issue(domain, off, data)         # before the store: arrivals may come at once
            await self.cluster.pio_write(src, dst, off, data)
            self.stores += 1
            self.pio_bytes += size
            idle = rng.randrange(self.pio_idle + 1) if rng.random() < 0.5 else 0
            if idle:
                await Timer(4 * idle, "ns")

    # -- DMA -------------------------------------------------------------------------------------

    def _transfer(self, node, channel, src_base, dst):
        """One random descriptor of ``node``'s ``channel`` into its slot of node ``dst``."""
        rng, slot = self.rng, self.slot
        window, _ = self.amap.window(dst, "host")
        base = window + self.scoreboard.domains[self._domain(node, ("dma", channel), dst)].lo
        if rng.random() < self.stride_share:
            count = rng.randint(2, 16)
            length = rng.randint(1, max(1, min(512, self.max_dma // count)))
            src_gap, dst_gap = rng.choice((0, rng.randrange(512))), rng.randrange(512)
            while (count - 1) * (length + max(dst_gap, src_gap)) + length > min(slot, _SRC_ARENA):
                count -= 1
            shape = dict(count=count, src_gap=src_gap, dst_gap=dst_gap)
        else:
            length, count, shape = self._size(self.max_dma), 1, {}
            src_gap = dst_gap = 0
        src_span = (count - 1) * (length + src_gap) + length
        dst_span = (count - 1) * (length + dst_gap) + length
        src = src_base + rng.randrange(_SRC_ARENA - src_span + 1)
        dst_off = rng.randrange(slot - dst_span + 1)
        seq = None
        if rng.random() < self.seq_share:       # anywhere in the slot, after the data
            seq = (base + rng.randrange(slot // 4) * 4, rng.getrandbits(32))
        return memcpy(src, base + dst_off, length, seq=seq, **shape)

    async def dma_flow(self, node, channel):
        """DMA ``channel`` of ``node`` runs random jobs until :attr:`stopping`."""
        rng, cluster = self.rng, self.cluster
        host, drv = cluster.chips[node].host, cluster.drivers[node]
        src_base, src_region = host.alloc(_SRC_ARENA)
        desc, _ = host.alloc(_DESC_AREA)
        read_src = lambda s, n: bytes(src_region[s - src_base:s - src_base + n])  # noqa: E731
        while not self.stopping:
            src_region[0:_SRC_ARENA] = rng.randbytes(_SRC_ARENA)    # no job reads it now
            reg = rng.random() < self.reg_share
            transfers = []
            for _ in range(rng.randint(1, 4 if reg else 6)):
                dst = rng.randrange(cluster.n_nodes)
                transfers.append((dst, self._transfer(node, channel, src_base, dst)))
            for dst, t in transfers:          # expected writes, in the channel's order
                base, _ = self.amap.window(dst, "host")
                domain = self._domain(node, ("dma", channel), dst)
                for address, data in dma_model.transfer_writes(t, read_src):
                    self.scoreboard.issue(domain, address - base, data)
            want = sum(t.bytes for _, t in transfers)
            try:
                status = await self._job(drv, channel, desc, reg, [t for _, t in transfers])
            except DmaFault as fault:
                self.log(f"node {node} DMA channel {channel}: {fault}\n{self.hosts_state()}")
                raise
            assert status["error"] == DmaError.NONE and status["bytes"] == want and \
                status["desc_done"] == len(transfers), \
                f"node {node} DMA channel {channel}: {status}, expected {want} bytes in " \
                f"{len(transfers)} descriptors"
            self.jobs += 1
            self.descriptors += len(transfers)
            self.dma_bytes += want

    @staticmethod
    async def _job(drv, channel, desc, reg, transfers):
        """Run ``transfers`` on ``channel``: register mode, or a chain at ``desc``; return the
        channel's final status (polled every 128 cycles: each poll is a register read)."""
        pause = lambda: Timer(512, "ns")      # noqa: E731
        if reg:
            slots = await drv.dma_reg_set(channel, transfers)
            await drv.dma_reg_start(channel, slots)
            return await drv.dma_wait(channel, pause=pause)
        chain = Chain(channel, desc)
        for t in transfers:
            chain.add(t)
        return await drv.dma_run(chain, pause=pause)

    def hosts_state(self):
        """What every host and its N model hold: reads outstanding, TLPs queued toward the
        chip (the first few described), the HDL cables' counters (diagnosis of a stop)."""
        out = []
        for node, chip in enumerate(self.cluster.chips):
            rc, model = chip.host.rc, chip.models["n"]
            rx = model._rx
            head = ([rx.current[0]] if rx.current and rx.current[0] is not None else []) + \
                [e[1] for e in list(rx.posted)[:3]]
            out.append(f"host {node}: {len(rc.outstanding)} reads outstanding, {rc.reads} "
                       f"reads; N model: {model.rx_queue_depth} TLPs queued toward the chip "
                       f"({len(rx.nonposted)} non-posted), next {[describe(t) for t in head]}, "
                       f"{model.rx_tlps} delivered, {model.tx_tlps} taken from it")
        out.append(f"cables {self.cluster.cable_stats()}")
        return "\n".join(out)

    # -- coverage --------------------------------------------------------------------------------

    def sample_coverage(self, cov):
        """Sample into ``cov`` (:class:`~peach2.sim.harness.coverage.Coverage`) every memory
        write a chip sent its host by N into the soak's windows: arrival port at that chip from
        the write's source node (the slot its address lies in) and the route's last hop, N for
        a host's stores into its own window; a chip's DMA writes to its own host come from no
        port and are left out.  Backpressure from each N model's ready log, when the caller
        gave it with :meth:`~peach2.sim.harness.chip.ChipHarness.set_backpressure`."""
        from .coverage import classify  # not at the top: ``python -m`` runs that module
        cluster, n = self.cluster, self.cluster.n_nodes
        into = {}                           # (node, neighbour) -> node's ports cabled to it
        for a, pa, b, pb, _ in cluster.cables:
            into.setdefault((b, a), []).append(pb)
            into.setdefault((a, b), []).append(pa)
        writes = (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
        for dst, chip in enumerate(cluster.chips):
            base = cluster.memory(dst)[0]
            for tlp in chip.sent["n"]:
                off = tlp.address - base
                if tlp.fmt_type not in writes or not 0 <= off < self.amap.host_size:
                    continue
                src, k = divmod(off // self.slot, len(self.sources))
                if src >= n or (src == dst and k):
                    continue
                ports = ["N"] if src == dst else \
                    into.get((dst, cluster.route_set.path(src, dst)[-2]), [])
                if len(ports) != 1:         # two cables to that neighbour: which is unknown
                    continue
                pressure = "stalled" if chip.stalled("n", tlp) else "ready"
                cov.sample(*classify(tlp, ports[0], "N", "none", pressure))

    # -- the run ---------------------------------------------------------------------------------

    async def run(self, tlps, *, drain_ns=200_000, progress_every=None, stall_ns=50_000,
                  fail_ns=2_000_000):
        """Run every source until ``tlps`` writes have been checked, stop issuing, wait for
        every issued byte (at most ``drain_ns`` without progress), compare every window.
        When no write arrives for ``stall_ns`` while sources run, the hosts' and cables'
        state is logged (once per stall); after ``fail_ns`` without one, :class:`SoakStalled`
        is raised with that state.

        Returns a dict of figures (``tlps``, ``bytes``, ``faults``, ``sim_ns``, ``wall_s``...;
        ``received``: memory writes each host received, ``n_tx_tlps``: each chip's
        ``COUNT[N][TX_TLPS]``, both since the start).
        """
        cluster, sb, n = self.cluster, self.scoreboard, self.cluster.n_nodes
        for node in range(n):
            cluster.drivers[node].memory = cluster.chips[node].host.rc.mem_address_space
            await cluster.drivers[node].dma_config(mps=cluster.mps, mrrs=512, ext_tags=True,
                                                   timeout=self.dma_timeout)
        await cluster.clear_counters()
        received = [cluster.writes_received(i) for i in range(n)]
        t0, wall = get_sim_time("ns"), time.perf_counter()
        tasks = [cocotb.start_soon(self.pio_flow(s, d)) for s in range(n) for d in range(n)]
        tasks += [cocotb.start_soon(self.dma_flow(node, c)) for node in range(n)
                  for c in range(N_DMA_CHANNELS)]
        step = progress_every or max(1000, tlps // 20)
        mark = step
        watch = _Stall(self, stall_ns, fail_ns)
        while sb.tlps < tlps and sb.clean:
            await Timer(4000, "ns")
            for task in tasks:
                if task.done():
                    task.result()           # raises what a source raised
            watch.check()
            if sb.tlps >= mark:
                mark += step
                elapsed = time.perf_counter() - wall
                self.log(f"{sb.tlps} writes checked, {sb.bytes_checked} bytes, "
                         f"{(get_sim_time('ns') - t0) / 1000:.0f} us simulated, {elapsed:.0f} s "
                         f"wall, {sb.tlps / elapsed:.0f} writes/s")
        self.stopping = True
        self.log(f"{sb.tlps} writes checked: stopping the sources")
        tick = 0
        for task in tasks:
            while not task.done():
                await Timer(4000, "ns")
                watch.check()
                tick += 1
                if tick % 25 == 0:
                    self.log(f"stopping: {sum(not t.done() for t in tasks)} sources busy, "
                             f"{sb.outstanding} bytes outstanding, {sb.tlps} writes checked")
            task.result()
        last, since = sb.outstanding, get_sim_time("ns")
        while sb.outstanding and get_sim_time("ns") - since < drain_ns:
            await Timer(2000, "ns")
            watch.check()
            if sb.outstanding != last:
                last, since = sb.outstanding, get_sim_time("ns")
        sim_ns, wall = get_sim_time("ns") - t0, time.perf_counter() - wall
        await cluster.quiet()
        sb.finish()
        for node in range(n):
            sb.check_memory(node, cluster.memory(node)[1][0:self.amap.host_size])
        counts = await cluster.counters()
        carried = sum(c[p]["TX_TLPS"] for c in counts for p in c)
        received = [cluster.writes_received(i) - received[i] for i in range(n)]
        n_tx = [c["N"]["TX_TLPS"] for c in counts]
        drops = {(node, p, r): c[p][r] for node, c in enumerate(counts) for p in c
                 for r in DROP_REASONS if c[p].get(r)}
        return {"tlps": sb.tlps, "bytes": sb.bytes_checked, "faults": dict(sb.faults),
                "reports": list(sb.reports), "drops": drops, "carried_tlps": carried,
                "received": received, "n_tx_tlps": n_tx,
                "stores": self.stores, "pio_bytes": self.pio_bytes, "dma_jobs": self.jobs,
                "descriptors": self.descriptors, "dma_bytes": self.dma_bytes,
                "window_bytes": n * self.amap.host_size, "sim_ns": sim_ns, "wall_s": wall}


class _Stall:
    """Logs :meth:`Soak.hosts_state` once when no write has arrived for ``ns``, and raises
    :class:`SoakStalled` with it when none has arrived for ``fail_ns``: a stall fails the run
    in simulated time instead of hanging until the test's wall-clock limit."""

    def __init__(self, soak, ns, fail_ns):
        self.soak, self.ns, self.fail_ns = soak, ns, fail_ns
        self.last, self.since, self.logged = -1, get_sim_time("ns"), False

    def check(self):
        now, n = get_sim_time("ns"), self.soak.scoreboard.tlps
        if n != self.last:
            self.last, self.since, self.logged = n, now, False
        elif now - self.since >= self.fail_ns:
            raise SoakStalled(f"no write arrived for {now - self.since:.0f} ns "
                              f"({n} checked):\n{self.soak.hosts_state()}")
        elif now - self.since >= self.ns and not self.logged:
            self.logged = True
            self.soak.log(f"no write arrived for {now - self.since:.0f} ns:\n"
                          f"{self.soak.hosts_state()}")
