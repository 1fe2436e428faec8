"""cocotb tests of two PEACH2 chips, each with its own host, cabled chip to chip.

::

    Host 0 (RC, memory) --Gen2 x8-- N  chip 0 (c0_)  E ==Gen2 x8== W  chip 1 (c1_)  N --Gen2 x8--
                                        W, S: terminate()             E, S: terminate()   Host 1
    topology "line": the one cable above (the default);
    topology "ring": Topology.ring(2), a second cable c0.W == c1.E, so 1 -> 0 goes c1.E -> c0.W.

Built by :class:`peach2.sim.harness.cluster.Cluster` on ``peach2.sim.hdl.chips_top.Chips(2)``: every host is
enumerated, every node's host window is mapped onto 1 MiB of its host's memory (above 4 GiB
unless ``above_4g`` is false), every chip is programmed with the route table of the topology.
Every hard-IP model runs strict (first protocol violation fails the test) with seeded random idle
cycles and TX backpressure, except in ``pio_latency``, which measures an idle system.
Parameters (``PEACH2_PARAMS``): ``topology``, ``above_4g``, ``rounds`` of the store pattern,
``self_stores``, ``idle``/``backpressure`` probabilities, ``latency_samples``, ``result_file``.

- ``pio_stores``: host 0 stores into node 1's host window and host 1 into node 0's, and each
  into its own node's window (``self_stores``: N in, N out), all at the same time: 1-4 byte
  stores at every byte offset 0..7, 8/16/64-byte stores (one crossing 4 KiB), 4 KiB bursts
  (split by the root complex at MPS 256 and at 4 KiB); the hosts' memories must equal a
  byte-exact reference, and the counters of both chips must agree with the TLPs sent.
- ``remote_read_rejected``: a host read of another node's window is answered with UR by the
  local chip and never reaches the cable.
- ``pio_latency``: 4-byte PIO store, host A write call to the data in host B's memory, per stage.
"""

import json
import random
import statistics

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time

from peach2.routes import Topology, default_address_map
from peach2.sim.harness import DROP_REASONS as DROPS
from peach2.sim.harness import Cluster
from peach2.sim.pcie import store_tlps
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
CLOCK_NS = 4


def topology(name):
    """The two-node topologies: ``line`` (one cable c0.E-c1.W) or ``ring`` (two cables)."""
    if name == "line":
        return Topology(2, {(0, "E"): 1, (1, "W"): 0})
    if name == "ring":
        return Topology.ring(2)
    raise ValueError(f"unknown topology {name!r}")


class TB:
    """Clock, reset and the two-node cluster."""

    def __init__(self, dut, topo="line", *, seed=SEED, host_size=1 << 20):
        self.dut = dut
        self.seed = seed
        self.rng = random.Random(seed)
        dut._log.info("seed %d, topology %s", seed, topo)
        Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi").start()
        self.topology = topology(topo)
        self.amap = default_address_map(2, host_size=host_size)
        # Shortest routes and an ideal hard IP, as this regression was measured with.
        self.cluster = Cluster(dut, self.topology, self.amap, seed=seed,
                               above_4g=PARAMS.get("above_4g", True), routes="shortest",
                               hardip_pipeline_ns=0.0)

    async def start(self, *, pauses=True):
        await self.cluster.reset_and_start()
        if pauses:
            self.cluster.set_pauses(random.Random(self.seed + 1),
                                    idle=PARAMS.get("idle", 0.2),
                                    backpressure=PARAMS.get("backpressure", 0.2))

    def path(self, src, dst):
        """Return the cable hops ``[(node, out port, next node, in port)]`` from src to dst."""
        cables = {}
        for a, pa, b, pb, _ in self.cluster.cables:
            cables[(a, pa)] = (b, pb)
            cables[(b, pb)] = (a, pa)
        hops, node = [], src
        while node != dst:
            port = self.topology.next_hop(node, dst)
            nb, pb = cables[(node, port)]
            hops.append((node, port, nb, pb))
            node = nb
        return hops


