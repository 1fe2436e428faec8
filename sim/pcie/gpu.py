"""A GPU as a PCIe endpoint beside PEACH2 on a node's root complex (simulation model).

In HA-PACS/TCA the GPUs and the PEACH2 board sit on the same CPU's PCIe root complex and share
its address space, so PEACH2 reads and writes GPU memory directly (002 section 3.2, GPUDirect
Support for RDMA on Kepler K20 with CUDA 5.0).  The TCA address map gives every node's GPUs
windows in the node's region (002 section 3.5); the chip subtracts the node's offset from what
leaves port N, so GPU window ``i`` of node ``n`` must be where that GPU's BAR is in host ``n``'s
physical address space (:func:`place_gpu` puts it there, :class:`~peach2.sim.harness.cluster.Cluster`
checks it).

:class:`GpuModel` is a cocotbext-pcie device with one function: device memory behind a 64-bit
prefetchable BAR 0 (what the GPU's BAR1 aperture is to its peers), PCIe IDs of a Tesla K20
(the GPU of 002's test system, section 4, Table 1) on its Gen2 x16 link.  What 002 measured, and
the model reproduces:

- **Writes into the GPU** go at link rate: PEACH2's DMA into a GPU is about as fast as into
  host memory (002 section 4.1.2, Figures 4-6; section 4.2, Figure 7 "CPU-to-rGPU").  Every
  memory write is applied when it arrives.
- **Reads of GPU memory** (completions of memory reads, i.e. a DMA whose source is a GPU)
  peaked near **870 MB/s** behind the SandyBridge's internal PCIe switch (002 section 4.1.2;
  the paper blames the CPU's PCIe switch and expects IvyBridge to do better).  The read path is
  a pipe of ``read_bandwidth`` bytes per second after ``read_latency_ns``: each read's data is
  ready ``read_latency_ns`` after it arrives, but no earlier than the previous data has passed
  the pipe, so reads overlap while the pipe is busy and the pipe is the ceiling.  Default
  870e6 B/s; 002 gives no GPU read latency, so the default latency is the 500 ns the DMA
  benchmarks assume for host memory (``tb/bench/benchmarks.py``), and only the bandwidth differs.

Simplifications: no BAR1 page table and no GPUDirect pin-down (``cuPointerGetAttribute`` token,
``nvidia_p2p_get_pages``): the whole BAR is device memory, mapped from the start; the memory is
a plain byte array (``GpuModel.memory``) that tests read and write without simulation time, as
a ``cudaMemcpy`` would; a GPU kernel is a coroutine that may store to a peer's BAR
(:meth:`GpuFunction.store`: a posted write upstream, leaving at once: no paper gives the K20's
store path, so it costs nothing of its own) and poll its own memory
(:meth:`GpuFunction.wait_word`: it sees a write when it lands); no compute, no copy engines,
no GPU-initiated DMA; completions are split at the
128-byte RCB like cocotbext-pcie's endpoint; reads are answered in arrival order; the slower
rate when one DMA both reads and writes the same GPU (002 section 4.1.2) is not modelled; the
host's CPU does not reach its GPUs by loads and stores (the model's host memory map has no
window for them).
"""

import cocotb
from cocotb.queue import Queue
from cocotb.triggers import Timer
from cocotb.utils import get_sim_steps, get_sim_time
from cocotbext.pcie.core import Device, MemoryEndpoint
from cocotbext.pcie.core.bridge import HostBridge
from cocotbext.pcie.core.tlp import Tlp, TlpType

from .host import completion_plan

__all__ = ["GpuModel", "GpuFunction", "attach_gpu", "place_gpu", "enable_kernel_stores",
           "GPU_READ_BANDWIDTH", "GPU_READ_LATENCY_NS"]

#: 002 section 4.1.2: the highest rate PEACH2's DMA read K20 memory at, bytes per second.
GPU_READ_BANDWIDTH = 870e6
#: Latency of the GPU's read path (not measured in the papers: the DMA benchmarks' host value).
GPU_READ_LATENCY_NS = 500.0
#: NVIDIA's vendor ID and the Tesla K20c's device ID; class 3D controller.
_NVIDIA, _K20, _CLASS_3D = 0x10DE, 0x1022, 0x030200


