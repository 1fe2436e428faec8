"""Bus-functional model of the Stratix IV GX hard IP for PCI Express (Gen2 x8, 128-bit Avalon-ST).

The model is a cocotbext-pcie :class:`~cocotbext.pcie.core.Device` (shaped like
``cocotbext.pcie.intel.s10.S10PcieDevice``): its link side is a cocotbext-pcie ``SimPort`` (wire
time, ACK/NAK, flow control), its application side drives and checks the IP Compiler for PCI
Express pins ``{prefix}rx_st_*`` / ``{prefix}tx_st_*`` of the DUT, one beat per 250 MHz cycle.

Framing (beats <-> TLP, both directions, brief section 3) lives in :mod:`peach2.sim.avalon_codec`;
its public names (:func:`tlp_to_avalon_beats`, :func:`avalon_beats_to_tlp`, :class:`AvalonBeat`,
:class:`FramingError`, :func:`damage`, ...) stay importable from here.

Simplifications versus the real hard IP
---------------------------------------
- No link training, LTSSM, power management, ``tl_cfg_*``, MSI pins, ``ko_cpl_spc_vc0`` or
  ``cpl_err``: the link is up from time zero; config space lives in the model and is never
  passed to the DUT.  The DUT does not learn its bus number: read :attr:`HardIPModel.pcie_id` after
  enumeration and give it to the DUT by other means.
- ``rx_st_be`` is 0xF per payload DW lane, except the first/last payload DW of memory and I/O
  requests, which carry ``first_be``/``last_be``; header and pad lanes are 0.
- ``rx_st_mask``: at most ``mask_slack`` non-posted requests still start after the model sees
  mask high (the real core: up to about 10); posted requests and completions pass held-back
  non-posted requests (legal PCIe ordering).
- ``tx_cred[35:0]`` (PH [2:0], PD [14:3], NPH [17:15], NPD [20:18], CPLH [23:21], CPLD [35:24],
  saturating; layout as used by Altera-era user designs, not checked against the handbook) is
  refreshed every ``cred_update_cycles`` cycles from the link port's credit state.
- ``tx_st_ready`` falls when the backpressure generator says so or when ``tx_buffer_tlps`` TLPs
  wait for the link; the link side waits for flow-control credits, so a partner short of
  credits fills that buffer and drops ready.  The limit is soft: a TLP in flight completes.
- ``tx_st_err`` on any beat of a packet nullifies it (counted in ``nullified``); the beat count
  of a nullified packet is not checked.
- RX flow-control credits are returned to the link when the TLP's EOP beat reaches the DUT, so
  the DUT's backpressure reaches the link partner.  Completions have infinite credits (as an
  endpoint advertises); ``cpl_space`` optionally checks the DUT reserved room for them.
"""

import logging
import random
from collections import deque
from functools import partial

import cocotb
from cocotb.triggers import Event, First, Timer, ValueChange
from cocotb.utils import get_sim_steps, get_sim_time
from cocotbext.pcie.core import Device, Endpoint
from cocotbext.pcie.core.caps import MsiCapability
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from .avalon_codec import (CPL, DAMAGE, IO_REQ, MEM_REQ, AvalonBeat, FramingError,
                           avalon_beats_to_tlp, damage, describe, payload_offset,
                           tlp_to_avalon_beats)
from .hardip_tx_checker import TxChecker, Violation, tlp_problems
from .ticker import EdgeTicker
from .tlpstream import bit_value

__all__ = ["AvalonBeat", "FramingError", "Violation", "HardIPModel", "HardIPFunction", "DAMAGE",
           "damage", "payload_offset", "tlp_to_avalon_beats", "avalon_beats_to_tlp", "describe",
           "quiet_pcie_loggers", "edge_shows_update"]