def store_pattern(rng, size, base=0):
    """Return ``[(offset, data)]``: the stores one host makes into a node's window.

    Offsets from ``base`` to ``base + 0x22003``; ``size`` is the window's.
    """
    stores = []
    at = base + 0x1000
    for length in (1, 2, 3, 4):                 # every sub-DW size at every byte offset
        for off in range(8):
            stores.append((at + off, rng.randbytes(length)))
            at += 16
    for length in (8, 16, 64):                  # aligned, odd and DW-but-not-QW aligned
        for off in (0, 3, 4):
            stores.append((at + off, rng.randbytes(length)))
            at += 128
    stores.append((base + 0x2000 - 5, rng.randbytes(64)))     # crosses 4 KiB: two TLPs
    stores.append((base + 0x2000 - 7, rng.randbytes(3)))      # overwrite part of it, in order
    for start in (0x10000, 0x11000, 0x20003):                 # 4 KiB bursts, one unaligned
        stores.append((base + start, rng.randbytes(4096)))
    assert all(off + len(d) <= size for off, d in stores)
    return stores


@cocotb.test()
async def pio_stores(dut):
    """Stores both ways at once land byte-exact; counters of both chips agree with the TLPs."""
    tb = TB(dut, PARAMS.get("topology", "line"))
    await tb.start()
    cluster, amap = tb.cluster, tb.amap
    rng = random.Random(SEED + 2)

    # Fill each node's memory with noise so that a wrong byte enable shows.
    shadow = []
    for node in range(2):
        _, region = cluster.memory(node)
        noise = rng.randbytes(amap.host_size)
        region[0:amap.host_size] = noise
        shadow.append(bytearray(noise))

    rounds = PARAMS.get("rounds", 1)
    pairs = [(0, 1), (1, 0)]
    if PARAMS.get("self_stores", True):
        # Each host also writes its own node's window (N -> N), in another part of it: the
        # chip's N output then serves two inputs (N and the cable) at once.
        pairs += [(0, 0), (1, 1)]
    flows = {(s, d): sum((store_pattern(rng, amap.host_size, 0x80000 if s == d else 0)
                          for _ in range(rounds)), [])
             for s, d in pairs}
    expected_tlps = {}
    for (src, dst), stores in flows.items():
        base, _ = amap.window(dst, "host")
        expected_tlps[(src, dst)] = sum(len(store_tlps(base + off, len(d), cluster.mps))
                                        for off, d in stores)
        for off, data in stores:
            shadow[dst][off:off + len(data)] = data

    async def flow(src, dst):
        for off, data in flows[(src, dst)]:
            await cluster.pio_write(src, dst, off, data)

    t0 = get_sim_time("ns")
    tasks = [cocotb.start_soon(flow(s, d)) for s, d in flows]
    for t in tasks:
        await t
    for dst in range(2):
        await cluster.wait_writes(dst, sum(k for (_, d), k in expected_tlps.items() if d == dst))
    elapsed = get_sim_time("ns") - t0
    await cluster.quiet()
    for node in range(2):
        _, region = cluster.memory(node)
        got = bytes(region[0:amap.host_size])
        if got != bytes(shadow[node]):
            bad = [i for i in range(amap.host_size) if got[i] != shadow[node][i]]
            raise AssertionError(f"host {node} memory differs at {len(bad)} bytes, first at "
                                 f"offsets {[hex(b) for b in bad[:8]]}")
    n_bytes = sum(len(d) for stores in flows.values() for _, d in stores)
    dut._log.info("%d stores, %d bytes, %s TLPs (per flow) landed byte-exact in %.0f ns",
                  sum(map(len, flows.values())), n_bytes, expected_tlps, elapsed)

    # Where each flow's TLPs must have gone, from the topology; compared with the captures and
    # the counters of both chips.
    tx = {(n, p): 0 for n in range(2) for p in "NEWS"}
    rx = dict(tx)
    for (src, dst), k in expected_tlps.items():
        rx[(src, "N")] += k
        tx[(dst, "N")] += k
        for node, out, nb, inp in tb.path(src, dst):
            tx[(node, out)] += k
            rx[(nb, inp)] += k
    counts = await cluster.counters()
    for node, chip in enumerate(cluster.chips):
        dut._log.info("chip %d counters %s", node, counts[node])
        for p in "NEWS":
            c = counts[node][p]
            writes = [t for t in chip.sent[p.lower()] if not t.is_completion()]
            assert len(writes) == tx[(node, p)], (node, p, len(writes), tx[(node, p)])
            for reason in DROPS:
                assert c[reason] == 0, f"chip {node} port {p}: {reason} = {c[reason]}"
            if p == "N":    # plus the register traffic of the host
                assert c["RX_TLPS"] >= rx[(node, p)] and c["TX_TLPS"] >= tx[(node, p)], c
            else:
                assert (c["RX_TLPS"], c["TX_TLPS"]) == (rx[(node, p)], tx[(node, p)]), \
                    (node, p, c, rx[(node, p)], tx[(node, p)])
    for a, pa, b, pb, _ in cluster.cables:
        assert counts[a][pa]["TX_TLPS"] == counts[b][pb]["RX_TLPS"]
        assert counts[b][pb]["TX_TLPS"] == counts[a][pa]["RX_TLPS"]
    cluster.check()