class GpuFunction(MemoryEndpoint):
    """The GPU's PCIe function: BAR 0 (64-bit, prefetchable) over ``size`` bytes of memory.

    Parameters are those of :class:`GpuModel`.

    Members
    -------
    memory : mmap
        The device memory, ``memory[a:b]`` reads and writes it directly.
    bytes_written, bytes_read : int
        Bytes written into the memory by memory writes, and returned in read completions.
    reads : int
        Memory reads answered.
    first_read_ns, last_completion_ns : float or None
        When the first memory read arrived, and when the last completion was sent.
    """

    def __init__(self, size, *, read_bandwidth=GPU_READ_BANDWIDTH,
                 read_latency_ns=GPU_READ_LATENCY_NS):
        super().__init__()
        if size < 4096 or size & (size - 1):
            raise ValueError(f"GPU memory must be a power of two of at least 4 KiB, not {size}")
        if read_bandwidth <= 0:
            raise ValueError(f"read bandwidth must be positive, not {read_bandwidth}")
        if read_latency_ns < 0:
            raise ValueError(f"read latency must not be negative, not {read_latency_ns}")
        self.vendor_id, self.device_id, self.class_code = _NVIDIA, _K20, _CLASS_3D
        self.pcie_cap.max_payload_size_supported = 1       # 256 bytes, as the chip's N port
        self.pcie_cap.extended_tag_supported = True
        self.size = size
        self.read_bandwidth = read_bandwidth
        self.read_latency_ns = read_latency_ns
        self.memory = self.add_prefetchable_mem_region(size)
        self.bytes_written = 0
        self.bytes_read = 0
        self.reads = 0
        self.first_read_ns = self.last_completion_ns = None
        self._pipe_free_ns = 0.0        # when the read pipe has passed all data given to it
        self._completions = Queue()     # (send time in ns, completion) in send order
        self._sender = None
        self._waiters = []              # (offset, value, Event) of kernels polling a word

    async def handle_mem_write_tlp(self, tlp):
        await super().handle_mem_write_tlp(tlp)
        if self.match_bar(tlp.address):
            self.bytes_written += tlp.get_be_byte_count()
            for waiter in list(self._waiters):
                offset, value, event = waiter
                if int.from_bytes(self.memory[offset:offset + 4], "little") == value:
                    self._waiters.remove(waiter)
                    event.set()

    async def store(self, address, data):
        """A kernel's store of ``data`` to bus ``address`` (a peer's BAR that CUDA mapped for
        the kernel, as PEACH2's put window): posted writes upstream, sent at once."""
        await self.mem_write(address, bytes(data))

    async def wait_word(self, offset, value, timeout_ns):
        """A kernel polling the 32-bit word at ``offset`` of its memory until it is ``value``;
        returns the simulated time (ns) it was seen.  ``TimeoutError`` after ``timeout_ns``."""
        from cocotb.triggers import Event, SimTimeoutError, with_timeout
        if not 0 <= offset <= self.size - 4:
            raise ValueError(f"offset {offset:#x} is outside the {self.size:#x}-byte memory")
        if int.from_bytes(self.memory[offset:offset + 4], "little") != value:
            event = Event()
            self._waiters.append((offset, value, event))
            try:
                await with_timeout(event.wait(), timeout_ns, "ns")
            except SimTimeoutError:
                self._waiters.remove((offset, value, event))
                held = int.from_bytes(self.memory[offset:offset + 4], "little")
                raise TimeoutError(f"GPU memory word {offset:#x} holds {held:#x}, not "
                                   f"{value:#x}, after {timeout_ns} ns") from None
        return get_sim_time("ns")

    async def handle_mem_read_tlp(self, tlp):
        """Queue the read's completions at the times the read pipe delivers their data.

        Returns at once, so writes arriving behind the read are not held up (the device
        takes TLPs one at a time)."""
        bar = self.match_bar(tlp.address)
        if not bar or bar[1] + 4 * tlp.length > self.size:
            cpl = Tlp.create_ur_completion_for_tlp(tlp, self.pcie_id)
            await self._queue(get_sim_time("ns"), cpl)
            return
        _, offset = bar
        data = self.memory[offset:offset + 4 * tlp.length]
        self.reads += 1
        if self.first_read_ns is None:
            self.first_read_ns = get_sim_time("ns")
        plan = completion_plan(tlp.address + tlp.get_first_be_offset(), tlp.get_be_byte_count(),
                               tlp.length, 128, 128 << self.pcie_cap.max_payload_size, False)
        ready = get_sim_time("ns") + self.read_latency_ns
        for m, k, byte_count, lower_address in plan:
            cpl = Tlp.create_completion_data_for_tlp(tlp, self.pcie_id)
            cpl.byte_count, cpl.lower_address = byte_count, lower_address
            cpl.set_data(data[4 * m:4 * (m + k)])
            self._pipe_free_ns = max(self._pipe_free_ns, ready) + 4e9 * k / self.read_bandwidth
            self.bytes_read += 4 * k
            await self._queue(self._pipe_free_ns, cpl)

    async def _queue(self, when_ns, cpl):
        if self._sender is None:
            self._sender = cocotb.start_soon(self._send_completions())
        await self._completions.put((when_ns, cpl))

    async def _send_completions(self):
        while True:
            when, cpl = await self._completions.get()
            wait = when - get_sim_time("ns")
            if wait > 0:
                await Timer(get_sim_steps(wait, "ns", round_mode="round"), "step")
            await self.send(cpl)
            self.last_completion_ns = get_sim_time("ns")