def edge_shows_update(hdl_clock):
    """Whether a ``RisingEdge`` callback sees the registers after that edge's update.

    Icarus shows the values from before the edge, and so does Verilator when cocotb drives the
    clock (a :class:`cocotb.clock.Clock`: its write wakes the callbacks before the model is
    evaluated).  Verilator with the clock made inside the HDL (``hdl_clock``: an ``always #2``
    wrapper built with ``--timing``, as the sub-cluster top has) evaluates the edge first and
    shows the values after it.
    """
    return bool(hdl_clock) and "verilator" in cocotb.SIM_NAME.lower()


def quiet_pcie_loggers(level=logging.WARNING):
    """Set the cocotbext-pcie loggers (``cocotb.pcie.*``) to ``level``."""
    logging.getLogger("cocotb.pcie").setLevel(level)


class HardIPFunction(Endpoint):
    """Endpoint function of the model: type-0 config space, PM, PCIe and (optional) MSI."""
    def __init__(self, *args, msi=True, **kwargs):
        super().__init__(*args, **kwargs)
        if msi:
            self.msi_cap = MsiCapability()
            self.msi_cap.msi_64bit_address_capable = 1
            self.register_capability(self.msi_cap)

    def match_bar(self, addr, io=False):
        """Return ``(bar, offset)`` of the BAR ``addr`` hits, or None.

        cocotbext-pcie 0.2.16 skips a 64-bit BAR whose low mask word is zero, i.e. every BAR of
        4 GiB or more; the hard IP has no such limit (the papers' TCA window is 512 GiB), so
        the two halves are joined before deciding whether the BAR is implemented.
        """
        bar = 0
        while bar < len(self.bar):
            index, value, mask = bar, self.bar[bar], self.bar_mask[bar]
            bar += 1
            if value & 1:
                if io and mask and (addr ^ value) & mask == 0:
                    return index, addr & ~mask
                continue
            if value & 4 and bar < len(self.bar):
                value |= self.bar[bar] << 32
                mask |= self.bar_mask[bar] << 32
                bar += 1
            if not io and mask and (addr ^ value) & mask == 0:
                return index, addr & ~mask
        return None


class _Out:
    """An output pin that is written only when its value changes (GPI writes are the cost).

    ``direct`` writes go straight to the simulator (a GPI deposit) instead of being queued by
    cocotb for the time step's ReadWrite phase.  That is only right where the model writes in
    callbacks that run after the edge has been evaluated -- Verilator with the clock in the
    HDL (:func:`edge_shows_update`): the design reads the pins at the next edge either way,
    and Verilator evaluates again before leaving the time step.  On Icarus a deposit made in an
    edge callback can reach the flops of that same edge, so there writes stay queued.
    """
    __slots__ = ("sig", "val", "_put")

    def __init__(self, sig, val=0, direct=False):
        self.sig, self.val, self._put = sig, val, None
        if sig is not None:
            sig.value = val  # not Immediate(): a no-delay write breaks Icarus nets
            self._put = _deposit(sig) if direct else partial(setattr, sig, "value")

    def set(self, val):
        if val != self.val and self._put is not None:
            self._put(val)
        self.val = val


def _deposit(sig):
    """Return a function that writes an integer to ``sig`` now, as a GPI deposit (action 0)."""
    handle, width = sig._handle, len(sig)
    if width <= 32:
        return lambda val: handle.set_signal_val_int(0, val)
    text = f"0{width}b"
    return lambda val: handle.set_signal_val_binstr(0, format(val, text))


