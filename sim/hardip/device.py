"""The link side of the hard-IP model: configuration space, BARs, flow control, the TX pipeline.

:class:`HardIPDevice` is the cocotbext-pcie :class:`~cocotbext.pcie.core.Device` under
:class:`~peach2.sim.hardip.model.HardIPModel`: an endpoint (:class:`HardIPFunction`, Altera's vendor
ID) whose upstream port is a Gen2 x8 ``SimPort`` advertising the model's receive credits.  It
answers configuration requests itself (the DUT never sees them), passes memory and I/O requests
that hit a BAR and completions for its function to the subclass's ``_rx_enqueue(tlp, bardec)``,
drops the rest (non-posted ones answered with Unsupported Request, unexpected completions
counted), and sends the TLPs the DUT transmitted to the link, their first symbols
``tx_pipeline_ns`` after their SOP beat was accepted (:meth:`HardIPDevice._to_link`; cut-through,
:mod:`peach2.sim.hardip.wire`), waiting for the partner's flow-control credits.
Simplifications are listed in :mod:`peach2.sim.hardip.model`.
"""

import logging
from collections import deque

import cocotb
from cocotb.triggers import Event, SimTimeoutError, Timer, with_timeout
from cocotb.utils import get_sim_steps, get_sim_time
from cocotbext.pcie.core import Device, Endpoint
from cocotbext.pcie.core.caps import MsiCapability
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from .avalon import CPL, IO_REQ, MEM_REQ, describe
from .wire import CutThroughPort, cut_through

__all__ = ["HardIPDevice", "HardIPFunction", "quiet_pcie_loggers", "IDLE_WAIT_NS", "Stuck",
           "wait_drained"]

#: How long :meth:`HardIPDevice.tx_idle` and ``HardIPModel.rx_idle`` wait without one TLP
#: moving before they raise :class:`Stuck` (simulated ns): a stall fails the test that waits,
#: naming the queue, instead of hanging until the test's wall-clock limit.
IDLE_WAIT_NS = 1_000_000


class Stuck(AssertionError):
    """A queue of the hard-IP model did not move for ``IDLE_WAIT_NS`` (or the caller's bound)."""


async def wait_drained(depth, event, timeout_ns, what):
    """Wait until ``depth()`` is 0, woken by ``event``; raise :class:`Stuck` naming ``what``
    when it has not fallen for ``timeout_ns`` of simulated time (so a long queue that drains
    steadily is never cut short)."""
    last = depth()
    while depth():
        event.clear()
        try:
            await with_timeout(event.wait(), timeout_ns, "ns")
        except SimTimeoutError:
            if depth() >= last:
                raise Stuck(f"{what}: {depth()} TLPs have not moved for {timeout_ns} ns "
                            f"(at {get_sim_time('ns'):.0f} ns)") from None
        last = min(last, depth())


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


class HardIPDevice(Device):
    """The hard IP as a PCIe device on the link (the DUT side is the subclass's).

    Parameters
    ----------
    bars, max_payload_size, rx_credits, accept_all, msi, quiet, tx_pipeline_ns
        As :class:`~peach2.sim.hardip.model.HardIPModel`'s.

    Members
    -------
    unexpected_cpl : int
        Completions for nobody here, dropped.
    """

    def __init__(self, *, bars, max_payload_size, rx_credits, accept_all, msi, quiet,
                 tx_pipeline_ns):
        super().__init__()
        if quiet:
            quiet_pcie_loggers()
        self.accept_all, self.tx_pipeline_ns = accept_all, tx_pipeline_ns
        self.unexpected_cpl = 0
        #: What :class:`Stuck` calls this model.
        self.label = "hard IP model"

        # link side: Gen2 x8, our RX credits (patched before the port sends its InitFC DLLPs).
        # cocotbext-pcie's Device made a SimPort and started its tasks; a second port would
        # leave those running unconnected, so the port becomes the cut-through one in place
        # (CutThroughPort only overrides how a packet takes the wire).
        port = self.upstream_port
        port.__class__ = CutThroughPort
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

        # TLPs from the DUT on their way to the link: (tlp, step it is handed to the port)
        self._tx_buf = deque()
        self._tx_evt, self._tx_idle_evt = Event(), Event()
        self._tx_idle_evt.set()

    # ---------------------------------------------------------------- configuration / status
    @property
    def pcie_id(self):
        """The function's PCIe ID (bus number learnt from config requests)."""
        return self.functions[0].pcie_id

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

    @property
    def tx_queue_depth(self):
        """TLPs accepted from the DUT and not yet handed to the link."""
        return len(self._tx_buf)

    async def tx_idle(self, timeout_ns=IDLE_WAIT_NS):
        """Wait until every TLP accepted from the DUT has been handed to the link; raise
        :class:`Stuck` if none leaves for ``timeout_ns`` (the link's credits never return)."""
        await wait_drained(lambda: len(self._tx_buf), self._tx_idle_evt, timeout_ns,
                           f"{self.label}: TLPs from the chip waiting for the link")

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

    # ---------------------------------------------------------------- model -> link
    def _to_link(self, tlp, sop_ns=None):
        """Send ``tlp``, whose EOP beat the DUT gave now and its SOP beat at ``sop_ns`` (default
        now), to the link: its first symbols may take the wire ``tx_pipeline_ns`` after the SOP
        beat, its last not before the EOP beat is through the pipeline (cut-through,
        :mod:`peach2.sim.hardip.wire`); it is handed to the port then, or now if that is later."""
        now = get_sim_time("ns")
        sop_ns = now if sop_ns is None else min(sop_ns, now)
        ready = max(now, sop_ns + self.tx_pipeline_ns)

        def steps(ns):
            return get_sim_steps(ns, "ns", round_mode="round")
        handed = steps(ready)
        cut_through(tlp, steps(sop_ns + self.tx_pipeline_ns), steps(now + self.tx_pipeline_ns),
                    handed)
        self._tx_buf.append((tlp, handed))
        self._tx_idle_evt.clear()
        self._tx_evt.set()

    def _start_link_tx(self):
        """Start the task that hands :meth:`_to_link`'s TLPs to the link."""
        cocotb.start_soon(self._run_link_tx())

    async def _run_link_tx(self):
        buf = self._tx_buf
        while True:
            while not buf:
                self._tx_idle_evt.set()
                self._tx_evt.clear()
                await self._tx_evt.wait()
            tlp, ready = buf[0]
            wait = ready - get_sim_time("step")
            if wait > 0:                    # the hard IP's TX pipeline
                await Timer(wait, "step")
            await self.send(tlp)  # waits for flow-control credits and the wire
            buf.popleft()

    def _tx_cred_value(self):
        fc = self.upstream_port.fc_state[0]
        val = 0
        for st, lsb, bits in ((fc.ph, 0, 3), (fc.pd, 3, 12), (fc.nph, 15, 3), (fc.npd, 18, 3),
                              (fc.cplh, 21, 3), (fc.cpld, 24, 12)):
            val |= min(st.tx_credits_available, (1 << bits) - 1) << lsb
        return val
