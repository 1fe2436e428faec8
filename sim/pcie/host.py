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
- ``read_latency_ns`` delays the answer to each memory read served from host memory, plus a
  seeded random extra of up to ``read_jitter_ns`` per read, so reads of different tags are
  answered out of order (``completion_gap_ns`` adds random time between the completions of
  one read, so those of different reads interleave).  The read handler starts a task per read
  that sleeps, then answers, so reads overlap and the latency does not serialise them; memory
  is read after the delay (a posted write arriving meanwhile is visible, which PCIe ordering
  allows).
- reads are tracked per (requester, tag): a tag reused while its read is outstanding
  (``host-tag-reuse``) and a tag above 31 without the Extended Tag Field enabled
  (``host-ext-tag``) are check failures; ``max_outstanding`` records the most reads and bytes
  outstanding at once (a DMA must stay within its tags and completion buffer).
- faults for DMA tests: :meth:`HostRootComplex.fail_reads` makes reads of an address range
  answer UR or CA; :meth:`HostRootComplex.add_completion_fault` drops, poisons or corrupts the
  completions of chosen reads (or ``on_completion`` edits any completion);
  :meth:`HostRootComplex.inject_completion` sends a completion nobody asked for.

Completions are split as the stock root complex splits them (:func:`completion_plan`: the
largest TLPs the max payload size allows, cut at an RCB, or at every RCB with
``split_on_all_rcb``; RCB 64 or 128 bytes).

