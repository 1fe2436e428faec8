"""Where the collectives' buffers live: places ``(node, window, offset)`` on a sub-cluster.

A :class:`Place` names bytes of one node's memory the way the TCA address map does (002 section
3.5): the node, the window (``"host"`` or ``("gpu", i)``) and an offset in it.  :class:`Memories`
turns places into the two addresses a DMA descriptor needs (000 section 2.5,
``tcaSetDMADesc_Memcpy``):

- :meth:`Memories.tca`: the TCA address, routed by the chips (a descriptor's ``dst`` and
  completion-write address, or a PIO store);
- :meth:`Memories.local`: the bus address the node's own DMA reads through port N (a
  descriptor's ``src``; only for the node's own memory: PEACH2 moves data by RDMA *write*).

It also hands out *symmetric* buffers (:meth:`Memories.symmetric`: the same offset on every
node, as a symmetric heap does, so a sender computes its partner's address from its own) and
lets a node's program wait for a 4-byte word of its own memory to take a value
(:meth:`Memories.wait_word`): the host CPU polling the completion write of a descriptor
(``seq``, docs/dma.md).

Simplifications.  The wait is event-driven: it looks at the word whenever a memory write
lands in that host (the root complex's write handler), i.e. a CPU spinning on the flag that
sees it the moment it lands; the calibrated hard-IP latency (:mod:`peach2.sim.pcie.calibration`)
already holds the polling time of 002's 782 ns.  Windows other than ``"host"`` are polled
every ``poll_cycles`` clock cycles instead (no write event to hook).  :meth:`read` and
:meth:`write` touch memory without simulation time: tests use them to set inputs and check
results, and a node's program uses them only on its own memory (clearing its flags).

GPU windows: a cluster with a ``gpu_memory(node, i)`` method (``(bus address, memory)``: the
GPU's BAR as its host sees it, and the device memory) serves them; ``regions={(node, ("gpu",
i)): (bus address, memory)}`` overrides it.  The host window comes from
:meth:`peach2.sim.harness.cluster.Cluster.memory`.

Building a plan needs no simulator: cocotb (and cocotbext-pcie) are imported by the methods
that wait in simulated time (:meth:`Memories.wait_word`, :func:`gather`, the write hook), so
places, addresses and symmetric buffers work offline.
"""

from dataclasses import dataclass, replace

__all__ = ["Place", "Memories"]


@dataclass(frozen=True)
class Place:
    """Bytes at ``offset`` in ``window`` (``"host"`` or ``("gpu", i)``) of ``node``."""
    node: int
    window: object = "host"
    offset: int = 0

    def __add__(self, delta):
        return replace(self, offset=self.offset + delta)

    def on(self, node):
        """The same window and offset on another node (a symmetric buffer's partner)."""
        return replace(self, node=node)


