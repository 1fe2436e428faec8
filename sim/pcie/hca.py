"""The InfiniBand HCA as a PCIe endpoint on a node's root complex (simulation model).

Every HA-PACS/TCA node has a Mellanox ConnectX-3 QDR HCA on PCIe Gen3 x8, plugged into CPU1,
while PEACH2 and GPU0/GPU1 sit on CPU0 (000 Figure 1; Odajima et al., "TCA/InfiniBand hybrid
communication in XcalableACC", section 2.2).  :class:`HcaModel` is that card as a cocotbext-pcie
device: PCIe IDs of a ConnectX-3 (Mellanox 0x15b3, device 0x1003, class InfiniBand network
controller 0x020700), one 64-bit BAR for its doorbells, and a DMA engine that is a bus master:
:meth:`HcaFunction.dma_read` and :meth:`HcaFunction.dma_write` issue memory read and write TLPs
through the root complex (split at the max read request and max payload sizes and at 4 KiB, as
cocotbext-pcie's requester does), so

- a read of host memory pays the root complex's read latency and the link's wire time;
- a read of a GPU's BAR goes through the root complex to the GPU model
  (:mod:`.gpu`), whose read pipe (870 MB/s by default) limits it, as it limits PEACH2's reads;
- a read the root complex refuses (no memory, no BAR: an Unsupported Request or Completer Abort
  completion) or never answers (``read_timeout_ns``) returns ``None``; nothing hangs.

The cocotb node has only CPU0's root complex, so the HCA is plugged into it and the socket
crossing is modelled in the endpoint, for address ranges the caller names
(:meth:`HcaFunction.add_range`):

- ``"qpi-memory"`` ranges (host memory of the other socket, as CPU0's memory is to an HCA on
  CPU1): ``qpi_host_latency_ns`` more per read, and per write before it is visible;
- ``"qpi-peer"`` ranges (a GPU on the other socket): peer-to-peer through both root complexes
  and QPI, paced at ``qpi_p2p_bytes_per_s`` in each direction after ``qpi_p2p_latency_ns``.  The
  section 4 of the XcalableACC paper above measures GPUDirect RDMA across QPI at most about
  290 MB/s; the node model (:class:`peach2.sim.node.NodeParams`) holds the values the machine
  passes here.

A write is posted: :meth:`HcaFunction.dma_write` returns when its last TLP has been queued at
the link, and returns the time the data is visible at its target: an upper bound from the
link's timing (the TLP before it and the last one on the wire, the link delay; twice that to a
device, ``"peer"`` or ``"qpi-peer"``, behind a second link; plus the QPI latency for
``"qpi-memory"``).  It errs late by a few tens of nanoseconds.

Simplifications: no doorbell semantics (writes to the BAR are counted, reads return zeros; the
verbs model, :mod:`peach2.sim.verbs`, is driven directly); no MSI-X, no interrupt; reads and
writes of one DMA call go out in order and a read's data returns whole; the QPI crossing is a
pipe per direction, not a second root complex.
"""

from cocotb.triggers import Timer
from cocotb.utils import get_sim_steps, get_sim_time
from cocotbext.pcie.core import Device, MemoryEndpoint

from .host import size_code

__all__ = ["HcaModel", "HcaFunction", "attach_hca", "enable_hca", "MELLANOX_VENDOR",
           "CONNECTX3_DEVICE", "INFINIBAND_CLASS", "RANGE_KINDS"]

#: Mellanox's vendor ID, the ConnectX-3's device ID (MT27500) and the class code lspci shows
#: for it: network controller, InfiniBand.
MELLANOX_VENDOR, CONNECTX3_DEVICE, INFINIBAND_CLASS = 0x15B3, 0x1003, 0x020700
#: The ConnectX-3's slot: PCIe Gen3 x8 (000 section 4).
HCA_GEN, HCA_WIDTH = 3, 8
#: What an address range holds: host memory of the HCA's socket (``"memory"``, the default), a
#: device there (``"peer"``: a second link to cross), host memory of the other socket
#: (``"qpi-memory"``: ``qpi_host_latency_ns`` more) or a device there (``"qpi-peer"``: paced at
#: ``qpi_p2p_bytes_per_s`` after ``qpi_p2p_latency_ns``).
RANGE_KINDS = ("memory", "peer", "qpi-memory", "qpi-peer")