class HardIPModel(Device):
    """Stratix IV GX hard IP for PCI Express, endpoint, Gen2 x8, 128-bit Avalon-ST, as a model.

    Parameters
    ----------
    dut : cocotb handle
        Top level holding the ``{prefix}rx_st_*`` / ``{prefix}tx_st_*`` / ``{prefix}tx_cred`` pins.
    clk : cocotb handle, optional
        The 250 MHz application clock, started by the testbench (default ``dut.clk``).
    prefix : str
        Pin name prefix ("" for a single-port top, "n_", "e_", ... later).
    rst : cocotb handle, optional
        Active-high reset (default ``dut.rst`` when present): the model idles while it is high.
    bars : sequence of (size, is_64bit, prefetchable) or None
        Entry ``i`` configures BAR ``i``; a 64-bit BAR also takes BAR ``i+1`` (leave it None).
    max_payload_size : int
        Max payload size supported, bytes; the host programs the one in use (:attr:`mps`).
    rx_credits : tuple of int
        (PH, PD, NPH, NPD) credits advertised to the link; completions are infinite.
    cpl_space : tuple of int, optional
        (headers, bytes) of completion buffer: record ``rx-cpl-overflow`` when more completions
        than that wait for the DUT (it issued reads without reserving space).
    tx_buffer_tlps : int
        TLPs from the DUT that may wait for the link before ``tx_st_ready`` falls.
    accept_all : bool
        Pass every memory/IO request and every completion to the DUT, BAR or requester ID
        matching or not (chip-to-chip links, where nobody enumerates).
    idle_inside_packets : bool
        Let the idle generator drop ``rx_st_valid`` inside a packet too, not only between.
    mask_slack : int
        Non-posted requests that may still start after ``rx_st_mask`` is seen high.
    dirty : bool
        Drive seeded random bits on don't-care data (pad DWs, unused lanes, idle cycles).
    seed : int
        Seed of the dirty-mode generator.
    strict : bool
        Raise ``AssertionError`` at the first violation (the test fails); always recorded.
    quiet : bool
        Set the cocotbext-pcie loggers to WARNING.
    msi : bool
        Expose an MSI capability (no MSI pins are modelled).
    cred_update_cycles : int
        Refresh period of ``tx_cred``.
    rx_pipeline_ns, tx_pipeline_ns : float
        Latency of the hard IP's receive path (link to ``rx_st``) and transmit path (``tx_st``
        to link) beyond the model's own beat timing: a TLP from the link reaches the RX queue
        ``rx_pipeline_ns`` after it arrived, a TLP from the DUT goes to the link
        ``tx_pipeline_ns`` after its EOP beat.  Default 0; the calibrated value and its source
        are in docs/cluster.md (:data:`peach2.sim.calibration.HARDIP_PIPELINE_NS`).
    hdl_clock : bool
        The clock is made inside the HDL, not by a cocotb ``Clock`` (see
        :func:`edge_shows_update`; the sub-cluster top).
    sleep_when_idle : bool
        Stop running every cycle while there is nothing to do (nothing queued for the DUT,
        ``tx_st_valid`` low, no pause generators, ``tx_st_ready`` steady high) and wake on
        ``tx_st_valid`` changing or a TLP to deliver, so an idle port costs no Python time.
        The first beat after a wake waits one more cycle (``rx_st_ready`` was not watched);
        ``tx_cred`` is not refreshed while asleep.  For multi-chip tops whose clock runs in HDL.
    ticker : peach2.sim.ticker.EdgeTicker, optional
        Steps this model at each rising edge of ``clk``, shared with other models on the same
        clock so that one task, not one per model, wakes per cycle (default: a ticker of its
        own).

    Members
    -------
    rx_tlps, tx_tlps, nullified, unexpected_cpl : int
        TLPs delivered to the DUT, accepted from it, nullified by it, completions dropped.
    violations : list of Violation
        Everything the TX checker (and ``cpl_space``) found; :meth:`check` asserts it is empty.
    cycle : int
        Rising edges seen, the time base of violation reports.
    on_rx : callable or None
        ``on_rx(tlp, bardec)`` when a TLP's EOP beat is presented to the DUT.
    on_tx : callable or None
        ``on_tx(tlp)`` when a TLP from the DUT passes the checks (before it goes to the link);
        if it returns ``False`` the TLP does not go to the link (a loopback test uses this to
        keep a looped-back request from bouncing between host and device).
    """

    def __init__(self, dut, clk=None, prefix="", *, rst=None, bars=((1 << 16, False, False),),
                 max_payload_size=256, rx_credits=(64, 1024, 64, 64), cpl_space=None,
                 tx_buffer_tlps=8, accept_all=False, idle_inside_packets=True, mask_slack=2,
                 dirty=False, seed=0, strict=True, quiet=True, msi=True,
                 cred_update_cycles=16, sleep_when_idle=False, rx_pipeline_ns=0.0,
                 tx_pipeline_ns=0.0, hdl_clock=False, ticker=None):
        super().__init__()
        if rx_pipeline_ns < 0 or tx_pipeline_ns < 0:
            raise ValueError("pipeline latencies must not be negative")
        self.rx_pipeline_ns, self.tx_pipeline_ns = rx_pipeline_ns, tx_pipeline_ns
        self._rx_in_pipe = 0
        self._edge_shows_update = edge_shows_update(hdl_clock)
        self.sleep_when_idle = sleep_when_idle
        self._wake = Event()
        self._last_edge = self._period = None
        if quiet:
            quiet_pcie_loggers()
        self.prefix = prefix
        self.accept_all, self.idle_inside_packets = accept_all, idle_inside_packets
        self.mask_slack, self.strict, self.cpl_space = mask_slack, strict, cpl_space
        self.tx_buffer_tlps, self.cred_update_cycles = tx_buffer_tlps, cred_update_cycles
        self._rng = random.Random(seed) if dirty else None

        self.rx_tlps = self.tx_tlps = self.unexpected_cpl = 0
        self.violations = []
        self.cycle = 0
        self.on_rx = self.on_tx = None

        # link side: Gen2 x8, our RX credits (patched before the port sends its InitFC DLLPs)
        port = self.upstream_port
        port.max_link_speed, port.max_link_width = 2, 8
        for ch in port.fc_state:
            for st, val in zip((ch.ph, ch.pd, ch.nph, ch.npd), rx_credits):
                st.rx_initial_allocation = st.rx_credits_allocated = val

        # function, BARs
        f = self.append_function(HardIPFunction(msi=msi))
        f.vendor_id, f.device_id = 0x1172, 0x0004  # Altera vendor ID
        f.pcie_cap.max_payload_size_supported = (max_payload_size // 128 - 1).bit_length()
        for idx, bar in enumerate(bars):
            if bar is None:
                continue
            size, ext, pref = bar
            if ext and (idx >= 5 or (idx + 1 < len(bars) and bars[idx + 1] is not None)):
                raise ValueError(f"64-bit BAR {idx} needs BAR {idx + 1} free")
            f.configure_bar(idx, size, ext=ext, prefetch=pref)

        # pins
        def pin(name, required=True):
            try:
                return getattr(dut, prefix + name)
            except AttributeError:
                if required:
                    raise
                return None
        self._clk = clk if clk is not None else dut.clk
        self._rst = rst if rst is not None else getattr(dut, "rst", None)  # shared, unprefixed
        self._rx_ready, self._rx_mask = pin("rx_st_ready"), pin("rx_st_mask", False)
        direct = self._edge_shows_update
        self._o_rx = [_Out(pin(n, n in ("rx_st_data", "rx_st_sop", "rx_st_eop", "rx_st_empty")),
                           direct=direct)
                      for n in ("rx_st_data", "rx_st_sop", "rx_st_eop", "rx_st_empty",
                                "rx_st_bardec", "rx_st_be", "rx_st_err")]
        self._o_rx_valid = _Out(pin("rx_st_valid"), direct=direct)
        self._tx = TxChecker(pin("tx_st_valid"), pin("tx_st_sop"), pin("tx_st_eop"),
                             pin("tx_st_data"), pin("tx_st_empty"), pin("tx_st_err", False),
                             self._violate)
        self._o_tx_ready = _Out(pin("tx_st_ready"), direct=direct)
        self._o_tx_cred = _Out(pin("tx_cred", False), direct=direct)

        # RX (toward the DUT): posted+completions and non-posted queues, ordered by sequence
        self._rx_pc, self._rx_np = deque(), deque()
        self._rx_seq = 0
        self._rx_cur, self._rx_idx = None, 0
        self._np_slack = mask_slack
        self._cpl_h = self._cpl_b = 0
        self._rx_idle_evt = Event()
        self._rx_idle_evt.set()
        self._idle_gen = self._bp_gen = None

        # TX (from the DUT)
        self._tx_buf = deque()
        self._tx_evt, self._tx_idle_evt = Event(), Event()
        self._tx_idle_evt.set()

        self._in_reset = False
        if self._rst is not None:
            cocotb.start_soon(self._watch_reset())
        self._r = [0, 0, 0]     # our tx_st_ready in cycles t-2, t-1, t
        self._rx_ready_d = self._rx_ready_dd = 0
        self._cred_wait = 0
        self._woke_at = None
        self._ticker = ticker if ticker is not None else EdgeTicker(self._clk)
        self._ticker.join(self)
        cocotb.start_soon(self._run_link_tx())

    # ---------------------------------------------------------------- configuration / status
    @property
    def pcie_id(self):
        """The function's PCIe ID (bus number learnt from config requests)."""
        return self.functions[0].pcie_id

    @property
    def nullified(self):
        """TLPs the DUT nullified with ``tx_st_err`` (counted by the TX checker)."""
        return self._tx.nullified

    @property
    def mps(self):
        """Max payload size in use, bytes (device control register)."""
        return 128 << self.functions[0].pcie_cap.max_payload_size

    @property
    def mrrs(self):
        """Max read request size in use, bytes (device control register)."""
        return 128 << self.functions[0].pcie_cap.max_read_request_size

    def set_link_config(self, max_payload_size=None, max_read_request_size=None):
        """Program MPS / MRRS (bytes) directly, for links nobody enumerates."""
        cap = self.functions[0].pcie_cap
        if max_payload_size is not None:
            cap.max_payload_size = (max_payload_size // 128 - 1).bit_length()
        if max_read_request_size is not None:
            cap.max_read_request_size = (max_read_request_size // 128 - 1).bit_length()

    def set_idle_generator(self, generator=None):
        """Insert RX idle cycles: each value 1 from ``generator`` holds ``rx_st_valid`` low once."""
        self._idle_gen = iter(generator) if generator is not None else None

    def set_backpressure_generator(self, generator=None):
        """Drop ``tx_st_ready`` for one cycle for each value 1 from ``generator``."""
        self._bp_gen = iter(generator) if generator is not None else None

    @property
    def rx_queue_depth(self):
        """TLPs waiting for (or being streamed to) the DUT."""
        return (len(self._rx_pc) + len(self._rx_np) + (self._rx_cur is not None)
                + self._rx_in_pipe)

    @property
    def tx_queue_depth(self):
        """TLPs accepted from the DUT and not yet handed to the link."""
        return len(self._tx_buf)

    async def rx_idle(self):
        """Wait until every queued TLP has been presented to the DUT."""
        while self.rx_queue_depth:
            self._rx_idle_evt.clear()
            await self._rx_idle_evt.wait()

    async def tx_idle(self):
        """Wait until every TLP accepted from the DUT has been handed to the link."""
        while self._tx_buf:
            self._tx_idle_evt.clear()
            await self._tx_idle_evt.wait()

    def inject(self, tlp, bardec=0):
        """Queue ``tlp`` toward the DUT as if it came from the link (no BAR lookup).

        The object is queued, not copied: do not change it until ``on_rx`` reports it.
        """
        self._rx_enqueue(tlp, bardec, from_link=False)

    def inject_beats(self, beats):
        """Queue raw :class:`AvalonBeat` s toward the DUT, framing errors and ``err`` included.

        For testing how the DUT treats what the real hard IP would only send on a fault
        (``rx_st_err``) or never (malformed framing).  Beats keep their order with the TLPs
        queued by :meth:`inject`; ``on_rx`` is not called for them and ``rx_tlps`` does not
        count them.
        """
        self._rx_pc.append((self._rx_seq, None, 0, list(beats)))
        self._rx_seq += 1
        self._rx_idle_evt.clear()
        self._wake.set()

    def check(self):
        """Raise ``AssertionError`` listing the recorded violations, if any."""
        if self.violations:
            raise AssertionError(f"{len(self.violations)} hard-IP protocol violation(s):\n"
                                 + "\n".join(map(str, self.violations[:20])))

    def _violate(self, rule, message):
        v = Violation(rule, self.cycle, get_sim_time("ns"), f"{self.prefix}{message}")
        self.violations.append(v)
        self.log.error("%s", v)
        if self.strict:
            raise AssertionError(str(v))

    # ---------------------------------------------------------------- link -> model
    async def upstream_recv(self, tlp):
        ft = tlp.fmt_type
        if ft in (TlpType.CFG_READ_0, TlpType.CFG_WRITE_0):
            self.bus_num = tlp.completer_id.bus
            for f in self.functions:
                if f.function_num == tlp.completer_id.function:
                    await f.upstream_recv(tlp)
                    return
        elif ft in CPL:
            if self.accept_all or any(f.pcie_id == tlp.requester_id for f in self.functions):
                self._rx_enqueue(tlp, 0)
            else:
                tlp.release_fc()
                self.unexpected_cpl += 1
                self.log.warning("Unexpected completion dropped: %s", describe(tlp))
            return
        elif ft in MEM_REQ or ft in IO_REQ:
            for f in self.functions:
                bar = f.match_bar(tlp.address, ft in IO_REQ)
                if bar:
                    self._rx_enqueue(tlp, 1 << bar[0])
                    return
            if self.accept_all:
                self._rx_enqueue(tlp, 0)
                return
        tlp.release_fc()
        self.log.warning("Unsupported request (no BAR/function match): %s", describe(tlp))
        if tlp.is_posted():
            return
        await self.upstream_send(Tlp.create_ur_completion_for_tlp(tlp, PcieId(self.bus_num, 0, 0)))

    def _rx_enqueue(self, tlp, bardec, from_link=True):
        if from_link and self.rx_pipeline_ns > 0:     # the hard IP's RX pipeline
            self._rx_in_pipe += 1
            self._rx_idle_evt.clear()
            cocotb.start_soon(self._rx_after_pipeline(tlp, bardec))
            return
        if tlp.is_completion() and self.cpl_space is not None:
            self._cpl_h += 1
            self._cpl_b += tlp.get_payload_size()
            if self._cpl_h > self.cpl_space[0] or self._cpl_b > self.cpl_space[1]:
                self._violate("rx-cpl-overflow", f"{self._cpl_h} completions / {self._cpl_b} B "
                              f"waiting, completion space is {self.cpl_space}")
        (self._rx_np if tlp.is_nonposted() else self._rx_pc).append(
            (self._rx_seq, tlp, bardec, None))
        self._rx_seq += 1
        self._rx_idle_evt.clear()
        self._wake.set()

    async def _rx_after_pipeline(self, tlp, bardec):
        await Timer(get_sim_steps(self.rx_pipeline_ns, "ns", round_mode="round"), "step")
        self._rx_in_pipe -= 1
        self._rx_enqueue(tlp, bardec, from_link=False)

    # ---------------------------------------------------------------- model -> link
    async def _run_link_tx(self):
        buf = self._tx_buf
        while True:
            while not buf:
                self._tx_idle_evt.set()
                self._tx_evt.clear()
                await self._tx_evt.wait()
            tlp, ready_ns = buf[0]
            wait = ready_ns - get_sim_time("ns")
            if wait > 0:                    # the hard IP's TX pipeline
                await Timer(get_sim_steps(wait, "ns", round_mode="round"), "step")
            await self.send(tlp)  # waits for flow-control credits and the wire
            buf.popleft()

    def _tx_cred_value(self):
        fc = self.upstream_port.fc_state[0]
        val = 0
        for st, lsb, bits in ((fc.ph, 0, 3), (fc.pd, 3, 12), (fc.nph, 15, 3), (fc.npd, 18, 3),
                              (fc.cplh, 21, 3), (fc.cpld, 24, 12)):
            val |= min(st.tx_credits_available, (1 << bits) - 1) << lsb
        return val

    # ---------------------------------------------------------------- per-cycle loop
    async def _watch_reset(self):
        while True:
            try:
                self._in_reset = bool(int(self._rst.value))
            except ValueError:
                self._in_reset = True
            await ValueChange(self._rst)

    def tick(self, now):
        """One cycle, at the rising edge of simulation step ``now`` (called by the ticker)."""
        if now == self._woke_at:
            return          # the edge this model was woken at: it was taken (or not) by _wake_up
        self._woke_at = None
        self._count_cycles(now)
        if self._in_reset:
            self._tx.packet = None
            self._rx_idx = 0  # a packet cut by reset starts again
            self._o_tx_ready.set(0)
            self._o_rx_valid.set(0)
            self._r = [0, 0, 0]
            self._rx_ready_d = self._rx_ready_dd = 0
            return
        tx_valid = self._tx.valid
        # Icarus shows an edge's callbacks the values from before the edge: the beat read at
        # the edge that starts cycle t+1 is cycle t's.  Verilator with the clock in the HDL
        # shows the values after it: the beat read there is cycle t+1's, so the ready two
        # cycles before it is one write closer (r1), and the rx_st_ready read one edge earlier
        # is already cycle t's.  (Verilator with a cocotb Clock behaves as Icarus.)
        post = self._edge_shows_update
        r2, r1, r0 = self._r    # our tx_st_ready in cycles t-2, t-1, t

        # TX: check cycle t, then choose tx_st_ready for cycle t+1
        ready_then = r1 if post else r2        # tx_st_ready two cycles before the beat
        tlp = self._tx.step(ready_then, self.cycle)
        if tlp is not None:
            self._tx_accept(tlp)
        r = 1
        if self._bp_gen is not None and next(self._bp_gen, 0):
            r = 0
        elif len(self._tx_buf) >= self.tx_buffer_tlps:
            r = 0
        self._o_tx_ready.set(r)
        self._r = [r1, r0, r]

        # RX: a beat may go out in cycle t+1 only if rx_st_ready was 1 in cycle t-1
        # (rx_st_ready as read at the last two edges)
        allowed = self._rx_ready_dd if post else self._rx_ready_d
        self._rx_ready_dd, self._rx_ready_d = self._rx_ready_d, bit_value(self._rx_ready)
        self._rx_step(allowed)

        if self._o_tx_cred.sig is not None:
            self._cred_wait -= 1
            if self._cred_wait <= 0:
                self._cred_wait = self.cred_update_cycles
                self._o_tx_cred.set(self._tx_cred_value())

        if self.sleep_when_idle and r1 and r0 and r and self._idle(tx_valid):
            self._ticker.leave(self)
            cocotb.start_soon(self._sleep(tx_valid))

    async def _sleep(self, tx_valid):
        self._wake.clear()
        await First(ValueChange(tx_valid), self._wake.wait())
        self._rx_ready_d = self._rx_ready_dd = 0
        now = get_sim_time("step")
        self._ticker.join(self)
        # The edge this wake-up happened at is not this model's next cycle: the ticker may
        # still call tick() for it in this time step (skipped, see tick), or may have already.
        # Verilator with the clock in the HDL shows a rising edge's register updates to the
        # edge's callbacks (Icarus shows the values from before it): there the beat that woke
        # the model is this edge's beat, to be taken now, not at the next edge.
        if self._edge_shows_update and bit_value(tx_valid):
            self.tick(now)
        self._woke_at = now

    def _count_cycles(self, now):
        """Advance :attr:`cycle` by the clock periods since the last edge seen (1 unless the
        model slept), ``now`` in simulation steps."""
        if self._last_edge is not None:
            gap = now - self._last_edge
            if self._period is None:
                self._period = gap
            self.cycle += max(1, round(gap / self._period)) if self._period else 1
        else:
            self.cycle += 1
        self._last_edge = now

    def _idle(self, tx_valid):
        return (self._tx.packet is None and self._rx_cur is None and not self._rx_pc
                and not self._rx_np and not self._o_rx_valid.val and self._idle_gen is None
                and self._bp_gen is None and len(self._tx_buf) < self.tx_buffer_tlps
                and not bit_value(tx_valid) and not self._in_reset)

    def _rx_pick(self):
        pc, np = self._rx_pc, self._rx_np
        if np and (not pc or np[0][0] < pc[0][0]):
            if self._rx_mask is not None and bit_value(self._rx_mask):
                if self._np_slack > 0:
                    self._np_slack -= 1
                    return np.popleft()
                return pc.popleft() if pc else None
            self._np_slack = self.mask_slack
            return np.popleft()
        return pc.popleft() if pc else None

    def _rx_step(self, allowed):
        if self._rx_cur is None:
            entry = self._rx_pick()
            if entry is None:
                if self._o_rx_valid.val:
                    self._rx_go_idle()
                return
            _, tlp, bardec, beats = entry
            if beats is None:
                beats = tlp_to_avalon_beats(tlp, bardec, self._rng)
            self._rx_cur, self._rx_idx = (tlp, bardec, beats), 0
        if allowed:
            gen = self._idle_gen
            if (gen is None or (self._rx_idx and not self.idle_inside_packets)
                    or not next(gen, 0)):
                tlp, bardec, beats = self._rx_cur
                b = beats[self._rx_idx]
                o = self._o_rx
                o[0].set(b.data)
                o[1].set(int(b.sop))
                o[2].set(int(b.eop))
                o[3].set(b.empty)
                o[4].set(b.bardec)
                o[5].set(b.be)
                o[6].set(int(b.err))
                self._o_rx_valid.set(1)
                self._rx_idx += 1
                if self._rx_idx == len(beats):
                    self._rx_done(tlp, bardec)
                return
        if self._o_rx_valid.val:
            self._rx_go_idle()

    def _rx_go_idle(self):
        self._o_rx_valid.set(0)
        if self._rng is not None:  # don't-care while valid is low
            o, rng = self._o_rx, self._rng
            o[0].set(rng.getrandbits(128))
            o[1].set(rng.getrandbits(1))
            o[2].set(rng.getrandbits(1))

    def _rx_done(self, tlp, bardec):
        self._rx_cur = None
        if tlp is None:  # raw beats from inject_beats
            if not self._rx_pc and not self._rx_np:
                self._rx_idle_evt.set()
            return
        self.rx_tlps += 1
        tlp.release_fc()
        if tlp.is_completion() and self.cpl_space is not None:
            self._cpl_h -= 1
            self._cpl_b -= tlp.get_payload_size()
        if self.on_rx is not None:
            self.on_rx(tlp, bardec)
        if not self._rx_pc and not self._rx_np:
            self._rx_idle_evt.set()

    def _tx_accept(self, tlp):
        problems = list(tlp_problems(tlp, self.mps, self.mrrs))
        for rule, msg in problems:
            self._violate(rule, f"{msg}: {describe(tlp)}")
        if problems:
            return  # dropped: a link partner would call it malformed
        self.tx_tlps += 1
        if self.on_tx is not None and self.on_tx(tlp) is False:
            return  # the test took it off the link
        self._tx_buf.append((tlp, get_sim_time("ns") + self.tx_pipeline_ns))
        self._tx_idle_evt.clear()
        self._tx_evt.set()
