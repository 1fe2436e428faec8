"""Amaranth-simulator harness for the register block.

::

      Tlp (cocotbext-pcie)                                      Tlp
    ──> tlp_to_beats ──> [idle gaps] ──> i_req ┌─────┐ o_cpl ──> [backpressure] ──> beats_to_tlp
                                                │ CSR │
    count_inc, port_status, pcie_id ──────────> └─────┘ ──> rw ports, msi_req, bad_req (watched)

:class:`CsrHarness` owns the simulator, the idle and backpressure generators (seeded), a background
receiver of completions and a watcher of ``bad_req``/``msi_req``.  :class:`SimBar` gives it the
async ``read``/``write`` of a cocotbext-pcie ``bar_window``, so :class:`peach2.sim.driver.driver.Driver`
runs on the gateware unchanged.  The reference it is checked against is
:class:`peach2.sim.reference.registers.RegModel`.
"""

import dataclasses
import itertools
import random

from amaranth.hdl import Value
from amaranth.sim import Simulator
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.reference import Beat, beats_to_tlp, tlp_to_beats

__all__ = ["CsrHarness", "SimBar", "pauses", "expected_byte_count",
           "expected_lower_address", "make_read", "make_write"]

CLOCK = 4e-9        # 250 MHz


def pauses(kind, seed):
    """Return an endless iterator of bools, True meaning "pause this cycle".

    ``"none"`` never pauses, ``"fixed"`` repeats a fixed pattern, ``"random"`` pauses 40 % of
    cycles from ``random.Random(seed)``.
    """
    if kind == "none":
        return itertools.repeat(False)
    if kind == "fixed":
        return itertools.cycle([False, True, False, False, True, True, False])
    if kind == "random":
        rng = random.Random(seed)
        return iter(lambda: rng.random() < 0.4, None)
    raise ValueError(kind)


# -- PCIe rules, written from the specification (not from the gateware) --------------------------

def _first_offset(be):
    for i in range(4):
        if be >> i & 1:
            return i
    return 0


def _last_pad(be):
    for i in range(4):
        if be >> (3 - i) & 1:
            return i
    return 0


def expected_byte_count(length, first_be, last_be):
    """Byte count of the completion of a successful read (PCIe base spec, 2.3.1.1)."""
    if length == 1:
        if first_be == 0:
            return 1
        return 4 - _first_offset(first_be) - _last_pad(first_be)
    return 4 * length - _first_offset(first_be) - _last_pad(last_be)


def expected_lower_address(address, first_be):
    """Lower address of the completion: address of the first enabled byte, bits [6:0]."""
    return (address & 0x7c) | _first_offset(first_be)


def make_read(address, length=1, first_be=0xf, last_be=None, *, requester_id=0x0100, tag=0,
              tc=0, attr=0, force_64=False):
    """Return an MRd ``Tlp`` of ``length`` DWs (4-DW header above 4 GiB or with force_64)."""
    tlp = Tlp()
    tlp.fmt_type = (TlpType.MEM_READ_64 if address >> 32 or force_64 else TlpType.MEM_READ)
    tlp.address = address & ~3
    tlp.length = length
    tlp.first_be = first_be
    tlp.last_be = (0 if length == 1 else 0xf) if last_be is None else last_be
    tlp.requester_id = PcieId.from_int(requester_id)
    tlp.tag, tlp.tc, tlp.attr = tag, tc, attr
    return tlp


def make_write(address, dws, first_be=0xf, last_be=None, *, force_64=False, ep=0):
    """Return an MWr ``Tlp`` carrying the 32-bit values ``dws``."""
    tlp = Tlp()
    tlp.fmt_type = (TlpType.MEM_WRITE_64 if address >> 32 or force_64 else TlpType.MEM_WRITE)
    tlp.address = address & ~3
    tlp.first_be = first_be
    tlp.last_be = (0 if len(dws) == 1 else 0xf) if last_be is None else last_be
    tlp.requester_id = PcieId.from_int(0x0100)
    tlp.ep = ep
    tlp.data = b"".join(d.to_bytes(4, "little") for d in dws)
    tlp.length = len(dws)
    return tlp


