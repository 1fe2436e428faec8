"""Every link's bytes over time during a run on the co-simulated machine: the TCA cables from
their HDL counters, the InfiniBand ports from the fabric model's packets.

::

    TCA cable j, one direction       cable<j>_a2b_bytes (HDL counter, payload bytes of the TLPs
    (chip a port -> chip b port)     put on the wire), read at every window edge (W = 112 ns):
                                     the bytes counted in a window, sent on at most the link's
                                     rate (a TLP counted at its start spills into the next
                                     window, so no window is over 100 %)
    InfiniBand port g, "up"          every packet HCA g puts on its cable to the switch, and
    (HCA g -> switch) and "down"     every packet the switch puts on the cable to HCA g: its
    (switch -> HCA g)                payload bytes spread over the time it is on the wire
                                     (Crossbar.on_wire), exact to the picosecond

    bins of k windows: utilisation = bytes in the bin / (bin time x 4 GB/s)

Both networks are 4 GB/s a direction after 8b/10b: PCIe Gen2 x8 (5 GT/s x 8 lanes, the cable
model's 16 bytes per 4-ns cycle) and InfiniBand 4x QDR (``Params.data_bytes_per_s``).  The
bytes are payload (data) bytes: headers, DLLPs, acknowledgements are not counted, so a link
saturated by 256-byte TLPs shows about 0.91 and one saturated by 2 KiB InfiniBand packets
about 0.99.

Recording is opt-in and only watches: it reads counters the HDL top brings out and is told of
the packets the fabric moves; it changes no time and no byte.  Cost: one signal read per cable
direction per window, a few Python operations per InfiniBand packet.
"""

from peach2.routes import cable_plan

from .plan import CLOCK_PS

__all__ = ["LinkTrace", "LINK_BYTES_PER_S", "BINS", "spread"]

#: Data rate of one direction of a TCA cable (PCIe Gen2 x8) and of an InfiniBand 4x QDR link.
LINK_BYTES_PER_S = 4_000_000_000
#: Default number of time bins of a result (a bin is a whole number of windows).
BINS = 120
_WRAP = 1 << 32