@cocotb.test()
async def remote_read_rejected(dut):
    """Host 0 reads node 1's window: UR completion at chip 0, nothing on the cable; stores
    still work afterwards (remote reads are not part of TCA, 002 section 3.5)."""
    tb = TB(dut, PARAMS.get("topology", "line"))
    await tb.start()
    cluster, amap = tb.cluster, tb.amap
    base, _ = amap.window(1, "host")
    try:
        await cluster.drivers[0].tca_bar.read(base + 0x40 - amap.tca_base, 4, timeout=10,
                                              timeout_unit="us")
    except Exception as exc:        # cocotbext-pcie raises a plain Exception on UR
        assert "Unsuccessful completion" in str(exc), exc
    else:
        raise AssertionError("a remote read completed successfully")
    await cluster.pio_write(0, 1, 0x40, b"\x11\x22\x33\x44")
    await cluster.wait_writes(1, 1)
    assert bytes(cluster.memory(1)[1][0x40:0x44]) == b"\x11\x22\x33\x44"
    await cluster.quiet()
    counts = await cluster.counters()
    n0 = counts[0]["N"]
    assert (n0["READ_REJECTED"], n0["UR_SENT"]) == (1, 1), n0
    first = tb.path(0, 1)[0]
    for a, pa, b, pb, _ in cluster.cables:
        want = 1 if (a, pa, b, pb) == first else 0      # only the store crossed a cable
        assert counts[a][pa]["TX_TLPS"] == counts[b][pb]["RX_TLPS"] == want, counts
        assert counts[b][pb]["TX_TLPS"] == counts[a][pa]["RX_TLPS"] == 0, counts
    for node in range(2):
        for p in "EWS":
            for reason in DROPS:
                assert counts[node][p][reason] == 0, (node, p, reason, counts[node][p])
    cluster.check()


def link_ns(port, tlp):
    """Return the time ``tlp`` takes on the link sent by SimPort ``port``: wire + port delays."""
    return (tlp.get_wire_size() * port.symbol_period + port.link_delay_steps / port.time_scale) \
        * 1e9


class StageClock:
    """Time stamps of one TLP at each stage of its path (hooks on the hard-IP models).

    A chip stage runs from the EOP beat the RX model presents to the chip to the EOP beat the TX
    model takes from it; a link stage from there to the EOP beat presented at the next chip.
    """

    def __init__(self, tb, src, dst):
        cluster = tb.cluster
        self.stamps, self.tlps = {}, {}
        chips = cluster.chips
        # (label, model, "rx" | "tx")
        self.stages = [(f"chip {src} N rx", chips[src].models["n"], "rx")]
        #: SimPort sending on each link of the path, after the stage of the same index.
        self.senders = [chips[src].host.root_port.downstream_port]
        for node, out, nb, inp in tb.path(src, dst):
            self.stages.append((f"chip {node} {out} tx", chips[node].models[out.lower()], "tx"))
            self.senders.append(chips[node].models[out.lower()].upstream_port)
            self.stages.append((f"chip {nb} {inp} rx", chips[nb].models[inp.lower()], "rx"))
        self.stages.append((f"chip {dst} N tx", chips[dst].models["n"], "tx"))
        self.senders.append(chips[dst].models["n"].upstream_port)
        self._saved = [(model, model.on_rx, model.on_tx) for _, model, _ in self.stages]
        for label, model, kind in self.stages:
            self._hook(label, model, kind)

    def _hook(self, label, model, kind):
        def stamp(tlp):
            self.stamps.setdefault(label, get_sim_time("ns"))
            self.tlps.setdefault(label, tlp)
        if kind == "rx":
            model.on_rx = lambda tlp, bardec: stamp(tlp)
        else:
            orig = model.on_tx
            model.on_tx = lambda tlp: (stamp(tlp), orig(tlp))[1]

    def link_ns(self):
        """Return the wire + port delay time of the TLP on each link of the path."""
        tx_labels = [lbl for lbl, _, kind in self.stages if kind == "tx"]
        first = self.tlps[self.stages[0][0]]
        return [link_ns(port, tlp) for port, tlp in
                zip(self.senders, [first] + [self.tlps[lbl] for lbl in tx_labels])]

    def reset(self):
        self.stamps.clear()
        self.tlps.clear()

    def close(self):
        """Put back the models' hooks."""
        for model, on_rx, on_tx in self._saved:
            model.on_rx, model.on_tx = on_rx, on_tx