class GpuModel(Device):
    """A GPU on a PCIe link: one :class:`GpuFunction` (see the module docstring).

    Parameters
    ----------
    size : int
        Bytes of device memory behind BAR 0 (a power of two, at least 4 KiB; a root port
        window needs at least 1 MiB).
    read_bandwidth : float
        Ceiling of the read path, bytes per second (default :data:`GPU_READ_BANDWIDTH`, 002's
        870 MB/s).
    read_latency_ns : float
        Time from a read's arrival to its first data leaving the pipe, before the pipe's own
        time (default :data:`GPU_READ_LATENCY_NS`).

    Members
    -------
    function : GpuFunction
    memory : mmap
        The device memory (``function.memory``).
    """

    def __init__(self, size, *, read_bandwidth=GPU_READ_BANDWIDTH,
                 read_latency_ns=GPU_READ_LATENCY_NS):
        self.function = GpuFunction(size, read_bandwidth=read_bandwidth,
                                    read_latency_ns=read_latency_ns)
        super().__init__(self.function)
        self.upstream_port.max_link_speed, self.upstream_port.max_link_width = 2, 16

    @property
    def memory(self):
        """The device memory (``memory[a:b]``, no simulation time)."""
        return self.function.memory

    @property
    def size(self):
        """Bytes of device memory (BAR 0's size)."""
        return self.function.size


# -- on a host's root complex ---------------------------------------------------------------------

_MEM_REQUESTS = (TlpType.MEM_READ, TlpType.MEM_READ_64, TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
#: Root port windows are set in 1 MiB units (PCI bridge prefetchable base/limit registers).
_WINDOW_UNIT = 1 << 20


class _PeerRoutingHostBridge(HostBridge):
    """cocotbext-pcie's host bridge, decoding every root port's windows as a real root complex
    does: a memory request from one root port to a BAR below another goes there (peer to peer,
    through the CPU's PCIe switch), not into host memory.  The stock bridge decodes one
    contiguous window per kind, so a GPU BAR placed next to host memory (where the TCA map puts
    it) would be sent to memory."""

    root_ports = ()

    def match_tlp_secondary(self, tlp):
        if super().match_tlp_secondary(tlp):
            return True
        return tlp.fmt_type in _MEM_REQUESTS and any(
            port.match_tlp_secondary(tlp) for port in self.root_ports)


def attach_gpu(host, gpu, *, link_width=16):
    """Put ``gpu`` (a :class:`GpuModel`) on a new root port of ``host``'s root complex, Gen2
    ``x link_width``; before :meth:`~peach2.sim.pcie.host.Host.enumerate` and before simulation time
    advances.  Returns the root port."""
    bridge = host.rc.upstream_bridge
    if not isinstance(bridge, _PeerRoutingHostBridge):
        bridge.__class__ = _PeerRoutingHostBridge       # same object: the RC keeps its wiring
        bridge.root_ports = []
    root_port = host.add_root_port(gpu, link_width)
    bridge.root_ports.append(root_port)
    return root_port


async def place_gpu(host, gpu, address):
    """Move ``gpu``'s BAR 0 to bus ``address`` of ``host`` (after enumeration), as an OS
    reassigning resources does: program the BAR and its root port's prefetchable window, enable
    memory decoding, read both back.  Returns the BAR address read back.

    Raises
    ------
    ValueError
        ``address`` not aligned to the GPU's memory size, or a size below the 1 MiB a root
        port window is made of.
    """
    size = gpu.size
    if size < _WINDOW_UNIT or address % size:
        raise ValueError(f"a {size:#x}-byte GPU BAR cannot be placed at {address:#x}: it must "
                         f"be aligned to its size, and at least 1 MiB (a root port window)")
    dev = host.rc.find_device(gpu.function.pcie_id)
    raw = (gpu.function.bar[0] & 0xF) | address
    await dev.config_write_dword(0x10, raw & 0xFFFF_FFFF)
    await dev.config_write_dword(0x14, raw >> 32)
    dev.bar[0], dev.bar_addr[0] = raw, address
    dev.bar_raw[0], dev.bar_raw[1] = raw & 0xFFFF_FFFF, raw >> 32
    dev.bar_window[0] = None        # the host's CPU has no mapping of it (module docstring)
    root = dev.upstream_bridge()
    root.prefetchable_mem_base, root.prefetchable_mem_limit = address, address + size - 1
    await root.setup_bridge()
    await dev.enable_device()
    got = (await dev.config_read_dword(0x10) & ~0xF) | await dev.config_read_dword(0x14) << 32
    window = await root.config_read_dword(0x24)
    lo = (window & 0xFFF0) << 16 | await root.config_read_dword(0x28) << 32
    hi = (window & 0xFFF0_0000) | 0xFFFFF | await root.config_read_dword(0x2C) << 32
    if got != address or (lo, hi) != (address, address + size - 1):
        raise AssertionError(f"GPU BAR 0 reads back {got:#x} behind a root port window "
                             f"{lo:#x}..{hi:#x}; placed at {address:#x}, {size:#x} bytes")
    return got


async def enable_kernel_stores(host, gpu):
    """Let ``gpu``'s kernels store to peers (:meth:`GpuFunction.store`): its host enables the
    GPU as a bus master, as the GPU's driver does before a kernel may write to a peer's BAR.
    Not done by :func:`place_gpu`, so that runs without kernel stores keep their timing."""
    await host.rc.find_device(gpu.function.pcie_id).set_master()
