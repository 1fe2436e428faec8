"""Bus-functional model of the Stratix IV GX hard IP for PCI Express (Gen2 x8, 128-bit Avalon-ST).

The model is a cocotbext-pcie :class:`~cocotbext.pcie.core.Device` (shaped like
``cocotbext.pcie.intel.s10.S10PcieDevice``): its link side is a cocotbext-pcie ``SimPort`` (wire
time, ACK/NAK, flow control), its application side drives and checks the IP Compiler for PCI
Express pins ``{prefix}rx_st_*`` / ``{prefix}tx_st_*`` of the DUT, one beat per 250 MHz cycle.

Framing (beats <-> TLP, both directions, the vendor's Avalon-ST rules) lives in
:mod:`peach2.sim.hardip.avalon`; its public names (:func:`tlp_to_avalon_beats`,
:func:`avalon_beats_to_tlp`, :class:`AvalonBeat`, :class:`FramingError`, :func:`damage`, ...)
are importable from :mod:`peach2.sim.hardip`.  The model has four
parts: its link side :class:`~peach2.sim.hardip.device.HardIPDevice` (configuration space,
BARs, flow control, the TX pipeline; the base class), this module (the pins, the per-cycle loop
with the ready latencies, sleeping), its receive side :class:`~peach2.sim.hardip.rx.RxStream`
(the queues toward the DUT on ``rx_st_*``) and its transmit checker
:class:`~peach2.sim.hardip.tx_checker.TxChecker` (``tx_st_*``; :class:`Violation` is its
report).

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
  of a nullified packet is not checked.  A nullified packet takes no wire time: the real hard IP
  has sent its start (cut-through) and ends it with EDB, which the partner drops; the next
  packet's SOP beat comes after its EOP beat, so on a wire no faster than ``tx_st`` the next
  packet starts at most the framing's few bytes early.
- The transmit side is cut-through from the SOP beat (:mod:`peach2.sim.hardip.wire`), its end
  bounded by the EOP beat plus one beat of wire (the last beat's own bytes and the LCRC are not
  counted apart); the receive side stores and forwards (a TLP reaches ``rx_st`` after its
  last symbol).
- RX flow-control credits are returned to the link when the TLP's EOP beat reaches the DUT, so
  the DUT's backpressure reaches the link partner.  Completions have infinite credits (as an
  endpoint advertises); ``cpl_space`` optionally checks the DUT reserved room for them.
"""

import random
from functools import partial

import cocotb
from cocotb.triggers import Event, First, Timer, ValueChange
from cocotb.utils import get_sim_steps, get_sim_time, get_time_from_sim_steps

from peach2.sim.run import EdgeTicker, bit_value

from .avalon import describe
from .device import IDLE_WAIT_NS, HardIPDevice, wait_drained
from .rx import RxStream
from .tx_checker import TxChecker, Violation, tlp_problems

__all__ = ["HardIPModel", "edge_shows_update"]


def edge_shows_update(hdl_clock):
    """Whether a ``RisingEdge`` callback sees the registers after that edge's update.

    Icarus shows the values from before the edge, and so does Verilator when cocotb drives the
    clock (a :class:`cocotb.clock.Clock`: its write wakes the callbacks before the model is
    evaluated).  Verilator with the clock made inside the HDL (``hdl_clock``: an ``always #2``
    wrapper built with ``--timing``, as the sub-cluster top has) evaluates the edge first and
    shows the values after it.
    """
    return bool(hdl_clock) and "verilator" in cocotb.SIM_NAME.lower()


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


def _rx_setting(name, doc):
    """A model attribute that is the receive side's (:class:`RxStream`) ``name``."""
    return property(lambda self: getattr(self._rx, name),
                    lambda self, value: setattr(self._rx, name, value), doc=doc)