class HcaFunction(MemoryEndpoint):
    """The HCA's PCIe function: BAR 0 (64-bit) of ``bar_size`` bytes, and a bus-master DMA.

    Parameters are those of :class:`HcaModel`.

    Members
    -------
    doorbells : int
        Memory writes received in BAR 0.
    reads, writes : int
        DMA reads and writes issued; ``failed_reads``: those that returned ``None``.
    read_bytes, write_bytes : int
        Bytes moved by them.
    """

    def __init__(self, bar_size=1 << 20, *, qpi_p2p_bytes_per_s=None, qpi_p2p_latency_ns=0.0,
                 qpi_host_latency_ns=0.0, read_timeout_ns=100_000.0):
        super().__init__()
        if bar_size < 4096 or bar_size & (bar_size - 1):
            raise ValueError(f"the doorbell BAR must be a power of two of at least 4 KiB, "
                             f"not {bar_size}")
        if qpi_p2p_bytes_per_s is not None and not qpi_p2p_bytes_per_s > 0:
            raise ValueError(f"the QPI rate must be positive, not {qpi_p2p_bytes_per_s}")
        for name, value in (("qpi_p2p_latency_ns", qpi_p2p_latency_ns),
                            ("qpi_host_latency_ns", qpi_host_latency_ns),
                            ("read_timeout_ns", read_timeout_ns)):
            if value < 0:
                raise ValueError(f"{name} must not be negative, not {value}")
        self.vendor_id, self.device_id, self.class_code = (MELLANOX_VENDOR, CONNECTX3_DEVICE,
                                                           INFINIBAND_CLASS)
        self.pcie_cap.max_payload_size_supported = 1       # 256 bytes, as the host's
        self.pcie_cap.extended_tag_supported = True
        self.bar_size = bar_size
        self.qpi_p2p_bytes_per_s = qpi_p2p_bytes_per_s
        self.qpi_p2p_latency_ns = qpi_p2p_latency_ns
        self.qpi_host_latency_ns = qpi_host_latency_ns
        self.read_timeout_ns = read_timeout_ns
        self.add_region(bar_size, self._bar_read, self._bar_write, ext=True)
        self._ranges = []                    # (lo, hi, kind)
        self._pipe_free_ns = {"rd": 0.0, "wr": 0.0}   # QPI peer-to-peer pipe, per direction
        self.link_port = None                # the device's upstream port (set by HcaModel)
        self.doorbells = 0
        self.reads = self.writes = self.failed_reads = 0
        self.read_bytes = self.write_bytes = 0

    # -- BAR 0 ------------------------------------------------------------------------------

    async def _bar_read(self, addr, length):
        return bytes(length)

    async def _bar_write(self, addr, data):
        self.doorbells += 1

    # -- what lies behind an address --------------------------------------------------------------

    def add_range(self, lo, hi, kind):
        """Say what bus addresses ``[lo, hi)`` are (see :data:`RANGE_KINDS`); addresses in no
        range are host memory on the HCA's own socket."""
        if kind not in RANGE_KINDS:
            raise ValueError(f"kind must be one of {RANGE_KINDS}, not {kind!r}")
        if not 0 <= lo < hi:
            raise ValueError(f"empty or negative range {lo:#x}..{hi:#x}")
        if kind == "qpi-peer" and self.qpi_p2p_bytes_per_s is None:
            raise ValueError("a peer-to-peer crossing of QPI needs qpi_p2p_bytes_per_s")
        self._ranges.append((lo, hi, kind))

    def target(self, addr, nbytes=1):
        """The kind of ``[addr, addr + nbytes)``: a range's, or ``"memory"``."""
        for lo, hi, kind in self._ranges:
            if lo <= addr and addr + max(nbytes, 1) <= hi:
                return kind
        return "memory"

    def _pipe(self, direction, start_ns, nbytes):
        """Pass ``nbytes`` through the QPI pipe of ``direction`` from ``start_ns`` on; return
        when the last byte is out on the far side (``qpi_p2p_latency_ns`` after the pipe)."""
        free = max(self._pipe_free_ns[direction], start_ns) + nbytes * 1e9 / self.qpi_p2p_bytes_per_s
        self._pipe_free_ns[direction] = free
        return free + self.qpi_p2p_latency_ns

    # -- the DMA engine ---------------------------------------------------------------------------

    async def dma_read(self, addr, nbytes):
        """Read ``nbytes`` at bus address ``addr`` (memory read TLPs through the root complex);
        return the bytes, or ``None`` if a completion was UR/CA or none came in time."""
        self.reads += 1
        t0 = get_sim_time("ns")
        kind = self.target(addr, nbytes)
        try:
            data = await self.mem_read(addr, nbytes, timeout=self.read_timeout_ns,
                                       timeout_unit="ns")
        except Exception as error:          # cocotbext-pcie raises a bare Exception
            if str(error) not in ("Unsuccessful completion", "Timeout"):
                raise
            self.failed_reads += 1
            return None
        if kind == "qpi-memory":
            await _sleep(self.qpi_host_latency_ns)
        elif kind == "qpi-peer":
            await _sleep(self._pipe("rd", t0, nbytes) - get_sim_time("ns"))
        self.read_bytes += nbytes
        return bytes(data)

    async def dma_write(self, addr, data):
        """Write ``data`` at bus address ``addr`` (posted memory write TLPs); return, in ns,
        when the data is visible at its target (see the module docstring)."""
        data = bytes(data)
        self.writes += 1
        kind = self.target(addr, len(data))
        mps = 128 << self.pcie_cap.max_payload_size
        if kind == "qpi-memory":
            await _sleep(self.qpi_host_latency_ns)
        if kind == "qpi-peer":      # each TLP's worth crosses QPI, then goes on
            now = get_sim_time("ns")
            plan = [(lo, n, self._pipe("wr", now, n)) for lo, n in _tlps(addr, len(data), mps)]
            for lo, n, t in plan:
                await _sleep(t - get_sim_time("ns"))
                await self.mem_write(lo, data[lo - addr:lo - addr + n])
        else:
            await self.mem_write(addr, data)
        self.write_bytes += len(data)
        # the call returns when the last TLP is queued: it still waits for the one before it
        # on the wire, then crosses the link (and, to a device, the device's link)
        port = self.link_port
        tlp = min(len(data), mps) + 24
        hop = (2 * tlp * port.symbol_period + port.link_delay_steps / port.time_scale) * 1e9
        return get_sim_time("ns") + hop * (2 if kind.endswith("peer") else 1)


