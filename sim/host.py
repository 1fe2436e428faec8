"""Host side of a simulation: a cocotbext-pcie root complex on a Gen2 x8 link to a device model.

:class:`Host` builds a :class:`HostRootComplex`, links its root port to the device's upstream port
at Gen2 x8 (every TLP and DLLP costs its wire time), sets max payload size, max read request size
and read completion boundary, enumerates, and hands back the device's BAR windows.  Host memory
comes from ``rc.mem_pool.alloc_region`` (below 2 GiB, so DUT writes to it need 3-DW headers).

:class:`HostRootComplex` adds what the stock ``RootComplex`` lacks:

- every memory write and completion it receives is checked against the max payload size, every
  memory request against the 4 KiB rule and reads against the max read request size; failures
  land in ``errors`` (and raise ``AssertionError`` when ``strict``; the RC's receive task dies
  and the test fails);
- ``read_latency_ns`` delays the answer to each memory read served from host memory.  The read
  handler starts a task per read that sleeps, then runs the stock handler, so reads overlap and
  the latency does not serialise them; memory is read after the delay (a posted write arriving
  meanwhile is visible, which PCIe ordering allows).

Simplifications: one root port, one device, no IOMMU; the host's completions are split the stock
way (largest TLPs, or at every RCB with ``split_on_all_rcb``); link latency is the SimPorts'
fixed port delay (5 ns per side by default).
"""

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_steps
from cocotbext.pcie.core import RootComplex
from cocotbext.pcie.core.tlp import TlpType

from .hardip import describe, quiet_pcie_loggers

__all__ = ["Host", "HostRootComplex", "size_code"]

