"""Several PEACH2 chips cabled into a sub-cluster, each node with its own host (simulation).

::

    Host 0 (RC, memory)                 Host 1 (RC, memory)          ... host k
      | Gen2 x8                           | Gen2 x8
    N model                             N model
    chip 0 (pins c0_*)                  chip 1 (pins c1_*)           ... chip k
    E model ====== Gen2 x8 cable ====== W model                      (cables per the Topology)
    W, S models: terminate()            E, S models: terminate()     (ports without a cable)

:class:`Cluster` builds one :class:`~peach2.sim.harness.chip.ChipHarness` per node of a
:class:`~peach2.routes.Topology` on a top holding every chip's pins (``c<i>_<pin>``, e.g.
:class:`~peach2.sim.hdl.chips_top.Chips`), cables each topology link as a timed Gen2 x8 link between the two
hard-IP models (:func:`~peach2.sim.pcie.link.connect`: wire time of every TLP and DLLP, 10 ns port
delay one way, credit flow control), and on :meth:`Cluster.start` enumerates every host, gives
every node a region of its host's memory (above 4 GiB by default) and programs every chip with
:meth:`~peach2.sim.driver.driver.Driver.program`.  After that a store by host ``a`` into node ``b``'s
host window (:meth:`Cluster.pio_write`) lands in host ``b``'s memory (:meth:`Cluster.memory`).

GPUs: with an address map of ``n_gpus`` GPU windows (:func:`~peach2.routes.default_address_map`), every node
gets that many :class:`~peach2.sim.pcie.gpu.GpuModel` on its host's root complex, each BAR placed
where the chip's offset subtraction sends GPU window ``i`` (002 section 3.5): a store or DMA to
``address_map.gpu_base(b, i)`` lands in :meth:`Cluster.gpu_memory` ``(b, i)``, and node ``b``'s
DMA reads its own GPU ``i`` at ``gpu_memory(b, i)[0]``.

InfiniBand HCAs: with ``hca`` (the keyword arguments of a
:class:`~peach2.sim.pcie.hca.HcaModel`), every node also gets an HCA on a Gen3 x8 root port of
its host, bus mastering enabled by :meth:`Cluster.start` (:attr:`Cluster.hcas`).  Its memory
writes are not the chips' traffic: :meth:`Cluster.bytes_received` and ``arrivals`` leave them
out.

Cabling rule: a topology link ``(a, p) -> b`` is paired with a port ``q`` of ``b`` that leads
back to ``a``, preferring the opposite port (E with W, S with S), so a ring of two nodes
(``Topology.ring(2)``) is two cables, c0.E-c1.W and c0.W-c1.E.

Simplifications: all chips share one clock (the real boards each run their own 250 MHz);
both ends of a cable are endpoint models that accept every TLP (on the board one is a root port);
every host's TCA BAR must sit at the same bus address, the address map's ``tca_base`` (true of
identical hosts enumerated the same way, and what the shared layout of 002 section 3.5 needs).
"""

from dataclasses import replace

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.tlp import TlpType

from peach2.routes import MASK64, RouteSet, cable_plan
from peach2.sim.driver import Chain, Driver
from peach2.sim.pcie import (
    GPU_READ_BANDWIDTH,
    GPU_READ_LATENCY_NS,
    HARDIP_PIPELINE_NS,
    GpuModel,
    HcaModel,
    attach_gpu,
    attach_hca,
    connect,
    enable_hca,
    place_gpu,
)
from peach2.sim.run import EdgeTicker

from .chip import PORTS, PUT_BAR, TCA_BAR, TCA_SIZE, ChipHarness

__all__ = ["Cluster"]