def _tlps(addr, length, mps):
    """``(address, bytes)`` of the memory writes cocotbext-pcie splits a write into."""
    while length > 0:
        n = min(length, mps - addr % 4, 0x1000 - (addr & 0xFFF))
        yield addr, n
        addr += n
        length -= n


async def _sleep(ns):
    if ns > 0:
        await Timer(get_sim_steps(ns, "ns", round_mode="round"), "step")


class HcaModel(Device):
    """A ConnectX-3 on a PCIe Gen3 x8 link: one :class:`HcaFunction`.

    Parameters
    ----------
    bar_size : int
        Bytes of BAR 0 (doorbells), a power of two of at least 4 KiB.
    qpi_p2p_bytes_per_s, qpi_p2p_latency_ns : float
        Pace of peer-to-peer accesses across QPI (``"qpi-peer"`` ranges), per direction.
    qpi_host_latency_ns : float
        Added to accesses of ``"qpi-memory"`` ranges.
    read_timeout_ns : float
        A read with no completion after this long returns ``None``.

    Members
    -------
    function : HcaFunction
    """

    def __init__(self, bar_size=1 << 20, **kwargs):
        self.function = HcaFunction(bar_size, **kwargs)
        super().__init__(self.function)
        self.upstream_port.max_link_speed = HCA_GEN
        self.upstream_port.max_link_width = HCA_WIDTH
        self.function.link_port = self.upstream_port

    async def dma_read(self, addr, nbytes):
        """See :meth:`HcaFunction.dma_read`."""
        return await self.function.dma_read(addr, nbytes)

    async def dma_write(self, addr, data):
        """See :meth:`HcaFunction.dma_write`."""
        return await self.function.dma_write(addr, data)


def attach_hca(host, hca):
    """Put ``hca`` (an :class:`HcaModel`) on a new Gen3 x8 root port of ``host``'s root
    complex, before enumeration and before simulation time advances; return the root port.

    If GPUs were attached (:func:`~.gpu.attach_gpu`), the root complex already routes peer to
    peer, and the HCA's port is added to the ports it decodes."""
    root_port = host.rc.make_port()
    port = root_port.downstream_port
    port.max_link_speed, port.max_link_width = HCA_GEN, HCA_WIDTH
    hca.connect(port)
    bridge = host.rc.upstream_bridge
    if hasattr(bridge, "root_ports"):
        bridge.root_ports.append(root_port)
    return root_port


async def enable_hca(host, hca, max_read_request_size=512):
    """After the host's enumeration: enable ``hca``'s memory space and bus mastering and set
    its max read request size (the root complex checks reads against its own).  Returns the
    enumerated device (``dev.bar_addr[0]``: the doorbell BAR)."""
    dev = host.rc.find_device(hca.function.pcie_id)
    await dev.enable_device()
    await dev.set_master()
    await dev.set_readrq(size_code(max_read_request_size))
    return dev