class Memories:
    """The memories of a :class:`~peach2.sim.harness.cluster.Cluster`'s nodes, addressed by places.

    Parameters
    ----------
    cluster : Cluster
        Started (its drivers and host memories exist).
    regions : dict, optional
        ``{(node, window): (bus address, MemoryRegion)}`` for windows other than ``"host"``.
    heap_start : int
        First window offset :meth:`symmetric` hands out (the rest below is the user's).
    poll_cycles : int
        Poll period of :meth:`wait_word` on windows without a write event.
    """

    def __init__(self, cluster, regions=None, *, heap_start=0, poll_cycles=16):
        self.cluster = cluster
        self.amap = cluster.address_map
        self._regions = dict(regions or {})
        self._heap = {}                 # window -> next free offset
        self._heap_start = heap_start
        self.poll_cycles = poll_cycles
        self._waiters = [[] for _ in range(cluster.n_nodes)]
        self._hooked = set()
        self._dma_ready = set()

    # -- addresses --------------------------------------------------------------------------------

    def region(self, node, window="host"):
        """Return ``(bus address, MemoryRegion)`` of the memory behind ``node``'s ``window``."""
        if window == "host":
            return self.cluster.memory(node)
        if (node, window) in self._regions:
            return self._regions[(node, window)]
        gpu_memory = getattr(self.cluster, "gpu_memory", None)     # a cluster with GPUs
        if gpu_memory is not None and isinstance(window, tuple) and window[0] == "gpu":
            return gpu_memory(node, window[1])
        raise ValueError(f"no memory registered for window {window!r} of node {node}; pass "
                         "regions= to Memories")

    def _check(self, place, size):
        _, window_size = self.amap.window(place.node, place.window)
        if place.offset < 0 or size < 0 or place.offset + size > window_size:
            raise ValueError(f"{size} bytes at {place} do not fit the {window_size:#x}-byte "
                             f"window")

    def tca(self, place, size=0):
        """TCA address of ``place`` (for a descriptor's ``dst`` or ``seq_addr``)."""
        self._check(place, size)
        return self.amap.window(place.node, place.window)[0] + place.offset

    def local(self, place, size=0):
        """Bus address of ``place`` as its own node's DMA reads it (a descriptor's ``src``)."""
        self._check(place, size)
        return self.region(place.node, place.window)[0] + place.offset

    def symmetric(self, size, *, window="host", align=64):
        """Reserve ``size`` bytes at the same offset of ``window`` on every node; return the
        offset (``Place(node, window, offset)`` names node ``node``'s copy)."""
        at = self._heap.get(window, self._heap_start)
        at = -(-at // align) * align
        _, window_size = self.amap.window(0, window)
        if at + size > window_size:
            raise ValueError(f"{size} more bytes do not fit the {window_size:#x}-byte {window} "
                             f"window ({at:#x} used)")
        self._heap[window] = at + size
        return at

    # -- bytes (no simulation time) ---------------------------------------------------------------

    def read(self, place, size):
        """Return ``size`` bytes at ``place`` (inputs and checks; no simulation time)."""
        self._check(place, size)
        _, region = self.region(place.node, place.window)
        return bytes(region[place.offset:place.offset + size])

    def write(self, place, data):
        """Write ``data`` at ``place`` (inputs, or a node clearing its own flags)."""
        data = bytes(data)
        self._check(place, len(data))
        _, region = self.region(place.node, place.window)
        region[place.offset:place.offset + len(data)] = data

    def word(self, place):
        """The little-endian 4-byte word at ``place``."""
        return int.from_bytes(self.read(place, 4), "little")

    def assert_equal(self, place, want, what):
        """Raise ``AssertionError`` (``what``, the node, window and the differing offsets)
        unless the bytes at ``place`` are ``want``."""
        got = self.read(place, len(want))
        if got != bytes(want):
            bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
            raise AssertionError(f"{what}: node {place.node} {place.window} differs at "
                                 f"{len(bad)} bytes, offsets {place.offset + bad[0]:#x} .. "
                                 f"{place.offset + bad[-1]:#x}")

    # -- waiting for a completion write ----------------------------------------------------------

    def _hook(self, node):
        """Check ``node``'s waiters after every memory write its root complex takes."""
        from cocotbext.pcie.core.tlp import TlpType

        if node in self._hooked:
            return
        self._hooked.add(node)
        rc = self.cluster.chips[node].host.rc
        waiters = self._waiters[node]
        for ft in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            handler = rc.rx_tlp_handler[ft]

            async def watched(tlp, handler=handler):
                await handler(tlp)
                for place, value, event in list(waiters):
                    if self.word(place) == value:
                        waiters.remove((place, value, event))
                        event.set()
            rc.register_rx_tlp_handler(ft, watched)

    async def wait_word(self, place, value, timeout_ns=None):
        """Wait until the word at ``place`` (own memory of ``place.node``) is ``value``;
        return the simulated time (ns) it was seen.

        Raises
        ------
        TimeoutError
            Not seen within ``timeout_ns`` (None: wait for ever), naming the place and what it
            holds.
        """
        from cocotb.triggers import ClockCycles, Event, SimTimeoutError, with_timeout
        from cocotb.utils import get_sim_time

        if self.word(place) == value:
            return get_sim_time("ns")
        if place.window != "host":
            start = get_sim_time("ns")
            while self.word(place) != value:
                if timeout_ns is not None and get_sim_time("ns") - start > timeout_ns:
                    self._timeout(place, value, timeout_ns)
                await ClockCycles(self.cluster.dut.clk, self.poll_cycles)
            return get_sim_time("ns")
        self._hook(place.node)
        event = Event()
        self._waiters[place.node].append((place, value, event))
        if timeout_ns is None:
            await event.wait()
        else:
            try:
                await with_timeout(event.wait(), timeout_ns, "ns")
            except SimTimeoutError:
                self._waiters[place.node].remove((place, value, event))
                self._timeout(place, value, timeout_ns)
        return get_sim_time("ns")

    def _timeout(self, place, value, timeout_ns):
        raise TimeoutError(f"node {place.node}: the word at {place.window} offset "
                           f"{place.offset:#x} still holds {self.word(place):#x}, not "
                           f"{value:#x}, after {timeout_ns} ns")

    # -- DMA set-up ----------------------------------------------------------------------------

    async def dma_ready(self, node):
        """Configure ``node``'s DMA once (MPS of the links, MRRS 512, extended tags) and give
        its driver the host memory descriptors are written to; return the driver."""
        drv = self.cluster.drivers[node]
        if node not in self._dma_ready:
            drv.memory = self.cluster.chips[node].host.rc.mem_address_space
            await drv.dma_config(mps=self.cluster.mps, mrrs=512, ext_tags=True)
            self._dma_ready.add(node)
        return drv

    def alloc_descriptors(self, node, size):
        """Bus address of ``size`` bytes of ``node``'s host memory for descriptors."""
        address, _ = self.cluster.chips[node].host.alloc(max(64, size))
        return address


async def gather(coros):
    """Run coroutines at once; return their results in order."""
    import cocotb

    tasks = [cocotb.start_soon(c) for c in coros]
    return [await t for t in tasks]