# -- the harness --------------------------------------------------------------------------------

class CsrHarness:
    """Simulator, stream drivers and watchers around one :class:`~peach2.csr.CSR`.

    Parameters
    ----------
    dut : CSR
    seed : int
        Seed of the idle and backpressure generators (and of the tests' own choices).
    idle, backpressure : str
        ``"none"``, ``"fixed"`` or ``"random"``: gaps before each ``i_req`` beat, cycles with
        ``o_cpl.ready`` low.
    """

    #: Harnesses :meth:`reused` built in this process, by design.
    _BUILT = {}

    def __init__(self, dut, *, seed=1, idle="none", backpressure="none"):
        self.dut = dut
        self.sim = Simulator(dut)
        self.sim.add_clock(CLOCK)
        self._start(seed, idle, backpressure)
        self._main, self._ran = None, False
        # View attribute lookups are slow in the simulator loop: resolve the signals once.
        def flat(stream):
            p = stream.payload
            return [Value.cast(x) for x in (p.hdr, p.data, p.dw_en, p.first, p.last, p.err,
                                             p.bar)]
        self._req = flat(dut.i_req)
        self._cpl = [dut.o_cpl.valid] + flat(dut.o_cpl)
        self.sim.add_testbench(self._receive, background=True)
        self.sim.add_testbench(self._watch, background=True)
        self.sim.add_testbench(self._dispatch)

    @classmethod
    def reused(cls, make, *args, seed=1, idle="none", backpressure="none", **kwargs):
        """The harness around ``make(*args, **kwargs)`` that this process built before, or a new
        one: building the simulator of a register block takes about 4 s and most tests use the
        same design.  Its next :meth:`run` starts from reset (every signal, memory and process
        back to its initial state) with these seeds and pauses, as a new harness's would."""
        key = (make, args, tuple(sorted(kwargs.items())))
        harness = cls._BUILT.get(key)
        if harness is None:
            harness = cls._BUILT[key] = cls(make(*args, **kwargs), seed=seed, idle=idle,
                                            backpressure=backpressure)
        else:
            harness._start(seed, idle, backpressure)
        return harness

    def _start(self, seed, idle, backpressure):
        self.seed = seed
        self.rng = random.Random(seed)
        self.set_idle_generator(pauses(idle, seed * 2 + 1))
        self.set_backpressure_generator(pauses(backpressure, seed * 2 + 2))
        self.completions = []       # Tlp, in arrival order
        self.cpl_beats = []         # raw Beat lists
        self.bad_count = 0
        self.msi = []               # vectors seen with msi_req
        self.cycle = 0

    async def _dispatch(self, ctx):
        await self._main(ctx, self)

    def set_idle_generator(self, gen):
        self._idle = gen

    def set_backpressure_generator(self, gen):
        self._backpressure = gen

    def where(self):
        """Text for assertion messages: the seed that replays the failure."""
        return f"(seed {self.seed}, cycle {self.cycle})"

    def run(self, testbench, *, vcd=None):
        """Run ``async testbench(ctx, harness)`` to completion, from reset (a second run of the
        same harness starts from reset again)."""
        if self._ran:
            self.sim.reset()
        self._ran, self._main = True, testbench
        if vcd:
            with self.sim.write_vcd(vcd):
                self.sim.run()
        else:
            self.sim.run()

    async def _watch(self, ctx):
        dut = self.dut
        async for _, _, bad, msi_req, msi_num in ctx.tick().sample(dut.bad_req, dut.msi_req,
                                                                dut.msi_num):
            self.cycle += 1
            self.bad_count += bad
            if msi_req:
                self.msi.append(msi_num)

    async def _receive(self, ctx):
        dut = self.dut
        beats = []
        while True:
            ready = not next(self._backpressure)
            ctx.set(dut.o_cpl.ready, ready)
            _, _, valid, hdr, data, dw_en, first, last, err, bar = await ctx.tick().sample(
                *self._cpl)
            if ready and valid:
                beats.append(Beat(hdr, data, dw_en, first, last, err, bar))
                if last:
                    self.cpl_beats.append(beats)
                    self.completions.append(beats_to_tlp(beats))
                    beats = []

    async def send(self, ctx, tlp, *, err=False, bar=0b1):
        """Send ``tlp`` into ``i_req`` (``err`` ends it with err set), honouring idle gaps."""
        beats = [dataclasses.replace(b, err=int(err and b.last)) if err else b
                 for b in tlp_to_beats(tlp, bar=bar)]
        await self.send_beats(ctx, beats, gaps=True)

    async def send_beats(self, ctx, beats, *, gaps=True):
        """Send :class:`Beat` objects as they are (also malformed ones)."""
        dut = self.dut
        for b in beats:
            while gaps and next(self._idle):
                await ctx.tick()
            ctx.set(dut.i_req.valid, 1)
            for sig, value in zip(self._req, (b.hdr, b.data, b.dw_en, b.first, b.last, b.err,
                                              b.bar)):
                ctx.set(sig, value)
            await ctx.tick().until(dut.i_req.ready)
            ctx.set(dut.i_req.valid, 0)

    async def wait_completions(self, ctx, n, timeout=2000):
        """Wait until ``n`` completions have arrived in total; return them."""
        for _ in range(timeout):
            if len(self.completions) >= n:
                return self.completions[:n]
            await ctx.tick()
        raise AssertionError(f"{len(self.completions)} completions, expected {n} "
                             f"{self.where()}")

    async def settle(self, ctx, cycles=12):
        """Let the block finish what it took (writes land, strobes show)."""
        await ctx.tick().repeat(cycles)

    async def read(self, ctx, tlp):
        """Send a read and return its completion (``Tlp``)."""
        n = len(self.completions)
        await self.send(ctx, tlp)
        return (await self.wait_completions(ctx, n + 1))[n]