class Cluster:
    """``topology.n_nodes`` PEACH2 chips, their hosts and the cables between them.

    It builds, cables and starts them (:meth:`start`), then runs traffic on them: stores, waits
    for what arrives, counters, stuck links.

    Parameters
    ----------
    dut : cocotb handle
        Top with every chip's pins, chip ``i`` under ``prefixes[i]``, and ``clk``/``rst``.
    topology : Topology
    address_map : AddressMap
        The shared TCA layout; ``tca_base`` must be where the hosts put the TCA BAR
        (:data:`~peach2.routes.DEFAULT_TCA_BASE`, as :func:`~peach2.routes.default_address_map`
        puts it).
    prefixes : list of str, optional
        Pin prefix per node (default ``c0_``, ``c1_``, ...).
    seed : int
        Seeds the models (node ``i`` uses ``seed + 16 * i``).
    mps : int
        Max payload size of every link, bytes.
    dirty : bool
        Models drive random bits on don't-care data.
    port_delay_ns : float, optional
        Per-side delay of the chip-to-chip cables (default 5 ns, i.e. 10 ns one way).
    above_4g : bool
        Put each node's host memory above 4 GiB (writes leave port N with 4-DW headers, as in
        the papers' system) or below (N rewrites them to 3-DW headers).
    routes : str or RouteSet
        Routing policy of every chip (default ``"safe"``: deadlock-free; ``"shortest"`` can
        deadlock on rings, see :class:`~peach2.routes.RouteSet`) or a route set of this
        topology and map.
    hardip_pipeline_ns : float
        Latency of every hard-IP model's RX and TX path (default: the calibrated
        :data:`~peach2.sim.pcie.calibration.HARDIP_PIPELINE_NS`; 0 for an ideal hard IP); the
        HDL cables take theirs from :class:`~peach2.sim.hdl.cluster_top.ClusterTop`.
    hdl_cables : bool, optional
        ``dut`` is a :class:`~peach2.sim.hdl.cluster_top.ClusterTop` (its ``cluster_tb`` wrapper):
        the cables and the clock are in HDL, only the N ports have Python models, and those
        sleep while idle.  ``cables`` then holds ``(a, port_a, b, port_b, None)``.  Default:
        read from ``dut`` (a ``ClusterTop`` has ``c<i>_rst_out`` pins, a
        :class:`~peach2.sim.hdl.chips_top.Chips` top has every port's pins instead); a value
        that contradicts ``dut`` raises ``ValueError``.
    n_gpus : int, optional
        GPUs per node (:class:`~peach2.sim.pcie.gpu.GpuModel`), one behind each GPU window; default
        ``address_map.n_gpus``.  Another count replaces the map's (``address_map`` then holds
        the map in use).
    gpu_read_bandwidth, gpu_read_latency_ns : float
        Read path of every GPU (default 002's 870 MB/s ceiling after 500 ns).
    record_arrivals : bool
        Keep every received memory write in ``arrivals`` (a long soak counts and checks them
        through :meth:`on_write` instead, so memory does not grow with the run).
    hca : dict, optional
        Give every node an InfiniBand HCA, ``HcaModel(**hca)``; default none.

    Members
    -------
    chips : list of ChipHarness
    cables : list of (int, str, int, str, Link)
        ``(a, port_a, b, port_b, link)``: ``link.a`` sends from ``a`` to ``b``.
    drivers : list of Driver
        One per node, through its own host (after :meth:`start`).
    arrivals : list of list of (float, Tlp)
        Per host, every memory write its root complex received, with the time in ns (empty
        without ``record_arrivals``).
    gpus : list of list of GpuModel
        ``gpus[node][i]``: GPU ``i`` of ``node`` (empty lists without GPU windows).
    hcas : list of HcaModel
        ``hcas[node]``: the node's HCA (empty without ``hca``).
    """

    def __init__(self, dut, topology, address_map, *, prefixes=None, seed=0, mps=256,
                 dirty=True, port_delay_ns=None, above_4g=True, hdl_cables=None,
                 routes="safe", hardip_pipeline_ns=HARDIP_PIPELINE_NS, n_gpus=None,
                 gpu_read_bandwidth=GPU_READ_BANDWIDTH, gpu_read_latency_ns=GPU_READ_LATENCY_NS,
                 record_arrivals=True, hca=None):
        self.routes = routes
        self.hardip_pipeline_ns = hardip_pipeline_ns
        n = topology.n_nodes
        self.above_4g = above_4g
        self.dut = dut
        self.topology = topology
        if n_gpus is not None and n_gpus != address_map.n_gpus:
            address_map = replace(address_map, n_gpus=n_gpus)     # checks that they fit
        if n * address_map.node_size > TCA_SIZE:
            raise ValueError(f"{n} regions of {address_map.node_size:#x} bytes exceed the "
                             f"simulated TCA BAR ({TCA_SIZE:#x} bytes)")
        self.address_map = address_map
        self.mps = mps
        prefixes = prefixes or [f"c{i}_" for i in range(n)]
        if len(prefixes) != n:
            raise ValueError(f"{len(prefixes)} prefixes for {n} nodes")
        hdl_top = hasattr(dut, f"{prefixes[0]}rst_out")
        if hdl_cables is None:
            hdl_cables = hdl_top
        elif hdl_cables != hdl_top:
            raise ValueError(f"hdl_cables={hdl_cables} but the top "
                             f"{'is' if hdl_top else 'is not'} an HDL-cabled ClusterTop")
        plan = cable_plan(topology)
        linked = [set() for _ in range(n)]
        for a, pa, b, pb in plan:
            linked[a].add(pa.lower())
            linked[b].add(pb.lower())
        self.hdl_cables = hdl_cables
        self._prefixes = prefixes
        self.chips = []
        # On the HDL-cabled top only hosts are models: one task steps them all each cycle.
        ticker = EdgeTicker(dut.clk) if hdl_cables else None
        for i in range(n):
            ports = frozenset(linked[i])
            self.chips.append(ChipHarness(dut, prefixes[i], seed=seed + 16 * i, mps=mps,
                                          dirty=dirty, linked=ports,
                                          pass_to_link=self._passer(ports),
                                          ports=("n",) if hdl_cables else PORTS,
                                          sleep_when_idle=hdl_cables,
                                          pipeline_ns=hardip_pipeline_ns,
                                          hdl_clock=hdl_cables, ticker=ticker,
                                          rst=getattr(dut, f"{prefixes[i]}rst_out", None)))
        # Cable before simulation time advances (an unconnected SimPort fails at once).
        self.cables = []
        for a, pa, b, pb in plan:
            link = None if hdl_cables else connect(
                self.chips[a].models[pa.lower()], self.chips[b].models[pb.lower()],
                port_delay_ns=port_delay_ns, max_payload_size=mps)
            self.cables.append((a, pa, b, pb, link))
        self.drivers = []
        self.arrivals = [[] for _ in range(n)]
        self._bytes = [0] * n       # bytes of the memory writes received
        self._writes = [0] * n      # memory writes received
        self._record = record_arrivals
        self._watchers = []
        self._memory = []
        for i, chip in enumerate(self.chips):
            self._watch_writes(chip.host.rc, i)
        self.gpus = [[GpuModel(address_map.gpu_size, read_bandwidth=gpu_read_bandwidth,
                               read_latency_ns=gpu_read_latency_ns)
                      for _ in range(address_map.n_gpus)] for _ in range(n)]
        for chip, gpus in zip(self.chips, self.gpus):
            for gpu in gpus:
                attach_gpu(chip.host, gpu)
        self.hcas = [] if hca is None else [HcaModel(**hca) for _ in range(n)]
        for chip, model in zip(self.chips, self.hcas):
            attach_hca(chip.host, model)

    @staticmethod
    def _passer(linked):
        # Everything the chip sends to its host or onto a cable really goes; on unused ports
        # TLPs are only captured (``chip.sent``), a misroute the tests see there.
        def pass_to_link(port, tlp):
            return port == "n" or port in linked
        return pass_to_link

    @property
    def n_nodes(self):
        return self.topology.n_nodes

    # -- bring-up ------------------------------------------------------------------------------

    async def reset_and_start(self):
        """Reset every chip with its links down (4 cycles), release, then :meth:`start`."""
        dut = self.dut
        dut.rst.value = 1
        # The HDL top's fault inputs (ClusterTop's ``c<i>_reset``, ``cable<j>_down``) held low:
        # left undriven, Icarus reads them as z, and a chip's reset (rst | c<i>_reset) as x.
        for name in ([f"{prefix}reset" for prefix in self._prefixes]
                     + [f"cable{j}_down" for j in range(len(self.cables))]):
            pin = getattr(dut, name, None)
            if pin is not None:
                pin.value = 0
        for chip in self.chips:
            for p in chip.ports:
                chip.pin(f"{p}_ltssm").value = 0
        await ClockCycles(dut.clk, 4)
        dut.rst.value = 0
        await self.start()

    async def start(self):
        """Enumerate every host, give each node host memory, program every chip.

        Raises
        ------
        ValueError
            A host put its TCA BAR somewhere else than ``address_map.tca_base``.
        """
        await gather(chip.start() for chip in self.chips)
        amap = self.address_map
        span = amap.node_size * self.n_nodes
        for i, chip in enumerate(self.chips):
            bar, size = chip.host.dev.bar_addr[TCA_BAR], chip.host.dev.bar_size[TCA_BAR]
            if bar != amap.tca_base or size < span:
                raise ValueError(f"host {i} put the TCA BAR ({size:#x} bytes) at {bar:#x}; the "
                                 f"address map needs {span:#x} bytes at {amap.tca_base:#x}")
        self.drivers = [Driver(chip.host.bars[0], chip.host.bars[TCA_BAR],
                               put_bar=chip.host.bars[PUT_BAR])
                        for chip in self.chips]
        self._memory = [chip.host.alloc(amap.host_size, above_4g=self.above_4g)
                        for chip in self.chips]
        await gather(drv.id_check() for drv in self.drivers)
        routes = self.routes
        if isinstance(routes, str):     # one route set for all chips (the safe search is slow)
            routes = RouteSet.build(self.topology, amap, routes)
        if amap.n_gpus:
            await gather(self._place_gpus(i) for i in range(self.n_nodes))
        self.route_set = routes
        await gather(self.program(i) for i in range(self.n_nodes))
        if amap.n_gpus:
            await gather(self._check_gpu_windows(i) for i in range(self.n_nodes))
        await gather(enable_hca(chip.host, model) for chip, model in zip(self.chips, self.hcas))

    async def program(self, node):
        """(Re)program chip ``node`` as :meth:`start` does: routes, offset, enables."""
        await self.drivers[node].program(self.topology, self.address_map, node,
                                         self._memory[node][0], routes=self.route_set)

    async def _place_gpus(self, node):
        """Put GPU ``i``'s BAR at ``host window memory + gpu_start + i * gpu_size``: where the
        chip's offset subtraction (``region base - memory``) sends GPU window ``i``."""
        host, amap = self.chips[node].host, self.address_map
        for i, gpu in enumerate(self.gpus[node]):
            address = self._memory[node][0] + amap.gpu_start + i * amap.gpu_size
            host.reserve(address, amap.gpu_size)
            await place_gpu(host, gpu, address)

    async def _check_gpu_windows(self, node):
        """Check, with the OFFSET the chip reads back, that GPU window ``i`` of ``node``
        leaves port N at GPU ``i``'s BAR."""
        offset = await self.drivers[node].get_offset()
        for i, gpu in enumerate(self.gpus[node]):
            leaves = (self.address_map.gpu_base(node, i) - offset) & MASK64
            bar = self.gpu_memory(node, i)[0]
            if leaves != bar:
                raise ValueError(f"node {node}: GPU window {i} leaves port N at {leaves:#x}, "
                                 f"but GPU {i}'s BAR is at {bar:#x}")

    def set_pauses(self, rng, *, idle=0.2, backpressure=0.2):
        """Give every model seeded random pauses: RX idles between packets, TX ready drops.

        ``rng`` (a ``random.Random``) draws them; ``idle``/``backpressure`` are probabilities
        per cycle (0 turns that kind off).
        """
        for chip in self.chips:
            for model in chip.models.values():
                model.idle_inside_packets = False   # the hard IP streams a started TLP whole
                model.set_idle_generator(
                    iter(lambda: int(rng.random() < idle), 2) if idle else None)
                model.set_backpressure_generator(
                    iter(lambda: int(rng.random() < backpressure), 2) if backpressure else None)

    # -- traffic ------------------------------------------------------------------------------

    def _watch_writes(self, rc, node):
        log = self.arrivals[node]
        for ft in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            handler = rc.rx_tlp_handler[ft]

            async def watched(tlp, handler=handler):
                await handler(tlp)
                if self.hcas and tlp.requester_id == self.hcas[node].function.pcie_id:
                    return                  # the node's HCA, not the chips' traffic
                if self._record:
                    log.append((get_sim_time("ns"), tlp))
                self._writes[node] += 1
                self._bytes[node] += _write_bytes(tlp)
                for watcher in self._watchers:
                    watcher(node, tlp)
            rc.register_rx_tlp_handler(ft, watched)

    def on_write(self, watcher):
        """Call ``watcher(node, tlp)`` for every memory write host ``node``'s root complex
        receives, after it is written to memory, in the order received."""
        self._watchers.append(watcher)

    # -- traffic ---------------------------------------------------------------------------------

    def memory(self, node):
        """Return ``(bus address, MemoryRegion)`` of the memory behind ``node``'s host window."""
        return self._memory[node]

    def gpu_memory(self, node, i):
        """Return ``(bus address, memory)`` of GPU ``i`` of ``node``: the BAR's address in the
        node's host (a DMA source on that node) and the device memory (``memory[a:b]`` reads
        and writes it without simulation time)."""
        gpu = self.gpus[node][i]
        dev = self.chips[node].host.rc.find_device(gpu.function.pcie_id)
        return dev.bar_addr[0], gpu.memory

    async def pio_write(self, src, dst, offset, data, window="host"):
        """Store ``data`` from host ``src`` into node ``dst``'s ``window`` (``"host"`` or
        ``("gpu", i)``) at ``offset``.

        Returns when host ``src``'s root complex has queued the TLPs (stores are posted).
        """
        return await self.drivers[src].pio_write(self.address_map, dst, window, offset, data)

    async def dma_chain_to_all(self, src, rng, slot, max_size, shadow):
        """Configure node ``src``'s DMA engine and build a channel-0 chain with a descriptor to
        every node (its own included), drawing from ``rng``: 1 .. ``max_size`` random bytes from
        ``src``'s host memory to a random offset inside slot ``n_nodes + src`` (``slot`` bytes
        each) of the destination's host window.

        Copies the bytes each destination will then hold into ``shadow[dst]`` (a model of its
        host window); returns the chain, not started, and its ``(dst, address, size)`` writes.
        """
        n, amap = self.n_nodes, self.address_map
        host, drv = self.chips[src].host, self.drivers[src]
        drv.memory = host.rc.mem_address_space
        buf, region = host.alloc(n * max_size)
        desc, _ = host.alloc(32 * n)
        data = rng.randbytes(n * max_size)
        region[0:len(data)] = data
        await drv.dma_config(mps=self.mps, mrrs=512, ext_tags=True)
        chain = Chain(0, desc)
        writes = []
        for dst in range(n):
            size = rng.randint(1, max_size)
            off = (n + src) * slot + rng.randrange(slot - size + 1)
            base, _ = amap.window(dst, "host")
            chain.memcpy(buf + dst * max_size, base + off, size)
            shadow[dst][off:off + size] = data[dst * max_size:dst * max_size + size]
            writes.append((dst, base + off, size))
        return chain, writes

    async def _wait_for(self, node, have, count, what, timeout_ns):
        start = get_sim_time("ns")
        while have() < count:
            if get_sim_time("ns") - start > timeout_ns:
                raise AssertionError(f"host {node} received {have()} {what}, expected {count}, "
                                     f"within {timeout_ns} ns")
            await ClockCycles(self.dut.clk, 8)

    async def wait_writes(self, node, count, timeout_ns=200_000):
        """Wait until host ``node`` has received ``count`` memory writes in all."""
        await self._wait_for(node, lambda: len(self.arrivals[node]), count, "memory writes",
                             timeout_ns)

    def writes_received(self, node):
        """Memory writes host ``node`` has received (kept or not in ``arrivals``)."""
        return self._writes[node]

    def bytes_received(self, node):
        """Bytes host ``node`` has received in memory writes (byte enables counted)."""
        return self._bytes[node]

    async def wait_bytes(self, node, count, timeout_ns=200_000):
        """Wait until host ``node`` has received ``count`` bytes in memory writes in all
        (independent of how the writes were split)."""
        await self._wait_for(node, lambda: self._bytes[node], count, "bytes", timeout_ns)

    async def wait_gpu_bytes(self, node, i, count, timeout_ns=200_000):
        """Wait until GPU ``i`` of ``node`` has received ``count`` bytes in memory writes."""
        gpu = self.gpus[node][i].function
        await self._wait_for(node, lambda: gpu.bytes_written, count, f"bytes into GPU {i}",
                             timeout_ns)

    async def quiet(self, cycles=100):
        """Wait until no model holds a TLP for its chip or its link, then ``cycles`` more."""
        for chip in self.chips:
            for model in chip.models.values():
                await model.rx_idle()
                await model.tx_idle()
        await ClockCycles(self.dut.clk, cycles)

    async def counters(self):
        """Return every node's counters, ``[{port: {reason: count}}]`` (nodes read at once)."""
        return await gather(drv.counters() for drv in self.drivers)

    async def assert_no_drops(self, reasons):
        """Read every chip's counters; raise ``AssertionError`` naming the chip, port and reason
        of the first of ``reasons`` that counted a drop."""
        for node, ports in enumerate(await self.counters()):
            for port, c in ports.items():
                for reason in reasons:
                    assert c[reason] == 0, f"chip {node} port {port}: {reason} = {c[reason]}"

    async def clear_counters(self):
        """Zero every chip's counters."""
        await gather(drv.clear_counters() for drv in self.drivers)

    def cable_stats(self):
        """Return ``[(a, port_a, b, port_b, {stat: count})]`` of the HDL cables' counters
        (``a2b_tlps``, ``b2a_tlps``, ``a2b_stall``, ``b2a_stall``; ``hdl_cables`` only)."""
        out = []
        for j, (a, pa, b, pb, _) in enumerate(self.cables):
            stats = {k: int(getattr(self.dut, f"cable{j}_{k}").value)
                     for k in ("a2b_tlps", "b2a_tlps", "a2b_stall", "b2a_stall")}
            out.append((a, pa, b, pb, stats))
        return out

    async def wait_writes_or_stuck(self, want, *, window_ns=20_000, poll_ns=1_000):
        """Wait until host ``n`` has received ``want[n]`` memory writes for every ``n``, or
        until nothing moves for ``window_ns`` (no write arrives anywhere, no cable carries a
        TLP).  Returns ``None`` when done, else the stuck links: ``["2.E -> 3.W", ...]``, every
        cable direction that waited for credits through the whole window (``hdl_cables``)."""
        def snapshot():
            return ([len(a) for a in self.arrivals], self.cable_stats())
        last, since = snapshot(), get_sim_time("ns")
        while any(len(self.arrivals[n]) < w for n, w in enumerate(want)):
            await ClockCycles(self.dut.clk, max(1, int(poll_ns // 4)))
            now = snapshot()
            moved = now[0] != last[0] or any(
                s1[4][k] != s0[4][k] for s0, s1 in zip(last[1], now[1])
                for k in ("a2b_tlps", "b2a_tlps"))
            if moved:
                last, since = now, get_sim_time("ns")
            elif get_sim_time("ns") - since >= window_ns:
                stuck = []
                for (a, pa, b, pb, s0), (_, _, _, _, s1) in zip(last[1], now[1]):
                    if s1["a2b_stall"] - s0["a2b_stall"] >= window_ns // 4 - poll_ns // 4:
                        stuck.append(f"{a}.{pa} -> {b}.{pb}")
                    if s1["b2a_stall"] - s0["b2a_stall"] >= window_ns // 4 - poll_ns // 4:
                        stuck.append(f"{b}.{pb} -> {a}.{pa}")
                return stuck
        return None

    def check(self):
        """Assert no model or host of any node recorded a protocol violation."""
        for chip in self.chips:
            chip.check()

def _write_bytes(tlp):
    """Bytes a memory write TLP writes: its DWs less the bytes its byte enables leave out."""
    n = 4 * tlp.length
    first, last = tlp.first_be, tlp.last_be if tlp.length > 1 else tlp.first_be
    n -= (first & -first).bit_length() - 1          # leading disabled bytes of the first DW
    n -= 4 - last.bit_length()                      # trailing disabled bytes of the last DW
    return n


async def gather(coros):
    """Run coroutines ``coros`` at once; return their results in order."""
    tasks = [cocotb.start_soon(c) for c in coros]
    return [await t for t in tasks]