@cocotb.test()
async def pio_latency(dut):
    """4-byte PIO store latency, host A's write call -> data in host B's memory, idle system.

    Reported per stage and split into: links (wire time of the TLP at 4 GB/s plus the 10 ns
    fixed port delay, per link), chips (RX EOP beat to TX EOP beat, in 4 ns cycles) and the
    rest (the models' beat timing: waiting for a clock edge, presenting the beats).
    """
    tb = TB(dut, PARAMS.get("topology", "line"))
    await tb.start(pauses=False)
    cluster = tb.cluster
    rng = random.Random(SEED + 3)
    samples = PARAMS.get("latency_samples", 8)
    results = []
    for src, dst in ((0, 1), (1, 0)):
        clock = StageClock(tb, src, dst)
        totals, per_stage, links = [], {}, []
        _, region = cluster.memory(dst)
        for k in range(samples):
            await ClockCycles(dut.clk, 50 + rng.randrange(4))
            off = 0x3000 + 8 * k + rng.choice((0, 4))     # aligned: one DW
            data = rng.randbytes(4)
            clock.reset()
            seen = len(cluster.arrivals[dst])
            t0 = get_sim_time("ns")
            await cluster.pio_write(src, dst, off, data)
            await cluster.wait_writes(dst, seen + 1)
            t_mem = cluster.arrivals[dst][seen][0]
            assert bytes(region[off:off + 4]) == data
            totals.append(t_mem - t0)
            links.append(sum(clock.link_ns()))
            marks = [("host write call", t0)] + [(lbl, clock.stamps[lbl])
                                                for lbl, _, _ in clock.stages]
            marks.append((f"host {dst} memory", t_mem))
            for (a, ta), (b, tb_) in zip(marks, marks[1:]):
                per_stage.setdefault(f"{a} -> {b}", []).append(tb_ - ta)
        clock.close()
        stages = {name: statistics.median(v) for name, v in per_stage.items()}
        chip_ns = sum(ns for name, ns in stages.items() if " rx -> " in name)
        total = statistics.median(totals)
        link = statistics.median(links)
        result = {"name": f"PIO 4-byte store, host {src} -> host {dst}",
                  "hops": len(tb.path(src, dst)), "ns_median": total, "ns_min": min(totals),
                  "ns_max": max(totals), "samples": len(totals), "stages_ns": stages,
                  "links_ns": link, "chips_ns": chip_ns, "chip_cycles": chip_ns / CLOCK_NS,
                  "model_beat_timing_ns": total - link - chip_ns, "paper_ns": 782}
        results.append(result)
        lines = "\n".join(f"    {name:45s} {ns:7.1f} ns" for name, ns in stages.items())
        dut._log.info("%s: %.1f ns median (min %.1f, max %.1f, %d samples): links %.1f ns, "
                      "chips %.1f ns (%d cycles), model beat timing %.1f ns\n%s",
                      result["name"], total, min(totals), max(totals), len(totals), link,
                      chip_ns, chip_ns / CLOCK_NS, total - link - chip_ns, lines)
    out = PARAMS.get("result_file")
    if out:
        with open(out, "w") as f:
            json.dump({"pio_latency": results, "clock_ns": CLOCK_NS,
                       "includes": "3 Gen2 x8 links (wire size x 0.25 ns + 10 ns port delay), "
                       "the hard-IP models' 250 MHz beat timing, both chips' cycles; not the "
                       "hard IPs' PHY/DLL/TL pipelines, cable length, host CPU or memory"},
                      f, indent=1)
    cluster.check()