class SimBar:
    """A BAR-window-like object over :class:`CsrHarness`: async ``read``/``write`` as cocotbext-pcie.

    Reads split at 8 bytes (the block serves 1- and 2-DW reads); writes are sent as one MWr
    (split only at the 4 KiB boundary).  A completion that is not SC raises ``IOError``.
    """

    def __init__(self, harness, ctx, *, requester_id=0x0100):
        self.harness = harness
        self.ctx = ctx
        self.requester_id = requester_id
        self._tag = 0

    async def read(self, addr, length):
        out = bytearray()
        while length > 0:
            n = min(length, 8 - addr % 4, 0x1000 - addr % 0x1000)    # at most 2 DWs
            tlp = Tlp()
            tlp.fmt_type = TlpType.MEM_READ
            tlp.requester_id = PcieId.from_int(self.requester_id)
            tlp.tag = self._tag
            self._tag = (self._tag + 1) % 256
            tlp.set_addr_be(addr, n)
            cpl = await self.harness.read(self.ctx, tlp)
            if cpl.status != 0 or cpl.tag != tlp.tag:
                raise IOError(f"read {addr:#x}+{n}: {cpl!r} {self.harness.where()}")
            la = cpl.lower_address & 3
            out += bytes(cpl.data)[la:la + cpl.byte_count]
            addr += n
            length -= n
        return bytes(out)

    async def write(self, addr, data):
        data = bytes(data)
        while data:
            n = min(len(data), 0x1000 - addr % 0x1000)
            tlp = Tlp()
            tlp.fmt_type = TlpType.MEM_WRITE
            tlp.requester_id = PcieId.from_int(self.requester_id)
            tlp.set_addr_be_data(addr, data[:n])
            await self.harness.send(self.ctx, tlp)
            addr += n
            data = data[n:]