class HardIPModel(HardIPDevice):
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
        ``rx_pipeline_ns`` after it arrived, a TLP from the DUT starts on the link
        ``tx_pipeline_ns`` after its SOP beat, when the wire and the partner's credits allow,
        and ends no earlier than its EOP beat's bytes can follow (cut-through,
        :mod:`peach2.sim.hardip.wire`).  Default 0; the calibrated value and its source
        are in docs/cluster.md (:data:`peach2.sim.pcie.calibration.HARDIP_PIPELINE_NS`).
    hdl_clock : bool
        The clock is made inside the HDL, not by a cocotb ``Clock`` (see
        :func:`edge_shows_update`; the sub-cluster top).
    sleep_when_idle : bool
        Stop running every cycle while there is nothing to do (nothing queued for the DUT,
        ``tx_st_valid`` low, no pause generators, ``tx_st_ready`` steady high) and wake on
        ``tx_st_valid`` changing or a TLP to deliver, so an idle port costs no Python time.
        The first beat after a wake waits one more cycle (``rx_st_ready`` was not watched);
        ``tx_cred`` is not refreshed while asleep.  For multi-chip tops whose clock runs in HDL.
    ticker : peach2.sim.run.ticker.EdgeTicker, optional
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
        if rx_pipeline_ns < 0 or tx_pipeline_ns < 0:
            raise ValueError("pipeline latencies must not be negative")
        super().__init__(bars=bars, max_payload_size=max_payload_size, rx_credits=rx_credits,
                         accept_all=accept_all, msi=msi, quiet=quiet,
                         tx_pipeline_ns=tx_pipeline_ns)
        self.rx_pipeline_ns = rx_pipeline_ns
        self._rx_in_pipe = 0
        self._edge_shows_update = edge_shows_update(hdl_clock)
        self.sleep_when_idle = sleep_when_idle
        self._wake = Event()
        self._last_edge = self._period = None
        self.prefix, self.strict = prefix, strict
        self.label = f"hard IP {prefix.rstrip('_') or 'model'}"
        self.tx_buffer_tlps, self.cred_update_cycles = tx_buffer_tlps, cred_update_cycles

        self.tx_tlps = 0
        self.violations = []
        self.cycle = 0
        self.on_tx = None

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
        self._rx_ready = pin("rx_st_ready")
        direct = self._edge_shows_update
        self._rx = RxStream(
            [_Out(pin(n, n in ("rx_st_data", "rx_st_sop", "rx_st_eop", "rx_st_empty")),
                  direct=direct)
             for n in ("rx_st_data", "rx_st_sop", "rx_st_eop", "rx_st_empty", "rx_st_bardec",
                       "rx_st_be", "rx_st_err")],
            _Out(pin("rx_st_valid"), direct=direct), pin("rx_st_mask", False),
            mask_slack=mask_slack, idle_inside_packets=idle_inside_packets, cpl_space=cpl_space,
            rng=random.Random(seed) if dirty else None, violate=self._violate)
        self._tx = TxChecker(pin("tx_st_valid"), pin("tx_st_sop"), pin("tx_st_eop"),
                             pin("tx_st_data"), pin("tx_st_empty"), pin("tx_st_err", False),
                             self._violate)
        self._o_tx_ready = _Out(pin("tx_st_ready"), direct=direct)
        self._o_tx_cred = _Out(pin("tx_cred", False), direct=direct)

        self._bp_gen = None

        self._in_reset = False
        if self._rst is not None:
            cocotb.start_soon(self._watch_reset())
        self._r = [0, 0, 0]     # our tx_st_ready in cycles t-2, t-1, t
        self._rx_ready_d = self._rx_ready_dd = 0
        self._cred_wait = 0
        self._woke_at = None
        self._ticker = ticker if ticker is not None else EdgeTicker(self._clk)
        self._ticker.join(self)
        self._start_link_tx()

    # ---------------------------------------------------------------- configuration / status
    @property
    def rx_tlps(self):
        """TLPs delivered to the DUT (counted by the receive side)."""
        return self._rx.tlps

    on_rx = _rx_setting("on_rx", "``on_rx(tlp, bardec)`` when a TLP's EOP beat is presented "
                        "to the DUT, or None")
    idle_inside_packets = _rx_setting("idle_inside_packets", "the idle generator may drop "
                                      "``rx_st_valid`` inside a packet")
    mask_slack = _rx_setting("mask_slack", "non-posted requests that may still start after "
                             "``rx_st_mask`` is seen high")
    cpl_space = _rx_setting("cpl_space", "(headers, bytes) of completion room checked, or None")

    @property
    def nullified(self):
        """TLPs the DUT nullified with ``tx_st_err`` (counted by the TX checker)."""
        return self._tx.nullified

    def set_idle_generator(self, generator=None):
        """Insert RX idle cycles: each value 1 from ``generator`` holds ``rx_st_valid`` low once."""
        self._rx.idle_gen = iter(generator) if generator is not None else None

    def set_backpressure_generator(self, generator=None):
        """Drop ``tx_st_ready`` for one cycle for each value 1 from ``generator``."""
        self._bp_gen = iter(generator) if generator is not None else None

    @property
    def rx_queue_depth(self):
        """TLPs waiting for (or being streamed to) the DUT."""
        return self._rx.depth + self._rx_in_pipe

    async def rx_idle(self, timeout_ns=IDLE_WAIT_NS):
        """Wait until every queued TLP has been presented to the DUT; raise
        :class:`~peach2.sim.hardip.device.Stuck` if none is taken for ``timeout_ns`` (the chip
        holds ``rx_st_ready`` low)."""
        await wait_drained(lambda: self.rx_queue_depth, self._rx.idle_event, timeout_ns,
                           f"{self.label}: TLPs queued toward the chip")

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
        self._rx.enqueue_beats(beats)
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

    def _rx_enqueue(self, tlp, bardec, from_link=True):
        if from_link and self.rx_pipeline_ns > 0:     # the hard IP's RX pipeline
            self._rx_in_pipe += 1
            self._rx.idle_event.clear()
            cocotb.start_soon(self._rx_after_pipeline(tlp, bardec))
            return
        self._rx.enqueue(tlp, bardec)
        self._wake.set()

    async def _rx_after_pipeline(self, tlp, bardec):
        await Timer(get_sim_steps(self.rx_pipeline_ns, "ns", round_mode="round"), "step")
        self._rx_in_pipe -= 1
        self._rx_enqueue(tlp, bardec, from_link=False)

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
            self._o_tx_ready.set(0)
            self._rx.restart()
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
        self._rx.step(allowed)

        if self._o_tx_cred.sig is not None:
            self._cred_wait -= 1
            if self._cred_wait <= 0:
                self._cred_wait = self.cred_update_cycles
                self._o_tx_cred.set(self._tx_cred_value())

        if self.sleep_when_idle and r1 and r0 and r and self._idle(tx_valid):
            self._ticker.leave(self)
            # Cleared here, when the decision is made, not in _sleep: a wake-up requested
            # between now and the moment _sleep starts waiting must not be lost.
            self._wake.clear()
            cocotb.start_soon(self._sleep(tx_valid))

    async def _sleep(self, tx_valid):
        valid_changed = ValueChange(tx_valid)
        woke_by = await First(valid_changed, self._wake.wait())
        self._rx_ready_d = self._rx_ready_dd = 0
        now = get_sim_time("step")
        self._ticker.join(self)
        # tx_st_valid is a register of the DUT: it changes only at a rising edge, so a wake-up
        # by its change happened at an edge, and that edge is not this model's next cycle (the
        # ticker may still call tick() for it in this time step, or may have already): skip
        # it (see tick).  Verilator with the clock in the HDL shows a rising edge's register
        # updates to the edge's callbacks (Icarus shows the values from before it): there the
        # beat that woke the model is this edge's beat, to be taken now, not at the next edge.
        # A wake-up by the event (a TLP queued toward the DUT) can come at any point of a time
        # step, also before the edge of the same step is evaluated: then that edge is this
        # model's next cycle and must not be skipped, or the beat the DUT starts at it (its
        # SOP) is lost.  So the edge is skipped only when it was already taken here.
        took_edge = woke_by is valid_changed
        if self._edge_shows_update and bit_value(tx_valid):
            self.tick(now)
            took_edge = True
        self._woke_at = now if took_edge else None

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
        return (self._tx.packet is None and self._rx.quiet()
                and self._bp_gen is None and len(self._tx_buf) < self.tx_buffer_tlps
                and not bit_value(tx_valid) and not self._in_reset)

    def _tx_accept(self, tlp):
        problems = list(tlp_problems(tlp, self.mps, self.mrrs))
        for rule, msg in problems:
            self._violate(rule, f"{msg}: {describe(tlp)}")
        if problems:
            return  # dropped: a link partner would call it malformed
        self.tx_tlps += 1
        if self.on_tx is not None and self.on_tx(tlp) is False:
            return  # the test took it off the link
        self._to_link(tlp, self._sop_ns(self._tx.started))

    def _sop_ns(self, start):
        """Simulation time (ns) of cycle ``start`` of this model's count, at most a few cycles
        back (None before the clock period is known)."""
        if start is None or not self._period:
            return None
        return get_sim_time("ns") - get_time_from_sim_steps((self.cycle - start) * self._period,
                                                           "ns")