class LinkTrace:
    """The links of ``sim`` (a :class:`~.assembly.MachineSim`, started, worlds made) watched
    from :meth:`begin` to :meth:`finish`.

    Every rank of an ``mpiexec`` makes one and calls :meth:`begin` and :meth:`finish` at the
    same points (:meth:`finish` is collective): each records its own sub-clusters' cables and
    its partitions' InfiniBand ports, :meth:`finish` puts them together.
    """

    def __init__(self, sim):
        self.sim = sim
        plan, n = sim.plan, sim.plan.n
        one = cable_plan(plan.topology)
        #: ``(name, signal, s)`` per local cable direction, in the plan's order.
        self._cables = []
        for k, s in enumerate(sim.local):
            for j, (a, pa, b, pb) in enumerate(one):
                top = k * len(one) + j
                ga, gb = s * n + a, s * n + b
                for d, src, dst in (("a2b", f"{ga}.{pa}", f"{gb}.{pb}"),
                                    ("b2a", f"{gb}.{pb}", f"{ga}.{pa}")):
                    self._cables.append((f"{src}->{dst}", getattr(sim.dut, f"cable{top}_{d}_bytes"),
                                         s))
        self._window = sim.driver.window_ps
        self._per_window = self._window * LINK_BYTES_PER_S // 10 ** 12    # 448 bytes
        self._fabrics = [p.fabric for p in sim.machine.partitions]
        self._ports = sorted(g for p in sim.machine.partitions for g in p.ports)
        self.start_ps = None

    # -- recording ---------------------------------------------------------------------------

    def begin(self, start_ps):
        """Start recording at ``start_ps``, a window edge where cocotb and the machine stand."""
        self.start_ps = start_ps
        self._last = [self._read(sig) for _, sig, _ in self._cables]
        self._backlog = [0] * len(self._cables)
        self._windows = [[] for _ in self._cables]       # bytes sent on per window
        self._counted = [0] * len(self._cables)
        self._wire = {(d, g): [] for g in self._ports for d in ("up", "down")}
        self._delivered = {(d, g): 0 for g in self._ports for d in ("up", "down")}
        self._pending_up = []                           # (source port, bytes) delivered here
        self.sim.driver.watchers.append(self._sample)
        for f in self._fabrics:
            f.on_wire, f.on_delivered = self._on_wire, self._on_delivered

    def stop(self):
        """Stop recording (:meth:`finish` does; after an error, the caller)."""
        if self._sample in self.sim.driver.watchers:
            self.sim.driver.watchers.remove(self._sample)
        for f in self._fabrics:
            f.on_wire = f.on_delivered = None

    @staticmethod
    def _read(signal):
        return int(signal.value)

    def _sample(self, edge):
        for i, (_, sig, _) in enumerate(self._cables):
            now = self._read(sig)
            new = (now - self._last[i]) % _WRAP
            self._last[i] = now
            self._counted[i] += new
            self._backlog[i] += new
            sent = min(self._backlog[i], self._per_window)
            self._backlog[i] -= sent
            self._windows[i].append(sent)

    def _on_wire(self, link, port, start_ps, end_ps, pkt):
        if pkt.payload_bytes:
            self._wire[(link, port)].append((start_ps, end_ps, pkt.payload_bytes))

    def _on_delivered(self, m):
        self._delivered[("down", m.dst)] += m.nbytes
        self._pending_up.append((m.src, m.nbytes))

    # -- the result ---------------------------------------------------------------------------

    def finish(self, end_ps, *, bins=BINS):
        """Stop recording; collective.  Return the trace from the start to ``end_ps`` (later if
        a link was still busy) in bins of whole windows, at most about ``bins`` of them::

            {"start_ps", "bin_ps", "bins", "bytes_per_s", "window_ps",
             "links": [{"name", "kind": "tca" | "ib", "subcluster" | "port", "dir",
                        "bytes": [per bin], "total"}]}

        ``total`` is what the link's own account says (the cable counter's difference; the
        bytes of the messages the fabric delivered from or to the port) and equals
        ``sum(bytes)``.
        """
        self.stop()
        # cables: what is still queued goes out at the link's rate after the last edge
        for i in range(len(self._cables)):
            while self._backlog[i]:
                sent = min(self._backlog[i], self._per_window)
                self._backlog[i] -= sent
                self._windows[i].append(sent)
        mine = {"cables": [(name, s, w, c) for (name, _, s), w, c
                           in zip(self._cables, self._windows, self._counted)],
                "wire": {f"{d}:{g}": v for (d, g), v in self._wire.items()},
                "delivered": {f"{d}:{g}": v for (d, g), v in self._delivered.items()},
                "sent": self._pending_up}
        parts = self.sim.transport.allgather(mine)
        cables = [c for part in parts for c in part["cables"]]
        wire, delivered, sent = {}, {}, []
        for part in parts:
            wire.update(part["wire"])
            delivered.update(part["delivered"])
            sent += part["sent"]
        for src, nbytes in sent:                  # a message's bytes went up at its source
            delivered[f"up:{src}"] += nbytes
        last = max([end_ps] + [self.start_ps + len(w) * self._window for _, _, w, _ in cables]
                   + [e for v in wire.values() for _, e, _ in v])
        windows = -(-(last - self.start_ps) // self._window)
        per_bin = max(1, -(-windows // bins))
        bin_ps = per_bin * self._window
        count = -(-windows // per_bin)
        links = []
        for name, s, w, total in sorted(cables, key=lambda c: c[1]):
            series = [sum(w[b * per_bin:(b + 1) * per_bin]) for b in range(count)]
            links.append({"name": name, "kind": "tca", "subcluster": s, "bytes": series,
                          "total": total})
        ports = sorted({int(k.split(":")[1]) for k in wire})
        for d in ("up", "down"):
            for g in ports:
                series = spread(wire[f"{d}:{g}"], self.start_ps, bin_ps, count)
                name = f"HCA {g} -> switch" if d == "up" else f"switch -> HCA {g}"
                links.append({"name": name, "kind": "ib", "port": g, "dir": d,
                              "bytes": series, "total": delivered[f"{d}:{g}"]})
        return {"start_ps": self.start_ps, "end_ps": end_ps, "bin_ps": bin_ps, "bins": count,
                "window_ps": self._window, "bytes_per_s": LINK_BYTES_PER_S, "links": links}

    def __repr__(self):
        return (f"LinkTrace({len(self._cables)} cable directions, {len(self._ports)} InfiniBand "
                f"ports, window {self._window // CLOCK_PS} cycles)")


def spread(intervals, start, bin_ps, count):
    """Integer bytes per bin of ``(start_ps, end_ps, bytes)`` intervals, each spread evenly
    over its time on the wire (rounded so that a packet's bins add up to its bytes)."""
    out = [0] * count
    for t0, t1, nbytes in intervals:
        t0, t1 = t0 - start, t1 - start
        span = max(1, t1 - t0)
        b = max(0, t0 // bin_ps)
        done = 0
        while done < nbytes:
            edge = (b + 1) * bin_ps
            upto = nbytes if edge >= t1 else nbytes * (edge - t0) // span
            out[min(b, count - 1)] += upto - done
            done = upto
            b += 1
    return out