Simplifications: one root port, one device, no IOMMU; link latency is the SimPorts' fixed port
delay (5 ns per side by default).
"""

import random

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_steps
from cocotbext.pcie.core import RootComplex
from cocotbext.pcie.core.caps import PciCapId
from cocotbext.pcie.core.tlp import CplStatus, Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.hardip import describe, quiet_pcie_loggers

__all__ = ["Host", "HostRootComplex", "size_code", "completion_plan", "COMPLETION_FAULTS",
           "store_tlps"]

#: What :meth:`HostRootComplex.add_completion_fault` can do to the completions of a read:
#: ``drop`` every one (the requester times out), ``drop_last`` only the last (partial data),
#: ``poison`` the first (EP set), ``corrupt`` the first (byte count 64 too large, so its data
#: falls outside the request), ``ur`` / ``ca`` answer with that status instead of data.
COMPLETION_FAULTS = ("drop", "drop_last", "poison", "corrupt", "ur", "ca")

_PCIE_CAP = PciCapId.EXP
_MWR = (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
_MRD = (TlpType.MEM_READ, TlpType.MEM_READ_64)
_CPLD = (TlpType.CPL_DATA, TlpType.CPL_LOCKED_DATA)


def _quiet_enumeration(record):
    """Drop the warnings every bus scan produces for absent devices."""
    return not record.getMessage().startswith("Failed to route config type 0")


def completion_plan(address, byte_length, dw_length, rcb, mps, split_on_all_rcb):
    """Return ``[(dw_offset, dw_count, byte_count, lower_address)]`` of a read's completions.

    The stock cocotbext-pcie root complex's split, as a function: ``address`` is the first byte
    read (DW address + first-BE offset), ``byte_length`` the bytes the byte enables select,
    ``dw_length`` the request's length field; completions are the largest the max payload size
    ``mps`` allows, each but the last ending at an RCB boundary, or one per RCB with
    ``split_on_all_rcb``.
    """
    out = []
    m = n = 0
    max_dw = mps // 4
    rcb_mask = (rcb - 1) & 0xFC
    while m < dw_length:
        k = dw_length - m
        if split_on_all_rcb:
            k = min(k, (rcb - (address & rcb_mask)) >> 2)
        elif k > max_dw:
            k = max_dw - ((address & rcb_mask) >> 2)
        out.append((m, k, byte_length - n, address & 0x7F))
        m += k
        n += k * 4 - (address & 3)
        address += k * 4 - (address & 3)
    return out


def size_code(nbytes):
    """Return the PCIe size code of ``nbytes`` (128 -> 0, 256 -> 1, ... 4096 -> 5)."""
    code = (nbytes // 128 - 1).bit_length()
    if nbytes not in (128, 256, 512, 1024, 2048, 4096):
        raise ValueError(f"{nbytes} is not a PCIe payload/read-request size")
    return code


class HostRootComplex(RootComplex):
    """``RootComplex`` that checks what it receives, delays its reads and can fault them.

    Parameters
    ----------
    read_latency_ns : float
        Extra time before each memory read from host memory is answered.
    read_jitter_ns : float
        Up to this much more per read, drawn from ``seed``: completions come back out of order
        across tags.
    completion_gap_ns : float
        Up to this much random time between the completions of one read.
    seed : int
        Seeds the jitter and gaps.
    strict : bool
        Raise ``AssertionError`` on the first check failure (always recorded in ``errors``).

    Members
    -------
    errors : list of str
        Check failures: ``host-mps``, ``host-4k``, ``host-mrrs``, ``host-tag-reuse``,
        ``host-ext-tag`` followed by the TLP.
    mps, mrrs : int
        Limits checked, bytes (set by :class:`Host`).
    ext_tags : bool or None
        Whether the device may use 8-bit tags (None: not checked; :meth:`Host.enumerate` sets
        it from the device control register).
    outstanding : dict
        ``{(requester, tag): bytes}`` of reads received and not fully answered.
    max_outstanding : tuple of int
        Most reads and most bytes outstanding at once (over all requesters).
    reads : int
        Memory reads received; each read TLP gets ``host_seq``, its number in arrival order.
    on_completion : callable or None
        ``on_completion(read, cpl, index) -> Tlp or None``: called for every completion of
        host memory reads before it is sent; return the completion (changed or not) or None
        to drop it.
    """

    def __init__(self, *args, read_latency_ns=0.0, read_jitter_ns=0.0, completion_gap_ns=0.0,
                 seed=0, strict=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_latency_ns = read_latency_ns
        self.read_jitter_ns = read_jitter_ns
        self.completion_gap_ns = completion_gap_ns
        self.rng = random.Random(seed)
        self.strict = strict
        self.errors = []
        self.log.addFilter(_quiet_enumeration)
        self.mps = 128 << self.max_payload_size
        self.mrrs = 128 << self.max_read_request_size
        self.ext_tags = None
        self.outstanding = {}
        self.max_outstanding = (0, 0)
        self.reads = 0
        self.on_completion = None
        self._failing = []      # (lo, hi, status): reads touching [lo, hi) answer status
        self._faults = []       # [kind, match, times]

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

    # -- faults ---------------------------------------------------------------------------

    def fail_reads(self, lo, hi, status="UR"):
        """Answer every read touching bus addresses ``[lo, hi)`` with ``status`` (UR or CA)."""
        if status not in ("UR", "CA"):
            raise ValueError(f"status must be 'UR' or 'CA', not {status!r}")
        self._failing.append((lo, hi, status))

    def clear_faults(self):
        """Forget :meth:`fail_reads` ranges and pending :meth:`add_completion_fault` s."""
        self._failing.clear()
        self._faults.clear()

    def add_completion_fault(self, kind, match=None, times=1):
        """Apply ``kind`` (one of :data:`COMPLETION_FAULTS`) to the next ``times`` reads.

        ``match(read_tlp) -> bool`` picks the reads (default: any read).  A dropped read is
        forgotten by the tag tracker at once (its requester will time out and may reuse the
        tag).
        """
        if kind not in COMPLETION_FAULTS:
            raise ValueError(f"fault must be one of {COMPLETION_FAULTS}, not {kind!r}")
        self._faults.append([kind, match, times])

    @property
    def pending_faults(self):
        """Completion faults not yet applied (``times`` left)."""
        return sum(f[2] for f in self._faults)

    async def inject_completion(self, requester_id, tag, nbytes=4, status=CplStatus.SC,
                                lower_address=0):
        """Send a completion nobody asked for (a bogus tag), with ``nbytes`` of data."""
        cpl = Tlp()
        cpl.fmt_type = TlpType.CPL_DATA if nbytes else TlpType.CPL
        cpl.requester_id = requester_id
        cpl.completer_id = PcieId(0, 0, 0)
        cpl.tag, cpl.status = tag, status
        cpl.lower_address = lower_address & 0x7F
        cpl.byte_count = max(nbytes, 1) if nbytes else 4
        if nbytes:
            cpl.set_data(bytes((lower_address + i) & 0xFF for i in range((nbytes + 3) // 4 * 4)))
        await self.send(cpl)

    # -- reads ----------------------------------------------------------------------------

    def _take_fault(self, tlp):
        for f in self._faults:
            kind, match, times = f
            if times > 0 and (match is None or match(tlp)):
                f[2] -= 1
                if f[2] == 0:
                    self._faults.remove(f)
                return kind
        return None

    def _track(self, tlp):
        key = (tlp.requester_id, tlp.tag)
        tlp.host_seq = self.reads
        self.reads += 1
        if key in self.outstanding:
            self._fail("host-tag-reuse", f"tag {tlp.tag} reused while its read is outstanding",
                       tlp)
        if self.ext_tags is False and tlp.tag >= 32:
            self._fail("host-ext-tag", f"tag {tlp.tag} > 31 without Extended Tag Field", tlp)
        self.outstanding[key] = 4 * tlp.length
        reads, nbytes = len(self.outstanding), sum(self.outstanding.values())
        self.max_outstanding = (max(self.max_outstanding[0], reads),
                                max(self.max_outstanding[1], nbytes))
        return key

    async def _sleep(self, ns):
        if ns > 0:
            await Timer(get_sim_steps(ns, "ns", round_mode="round"), "step")

    async def handle_mem_read_tlp(self, tlp):
        key = self._track(tlp)
        delay = self.read_latency_ns
        if self.read_jitter_ns > 0:
            delay += self.rng.uniform(0, self.read_jitter_ns)
        if delay > 0 or self.completion_gap_ns > 0:
            cocotb.start_soon(self._answer(tlp, key, delay))
        else:
            await self._answer(tlp, key, 0)

    async def _answer(self, tlp, key, delay):
        await self._sleep(delay)
        fault = self._take_fault(tlp)
        lo, hi = tlp.address, tlp.address + 4 * tlp.length
        status = next((st for a, b, st in self._failing if a < hi and lo < b), None)
        if fault in ("ur", "ca"):
            status = fault.upper()
        if status is None and not self.mem_address_space.find_regions(lo, hi - lo):
            status = "UR"
        if status is not None:
            self.outstanding.pop(key, None)
            make = (Tlp.create_ur_completion_for_tlp if status == "UR"
                    else Tlp.create_ca_completion_for_tlp)
            await self.send(make(tlp, PcieId(0, 0, 0)))
            return
        if fault == "drop":
            self.outstanding.pop(key, None)
            return
        data = await self.mem_address_space.read(lo, hi - lo)
        rcb = 128 if self.read_completion_boundary else 64
        plan = completion_plan(tlp.address + tlp.get_first_be_offset(),
                               tlp.get_be_byte_count(), tlp.length, rcb,
                               128 << self.max_payload_size, self.split_on_all_rcb)
        for i, (m, k, byte_count, lower_address) in enumerate(plan):
            last = i == len(plan) - 1
            cpl = Tlp.create_completion_data_for_tlp(tlp, PcieId(0, 0, 0))
            cpl.byte_count, cpl.lower_address = byte_count, lower_address
            cpl.set_data(data[4 * m:4 * (m + k)])
            if i == 0 and fault == "poison":
                cpl.ep = 1
            if i == 0 and fault == "corrupt":
                cpl.byte_count = byte_count + 64
            if last:
                self.outstanding.pop(key, None)
            if last and fault == "drop_last":
                continue
            if self.on_completion is not None:
                cpl = self.on_completion(tlp, cpl, i)
                if cpl is None:
                    continue
            if i and self.completion_gap_ns > 0:
                await self._sleep(self.rng.uniform(0, self.completion_gap_ns))
            await self.send(cpl)


class Host:
    """A root complex with host memory, linked at Gen2 x8 to one device model.

    Parameters
    ----------
    device : cocotbext.pcie.core.Device
        The device model (e.g. :class:`~peach2.sim.hardip.model.HardIPModel`); its upstream port must be
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
    read_jitter_ns, completion_gap_ns, seed :
        Random extra latency per read and between the completions of a read (see
        :class:`HostRootComplex`); :meth:`configure_reads` changes them later.
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
                 read_jitter_ns=0.0, completion_gap_ns=0.0, seed=0, strict=True, quiet=True):
        if read_completion_boundary not in (64, 128):
            raise ValueError("read completion boundary must be 64 or 128")
        if quiet:
            quiet_pcie_loggers()
        self.device = device
        self.max_payload_size = max_payload_size
        self.max_read_request_size = max_read_request_size
        rc = self.rc = HostRootComplex(read_latency_ns=read_latency_ns,
                                       read_jitter_ns=read_jitter_ns,
                                       completion_gap_ns=completion_gap_ns, seed=seed,
                                       strict=strict)
        rc.max_payload_size = size_code(max_payload_size)
        rc.max_read_request_size = size_code(max_read_request_size)
        rc.read_completion_boundary = read_completion_boundary == 128
        rc.split_on_all_rcb = split_on_all_rcb
        rc.mps, rc.mrrs = max_payload_size, max_read_request_size

        dport = device.upstream_port
        if dport.max_link_speed is None:
            dport.max_link_speed, dport.max_link_width = 2, 8
        self.root_port = self.add_root_port(device, 8)
        self.dev = None
        self.bars = []

    def add_root_port(self, device, width):
        """Connect ``device`` to a new Gen2 x``width`` root port of this host's root complex
        (before :meth:`enumerate`); return the root port."""
        root_port = self.rc.make_port()
        port = root_port.downstream_port
        port.max_link_speed, port.max_link_width = 2, width
        device.connect(port)
        return root_port

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

    def configure_reads(self, *, latency_ns=None, jitter_ns=None, gap_ns=None, rcb=None,
                        split_on_all_rcb=None, seed=None):
        """Change how host-memory reads are answered (None leaves a setting as it is).

        ``latency_ns``/``jitter_ns``/``gap_ns``: see :class:`HostRootComplex`; ``rcb`` 64 or
        128 bytes; ``split_on_all_rcb``: one completion per RCB; ``seed`` reseeds the jitter.
        """
        rc = self.rc
        if latency_ns is not None:
            rc.read_latency_ns = latency_ns
        if jitter_ns is not None:
            rc.read_jitter_ns = jitter_ns
        if gap_ns is not None:
            rc.completion_gap_ns = gap_ns
        if rcb is not None:
            if rcb not in (64, 128):
                raise ValueError("read completion boundary must be 64 or 128")
            rc.read_completion_boundary = rcb == 128
        if split_on_all_rcb is not None:
            rc.split_on_all_rcb = split_on_all_rcb
        if seed is not None:
            rc.rng.seed(seed)

    async def enumerate(self):
        """Enumerate, enable memory space and bus mastering, set MRRS; return the BAR windows.

        Also records whether the device may use 8-bit tags (Extended Tag Field Enable), which
        the root complex then checks.
        """
        await self.rc.enumerate()
        self.dev = self.rc.find_device(self.device.functions[0].pcie_id)
        await self.dev.enable_device()
        await self.dev.set_master()
        await self.dev.set_readrq(size_code(self.max_read_request_size))
        devctl = await self.dev.capability_read_dword(_PCIE_CAP, 0x8)
        self.rc.ext_tags = bool(devctl & 1 << 8)
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

    def reserve(self, address, size):
        """Keep bus addresses ``[address, address + size)`` of host memory from ever being
        allocated (a peer device's BAR is placed there: :func:`peach2.sim.pcie.gpu.place_gpu`).

        ``size`` is a power of two and ``address`` aligned to it, inside the pool below 2 GiB or
        the one above 4 GiB (:meth:`alloc`).  Raises ``ValueError`` if part of it is allocated.
        """
        high = getattr(self, "_high_pool", None)
        pools = [self.rc.mem_pool] + ([high] if high is not None else [])
        pool = next((p for p in pools if p.base <= address and address + size <= p.base
                     + p.size), None)
        if pool is None or size & (size - 1) or address % size:
            raise ValueError(f"cannot reserve {size:#x} bytes at {address:#x}: not an aligned "
                             f"power of two inside a host memory pool")
        taken, want = [], address - pool.base
        try:                # the buddy allocator hands out aligned blocks: take until it is ours
            while (block := pool.allocator.alloc(size)) != want:
                taken.append(block)
        except Exception as error:      # cocotbext-axi raises a bare Exception when full
            raise ValueError(f"{size:#x} bytes at {address:#x} are already allocated") \
                from error
        finally:
            for block in taken:
                pool.allocator.free(block)

    def check(self):
        """Raise ``AssertionError`` if the root complex recorded any check failure."""
        if self.rc.errors:
            raise AssertionError(f"{len(self.rc.errors)} host check failure(s):\n"
                                 + "\n".join(self.rc.errors[:20]))


def store_tlps(address, length, mps=256):
    """Return ``[(address, length)]`` of the MWr TLPs a root complex splits a store into.

    The reference of cocotbext-pcie's write splitting: at most ``mps`` bytes counted from the
    DW holding the first byte, never across a 4 KiB boundary.
    """
    out = []
    while length > 0:
        n = min(length, mps - address % 4, 0x1000 - (address & 0xFFF))
        out.append((address, n))
        address += n
        length -= n
    return out