_MWR = (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
_MRD = (TlpType.MEM_READ, TlpType.MEM_READ_64)
_CPLD = (TlpType.CPL_DATA, TlpType.CPL_LOCKED_DATA)


def _quiet_enumeration(record):
    """Drop the warnings every bus scan produces for absent devices."""
    return not record.getMessage().startswith("Failed to route config type 0")


def size_code(nbytes):
    """Return the PCIe size code of ``nbytes`` (128 -> 0, 256 -> 1, ... 4096 -> 5)."""
    code = (nbytes // 128 - 1).bit_length()
    if nbytes not in (128, 256, 512, 1024, 2048, 4096):
        raise ValueError(f"{nbytes} is not a PCIe payload/read-request size")
    return code


class HostRootComplex(RootComplex):
    """``RootComplex`` that checks what it receives and can delay its memory reads.

    Parameters
    ----------
    read_latency_ns : float
        Extra time before each memory read from host memory is answered.
    strict : bool
        Raise ``AssertionError`` on the first check failure (always recorded in ``errors``).

    Members
    -------
    errors : list of str
        Check failures: ``host-mps``, ``host-4k``, ``host-mrrs`` followed by the TLP.
    mps, mrrs : int
        Limits checked, bytes (set by :class:`Host`).
    """

    def __init__(self, *args, read_latency_ns=0.0, strict=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_latency_ns = read_latency_ns
        self.strict = strict
        self.errors = []
        self.log.addFilter(_quiet_enumeration)
        self.mps = 128 << self.max_payload_size
        self.mrrs = 128 << self.max_read_request_size

    def _fail(self, rule, message, tlp):
        text = f"[{rule}] {message}: {describe(tlp)}"
        self.errors.append(text)
        self.log.error("%s", text)
        if self.strict:
            raise AssertionError(text)

    async def handle_tlp(self, tlp):
        ft = tlp.fmt_type
        if ft in _MWR or ft in _CPLD:
            if tlp.get_payload_size() > self.mps:
                self._fail("host-mps", f"payload {tlp.get_payload_size()} B > max payload size "
                           f"{self.mps} B", tlp)
        if ft in _MWR or ft in _MRD:
            if (tlp.address & 0xFFF) + 4 * tlp.length > 0x1000:
                self._fail("host-4k", "memory request crosses a 4 KiB boundary", tlp)
            if ft in _MRD and 4 * tlp.length > self.mrrs:
                self._fail("host-mrrs", f"read of {4 * tlp.length} B > max read request "
                           f"{self.mrrs} B", tlp)
        await super().handle_tlp(tlp)

    async def handle_mem_read_tlp(self, tlp):
        if self.read_latency_ns > 0:
            cocotb.start_soon(self._late_read(tlp))
        else:
            await super().handle_mem_read_tlp(tlp)

    async def _late_read(self, tlp):
        await Timer(get_sim_steps(self.read_latency_ns, "ns", round_mode="round"), "step")
        await super().handle_mem_read_tlp(tlp)


class Host:
    """A root complex with host memory, linked at Gen2 x8 to one device model.

    Parameters
    ----------
    device : cocotbext.pcie.core.Device
        The device model (e.g. :class:`~peach2.sim.hardip.HardIP`); its upstream port must be
        free.
    max_payload_size, max_read_request_size : int
        Bytes.  Enumeration gives the device ``min(max_payload_size, what it supports)``.
    read_completion_boundary : int
        64 or 128 bytes: where the host may split its completions.
    split_on_all_rcb : bool
        Split completions at every RCB (as many real hosts do) rather than into the largest
        TLPs the max payload size allows.
    read_latency_ns : float
        Extra latency of memory reads served from host memory.
    strict, quiet : bool
        Raise at the first check failure; set the cocotbext-pcie loggers to WARNING.

    Members
    -------
    rc : HostRootComplex
    root_port : cocotbext.pcie.core.bridge.RootPort
    dev : cocotbext.pcie.core.pci.PciDevice or None
        The device as enumerated (after :meth:`enumerate`).
    bars : list
        ``dev.bar_window`` (after :meth:`enumerate`), indexed by BAR number.
    """

    def __init__(self, device, *, max_payload_size=256, max_read_request_size=512,
                 read_completion_boundary=64, split_on_all_rcb=False, read_latency_ns=0.0,
                 strict=True, quiet=True):
        if read_completion_boundary not in (64, 128):
            raise ValueError("read completion boundary must be 64 or 128")
        if quiet:
            quiet_pcie_loggers()
        self.device = device
        self.max_payload_size = max_payload_size
        self.max_read_request_size = max_read_request_size
        rc = self.rc = HostRootComplex(read_latency_ns=read_latency_ns, strict=strict)
        rc.max_payload_size = size_code(max_payload_size)
        rc.max_read_request_size = size_code(max_read_request_size)
        rc.read_completion_boundary = read_completion_boundary == 128
        rc.split_on_all_rcb = split_on_all_rcb
        rc.mps, rc.mrrs = max_payload_size, max_read_request_size

        self.root_port = rc.make_port()
        port = self.root_port.downstream_port
        port.max_link_speed, port.max_link_width = 2, 8
        dport = device.upstream_port
        if dport.max_link_speed is None:
            dport.max_link_speed, dport.max_link_width = 2, 8
        device.connect(port)
        self.dev = None
        self.bars = []

    @property
    def errors(self):
        """Check failures recorded by the root complex."""
        return self.rc.errors

    @property
    def read_latency_ns(self):
        """Extra latency of host-memory reads (may be changed at any time)."""
        return self.rc.read_latency_ns

    @read_latency_ns.setter
    def read_latency_ns(self, value):
        self.rc.read_latency_ns = value

    async def enumerate(self):
        """Enumerate, enable memory space and bus mastering, set MRRS; return the BAR windows."""
        await self.rc.enumerate()
        self.dev = self.rc.find_device(self.device.functions[0].pcie_id)
        await self.dev.enable_device()
        await self.dev.set_master()
        await self.dev.set_readrq(size_code(self.max_read_request_size))
        self.bars = self.dev.bar_window
        return self.bars

    #: Host memory above 4 GiB (bus addresses that need 4-DW headers) starts here.
    HIGH_MEM_BASE = 1 << 36
    HIGH_MEM_SIZE = 1 << 32

    def alloc(self, size, *, above_4g=False):
        """Allocate ``size`` bytes of host memory; return ``(bus address, MemoryRegion)``.

        The region is aligned to its size (buddy allocator); ``region[a:b]`` reads and writes
        its bytes directly, without simulation time.  By default it comes from the root
        complex's pool below 2 GiB (3-DW headers); ``above_4g=True`` takes it from a pool at
        :attr:`HIGH_MEM_BASE`, so writes to it carry 4-DW headers as in the papers' 3.66 GB/s
        bound.
        """
        if above_4g:
            if getattr(self, "_high_pool", None) is None:
                self._high_pool = self.rc.mem_address_space.create_pool(
                    self.HIGH_MEM_BASE, self.HIGH_MEM_SIZE)
            region = self._high_pool.alloc_region(size)
        else:
            region = self.rc.mem_pool.alloc_region(size)
        return region.get_absolute_address(0), region

    def check(self):
        """Raise ``AssertionError`` if the root complex recorded any check failure."""
        if self.rc.errors:
            raise AssertionError(f"{len(self.rc.errors)} host check failure(s):\n"
                                 + "\n".join(self.rc.errors[:20]))
