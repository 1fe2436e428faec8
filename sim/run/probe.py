"""Handshake probes: when did each named stream move a beat?

A waveform answers "what happened at 41 236 ns"; a probe answers "where do the cycles of this
transfer go": it timestamps every transfer (``valid`` and ``ready`` both high at a rising clock
edge) of a set of named valid/ready pairs anywhere in the design, and summarises them as counts,
first and last times, runs of back-to-back beats and the gaps between them.  Run it around one
DMA or one burst of packets, then compare when the read requests leave, when the completions
come back and when the writes reach the wire.

Example (the DMA's read requests and the E port's transmit side of chip 0)::

    probe = HandshakeProbe(dut.clk)
    probe.add_stream("dma.rd", dut.c0.dma, "o_rd")            # o_rd__valid / o_rd__ready
    probe.add("e_tx.sop", dut.c0.e_tx.tx_st_sop, dut.c0.e_tx.tx_st_valid)
    probe.start()
    t0 = probe.now()
    ...                                                       # the transfer
    probe.stop()
    print(probe.report(origin=t0))
    probe.save("trace.json", origin=t0)

Signal names are the ones of the generated Verilog: an Amaranth stream member ``o_rd`` of a
submodule is ``o_rd__valid`` and ``o_rd__ready`` on that instance.  A pair with no ``ready`` (a
strobe, or a ``valid`` that cannot be held) counts every cycle ``valid`` is high.
"""

import collections
import json

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from .signals import bit_value

__all__ = ["HandshakeProbe"]


class HandshakeProbe:
    """Timestamp the transfers of named valid/ready pairs at each rising edge of ``clk``.

    Parameters
    ----------
    clk : cocotb handle
        The clock the streams are synchronous to.
    unit : str
        Time unit of the recorded times (``"ns"`` by default).

    Attributes
    ----------
    times : dict of str to list of int
        Per name, the simulation time of each transfer, in order.
    """

    def __init__(self, clk, *, unit="ns"):
        self.clk = clk
        self.unit = unit
        self.times = {}
        self._pairs = []
        self._task = None

    def add(self, name, valid, ready=None):
        """Probe ``valid`` (and ``ready``, when given) as the stream ``name``."""
        if name in self.times:
            raise ValueError(f"a stream named {name!r} is already probed")
        self._pairs.append((name, valid, ready))
        self.times[name] = []

    def add_stream(self, name, instance, member, *, ready=True):
        """Probe the Amaranth stream ``member`` of ``instance`` (``<member>__valid`` and, with
        ``ready``, ``<member>__ready``)."""
        try:
            valid = getattr(instance, f"{member}__valid")
            rdy = getattr(instance, f"{member}__ready") if ready else None
        except AttributeError as exc:
            raise ValueError(f"{instance._path} has no stream {member!r} "
                             f"({member}__valid/{member}__ready)") from exc
        self.add(name, valid, rdy)

    def now(self):
        """The current simulation time in the probe's unit (an int when it is whole)."""
        t = get_sim_time(self.unit)
        return int(t) if t == int(t) else t

    def start(self):
        """Start recording (a background task until :meth:`stop`)."""
        if self._task is not None:
            raise RuntimeError("the probe is already running")
        self._task = cocotb.start_soon(self._run())

    def stop(self):
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def clear(self):
        for ts in self.times.values():
            ts.clear()

    async def _run(self):
        edge = RisingEdge(self.clk)
        while True:
            await edge
            await ReadOnly()
            t = self.now()
            for name, valid, ready in self._pairs:
                if bit_value(valid) and (ready is None or bit_value(ready)):
                    self.times[name].append(t)

    def summary(self, *, origin=0, period=None):
        """Return ``{name: {...}}`` in order of each stream's first transfer.

        Each entry: ``count``; ``first`` and ``last`` (times from ``origin``); ``runs``, the
        ``[start, end]`` of each run of transfers no more than ``period`` apart (default: the
        smallest gap seen in any stream, one clock period when something moved back to back);
        ``gaps``, a histogram ``{gap: how often}`` of the times between transfers.
        """
        if period is None:
            gaps = [b - a for ts in self.times.values() for a, b in zip(ts, ts[1:])]
            period = min(gaps, default=0)
        out = {}
        for name, ts in sorted(self.times.items(),
                               key=lambda kv: kv[1][0] if kv[1] else float("inf")):
            rel = [t - origin for t in ts]
            runs = []
            for t in rel:
                if runs and t - runs[-1][1] <= period:
                    runs[-1][1] = t
                else:
                    runs.append([t, t])
            out[name] = {
                "count": len(rel),
                "first": rel[0] if rel else None,
                "last": rel[-1] if rel else None,
                "runs": runs,
                "gaps": dict(sorted(collections.Counter(b - a for a, b in zip(rel, rel[1:]))
                                    .items())),
            }
        return out

    def report(self, *, origin=0, period=None, gaps=6):
        """A text table: per stream, the count, first and last transfer, the number of runs and
        the ``gaps`` most frequent gaps."""
        rows = [("stream", "count", f"first ({self.unit})", f"last ({self.unit})", "runs",
                 "most frequent gaps")]
        for name, s in self.summary(origin=origin, period=period).items():
            common = sorted(s["gaps"].items(), key=lambda kv: -kv[1])[:gaps]
            rows.append((name, str(s["count"]), _fmt(s["first"]), _fmt(s["last"]),
                         str(len(s["runs"])), ", ".join(f"{g} x{n}" for g, n in common)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                         for r in rows)

    def save(self, path, *, origin=0):
        """Write the transfer times (from ``origin``) and the summary as JSON."""
        with open(path, "w") as f:
            json.dump({"unit": self.unit, "origin": origin,
                       "times": {k: [t - origin for t in v] for k, v in self.times.items()},
                       "summary": self.summary(origin=origin)}, f, indent=1)


def _fmt(t):
    return "-" if t is None else f"{t:g}"
