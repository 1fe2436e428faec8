"""Throughput of TLPs on a simulated link, beside the wire-format bound for the same TLP mix.

:class:`ThroughputMeter` wraps the ``handle_tx`` of one cocotbext-pcie ``SimPort``: the port calls
it once per packet and it holds the wire for the packet's wire time, so the wrapper timestamps the
start and the end of every TLP the port sends.  DLLPs (ACK, flow-control updates) pass unmetered
but still take wire time, as they do on a real link.

The report gives payload bytes over the time from the first TLP's start to the last TLP's end,
and the bound for exactly the TLPs metered (header + payload + 8 framing bytes per TLP)::

    bound = link_rate * sum(payload) / sum(header + payload + 8)

``Tlp.get_wire_size()`` is ``get_size() + 8`` = header (12 or 16) + payload + 8 (sequence
number 2, LCRC 4, STP/END 1 + 1); a TLP with a digest (``td``) really costs 4 bytes more, which
cocotbext-pcie does not model.  ``link_rate`` is ``1 / symbol_period`` of the port (4e9 B/s at
Gen2 x8).
"""

from dataclasses import dataclass

from cocotb.utils import get_sim_time, get_time_from_sim_steps
from cocotbext.pcie.core.tlp import Tlp, TlpType

__all__ = ["ThroughputMeter", "ThroughputReport", "writes_only", "GEN2_X8_RATE"]

#: Raw data rate of a Gen2 x8 link, bytes/s (5 GT/s x 8 lanes x 8b/10b / 8 bits).
GEN2_X8_RATE = 4e9


def writes_only(tlp):
    """Select memory writes (for DMA write throughput)."""
    return tlp.fmt_type in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)


@dataclass
class ThroughputReport:
    """Throughput of the metered TLPs.

    Members
    -------
    name : str
    tlps : int
        TLPs metered.
    bytes : int
        Their payload bytes.
    wire_bytes : int
        Their wire bytes (header + payload + 8 each).
    seconds : float
        First TLP start to last TLP end.
    link_rate : float
        Raw link rate, bytes/s.
    """
    name: str
    tlps: int
    bytes: int
    wire_bytes: int
    seconds: float
    link_rate: float = GEN2_X8_RATE

    @property
    def gbps(self):
        """Achieved payload throughput, GB/s (1e9 bytes/s)."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def bound_gbps(self):
        """Wire-format bound for the same TLPs, GB/s."""
        return self.link_rate * self.bytes / self.wire_bytes / 1e9 if self.wire_bytes else 0.0

    @property
    def fraction(self):
        """Achieved / bound."""
        return self.gbps / self.bound_gbps if self.bound_gbps else 0.0

    @staticmethod
    def header():
        """Column titles matching ``str(report)``."""
        return (f"{'what':<28} {'TLPs':>7} {'bytes':>11} {'time us':>10} {'GB/s':>7} "
                f"{'bound':>7} {'of bound':>8}")

    def __str__(self):
        return (f"{self.name:<28} {self.tlps:>7} {self.bytes:>11} {self.seconds * 1e6:>10.3f} "
                f"{self.gbps:>7.3f} {self.bound_gbps:>7.3f} {100 * self.fraction:>7.1f}%")


class ThroughputMeter:
    """Timestamp the TLPs one ``SimPort`` sends and report their throughput.

    Parameters
    ----------
    port : cocotbext.pcie.core.SimPort
        The sending port (``device.upstream_port`` for what a device sends, its ``other`` for
        what it receives; see :meth:`tx_of` / :meth:`rx_of`).
    name : str
        Label of the report line.
    select : callable, optional
        ``select(tlp) -> bool`` picks the TLPs metered (default: all), e.g. :func:`writes_only`.
    enabled : bool
        Start metering at once (else call :meth:`start`).

    Members
    -------
    records : list of (start_s, end_s, payload_bytes, wire_bytes)
        One entry per metered TLP (kept only if ``keep_records``): when it took the wire (for
        the hard-IP model's cut-through port, :class:`~peach2.sim.hardip.wire.CutThroughPort`,
        before the port was asked to send it) and when its last symbol left.
    """

    def __init__(self, port, name="", select=None, enabled=True, keep_records=False):
        self.port, self.name, self.select = port, name, select
        self.enabled, self.keep_records = enabled, keep_records
        self.reset()
        inner = port.handle_tx

        async def handle_tx(pkt):
            if not (self.enabled and isinstance(pkt, Tlp)
                    and (self.select is None or self.select(pkt))):
                await inner(pkt)
                return
            t0 = get_sim_time("ns")
            await inner(pkt)
            start = getattr(self.port, "sent_from", None)   # a cut-through port's own start
            if start is not None:
                t0 = get_time_from_sim_steps(start, "ns")
            self._record(t0 * 1e-9, get_sim_time("ns") * 1e-9, pkt)

        port.handle_tx = handle_tx  # instance attribute: SimPort._run_transmit looks it up

    @classmethod
    def tx_of(cls, device, **kwargs):
        """Meter the TLPs ``device`` sends on its upstream link."""
        return cls(device.upstream_port, **kwargs)

    @classmethod
    def rx_of(cls, device, **kwargs):
        """Meter the TLPs sent to ``device`` (its link partner's port; connect first)."""
        if device.upstream_port.other is None:
            raise RuntimeError("connect the device before metering what it receives")
        return cls(device.upstream_port.other, **kwargs)

    def reset(self):
        """Forget everything metered so far."""
        self.tlps = self.bytes = self.wire_bytes = 0
        self.first = self.last = None
        self.records = []

    def start(self):
        """Reset and start metering."""
        self.reset()
        self.enabled = True

    def stop(self):
        """Stop metering (the numbers so far stay)."""
        self.enabled = False

    def _record(self, t0, t1, tlp):
        payload, wire = tlp.get_payload_size(), tlp.get_wire_size()
        self.tlps += 1
        self.bytes += payload
        self.wire_bytes += wire
        if self.first is None:
            self.first = t0
        self.last = t1
        if self.keep_records:
            self.records.append((t0, t1, payload, wire))

    @property
    def link_rate(self):
        """Raw rate of the metered port, bytes/s."""
        sp = self.port.symbol_period
        return 1 / sp if sp else GEN2_X8_RATE

    def report(self, name=None):
        """Return a :class:`ThroughputReport` of what was metered."""
        seconds = (self.last - self.first) if self.first is not None else 0.0
        return ThroughputReport(name if name is not None else self.name, self.tlps, self.bytes,
                                self.wire_bytes, seconds, self.link_rate)
