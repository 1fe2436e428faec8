"""cocotb tests of the collectives on the HDL sub-cluster (``peach2.sim.hdl.cluster_top``).

Parameters (``PEACH2_PARAMS``): ``topology`` (``ring:4``, ``2x4``, ``2x8``), ``host_size``
(bytes of every host window), ``pipeline_ns`` (the hard IPs' latency), ``awake`` (the N
hard-IP models never sleep while idle: slower, the same timing), ``gpu`` (every node has one
GPU, ``peach2.sim.pcie.gpu``, and the collectives' data lives in GPU window 0 instead of host memory:
DMAs read the local GPU and write remote GPUs; completion flags stay in host memory, where the
CPU polls them), and per test:

- ``collectives_check``: every collective of ``peach2.sim.collectives.algorithms`` / ``peach2.sim.collectives.halo``
  the parameters name, one after the other in one simulation: ``bcast`` (sizes), ``roots``,
  ``allgather`` (block sizes), ``ring_allgather`` (block sizes, the ring algorithm along
  the topology's rings), ``halo`` (``[N, px, py]`` list), ``collision`` (bytes per
  sender, or 0), ``fault`` (a put from unmapped memory must raise the channel's DmaFault, puts to an
  unrouted node PutFault).
  Every host window (and GPU memory) starts as random noise; after each collective every byte
  of every node's host window and GPU memory is compared with the reference model (inputs,
  results, flags; nothing else may change), then every chip's drop counters must be 0.
- ``collectives_bench``: times of ``bcast_sizes``, ``allgather_sizes``,
  ``ring_allgather_sizes``, ``halo_ns`` (on the
  ``halo_grid``), ``collision_sizes`` and the latency of an 8-byte put from node 0 to the
  nearest node at each hop count (hops from the chips' route set), each result checked
  against the reference; written to ``result_file`` (JSON) after every point.
"""

import json
import random
from dataclasses import replace

import cocotb
from cocotb.triggers import ClockCycles

from peach2.params import PutError
from peach2.routes import RouteSet, Topology, default_address_map
from peach2.sim.collectives import (
    FLAG,
    Collective,
    HaloGrid,
    Memories,
    Place,
    allgather,
    allgather_reference,
    broadcast,
    broadcast_reference,
    direct_allgather,
    direct_broadcast,
    halo_exchange,
    halo_local,
    halo_reference,
    puts,
    ring_allgather,
    run,
)
from peach2.sim.driver import DmaFault, PutFault
from peach2.sim.harness import DROP_REASONS as DROPS
from peach2.sim.harness import Cluster
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()


class TB:
    """The sub-cluster, its memories by place, and a shadow of every window it checks."""

    def __init__(self, dut):
        self.dut = dut
        self.topology = Topology.parse(PARAMS.get("topology", "ring:4"))
        self.n = self.topology.n_nodes
        gpus = 1 if PARAMS.get("gpu") else 0
        self.amap = default_address_map(self.n, host_size=PARAMS.get("host_size", 1 << 20),
                                        n_gpus=gpus)
        self.routes = RouteSet.build(self.topology, self.amap, "safe")
        self.cluster = Cluster(dut, self.topology, self.amap, seed=SEED, hdl_cables=True,
                               routes=self.routes,
                               hardip_pipeline_ns=PARAMS.get("pipeline_ns", 0.0))
        #: The window the collectives' data lives in; flags are always in host memory.
        self.window = ("gpu", 0) if gpus else "host"
        self.windows = ["host"] + ([self.window] if gpus else [])
        self.rng = random.Random(SEED + 5)
        self.mem = None
        self.shadow = {}

    async def start(self, noise=True):
        if PARAMS.get("awake"):     # the N models never sleep (a check of their sleeping)
            for chip in self.cluster.chips:
                for model in chip.models.values():
                    model.sleep_when_idle = False
        await self.cluster.reset_and_start()
        self.mem = Memories(self.cluster)
        for window in self.windows:
            size = self.amap.window(0, window)[1]
            self.shadow[window] = []
            for node in range(self.n):
                data = self.rng.randbytes(size) if noise else bytes(size)
                self.mem.write(Place(node, window, 0), data)
                self.shadow[window].append(bytearray(data))

    def place(self, node, offset):
        """``offset`` in the collectives' window of ``node``."""
        return Place(node, self.window, offset)

    def put(self, place, data):
        """Write an input (memory and shadow)."""
        self.mem.write(place, data)
        self.expect(place, data)

    def expect(self, place, data):
        self.shadow[place.window][place.node][place.offset:place.offset + len(data)] = data

    def check(self, what, coll):
        """Flags of ``coll`` set, then every checked window equal to its shadow."""
        for place in coll.flags:
            self.expect(place, FLAG.to_bytes(4, "little"))
        for window, shadows in self.shadow.items():
            for node, want in enumerate(shadows):
                self.mem.assert_equal(Place(node, window, 0), want, what)

    async def counters_clean(self):
        await self.cluster.assert_no_drops(DROPS)


async def run_bcast(tb, size, root, buf, direct=False, paths="dma"):
    """Broadcast of ``size`` bytes from ``root``: binomial tree, or with ``direct`` in one
    step; ``paths`` as :func:`peach2.sim.collectives.run`'s."""
    nodes = list(range(tb.n))
    data = tb.rng.randbytes(size)
    tb.put(tb.place(root, buf), data)
    build = direct_broadcast if direct else broadcast
    coll = build(tb.mem, nodes, buf, size, root=root, window=tb.window)
    result = await run(tb.mem, coll, paths=paths)
    for node, want in zip(nodes, broadcast_reference(data, tb.n)):
        tb.expect(tb.place(node, buf), want)
    tb.check(f"{coll.name} of {size} B from {root} ({paths})", coll)
    return result


def ring_length(topology):
    """The nodes of each ring of a ``ring:K`` or ``2xK`` topology string (the ring Allgather's
    ``ring``); a line has no ring."""
    kind, _, k = topology.partition(":")
    if kind == "ring":
        return int(k)
    if "x" in kind:
        return int(kind.split("x")[1])
    raise ValueError(f"{topology} has no ring for the ring Allgather")


async def run_allgather(tb, size, buf, ring=False, direct=False, paths="dma"):
    """Allgather of ``size``-byte blocks: recursive doubling, with ``ring`` the ring algorithm
    along the topology's rings, with ``direct`` in one step; ``paths`` as ``run``'s."""
    nodes = list(range(tb.n))
    blocks = [tb.rng.randbytes(size) for _ in nodes]
    for r, node in enumerate(nodes):
        tb.put(tb.place(node, buf + r * size), blocks[r])
    if ring:
        coll = ring_allgather(tb.mem, nodes, buf, size, window=tb.window,
                              ring=ring_length(PARAMS.get("topology", "ring:4")))
    elif direct:
        coll = direct_allgather(tb.mem, nodes, buf, size, window=tb.window)
    else:
        coll = allgather(tb.mem, nodes, buf, size, window=tb.window)
    result = await run(tb.mem, coll, paths=paths)
    for node, want in zip(nodes, allgather_reference(blocks)):
        tb.expect(tb.place(node, buf), want)
    tb.check(f"{coll.name} of {size} B blocks ({paths})", coll)
    return result


#: The small-message cases (``small`` parameter): kind -> runner.
SMALL = {
    "bcast": lambda tb, size, buf, paths: run_bcast(tb, size, 0, buf, paths=paths),
    "direct_bcast": lambda tb, size, buf, paths: run_bcast(tb, size, 0, buf, direct=True,
                                                           paths=paths),
    "allgather": lambda tb, size, buf, paths: run_allgather(tb, size, buf, paths=paths),
    "direct_allgather": lambda tb, size, buf, paths: run_allgather(tb, size, buf, direct=True,
                                                                   paths=paths),
}


async def run_halo(tb, grid, buf, order="pairwise"):
    nodes = list(range(grid.px * grid.py))
    whole = tb.rng.randbytes(grid.n ** 3 * grid.elem)
    before = []
    for r, node in enumerate(nodes):
        fill = bytes(tb.mem.read(tb.place(node, buf), grid.local_bytes))
        before.append(halo_local(grid, whole, r, fill))
        tb.put(tb.place(node, buf), before[-1])
    coll = halo_exchange(tb.mem, grid, nodes, buf, window=tb.window, order=order)
    result = await run(tb.mem, coll)
    for r, node in enumerate(nodes):
        tb.expect(tb.place(node, buf), halo_reference(grid, whole, r, before[r]))
    tb.check(f"halo N={grid.n} on {grid.px}x{grid.py} ({order})", coll)
    return result


def collision_nodes(topology):
    """A receiver and the two neighbours that send into it (its W and E links)."""
    receiver = 2
    senders = sorted({b for (a, _), b in topology.links.items() if a == receiver})[:2]
    return senders, receiver


async def run_puts(tb, plan, buf):
    """``plan``: ``[(src node, dst node, size)]``, source and destination at ``buf`` plus the
    transfer's own slot; returns ``(Result, Collective)``."""
    transfers, at = [], buf
    for src, dst, size in plan:
        data = tb.rng.randbytes(size)
        tb.put(tb.place(src, at), data)
        transfers.append((tb.place(src, at), tb.place(dst, at), size))
        tb.expect(tb.place(dst, at), data)
        at += -(-size // 64) * 64
    coll = puts(tb.mem, transfers)
    result = await run(tb.mem, coll)
    tb.check(f"puts {plan}", coll)
    return result, coll


def arrival(result, coll, i):
    """Simulated ns from the start to transfer ``i``'s completion write at its receiver."""
    dst = coll.info["transfers"][i][1].node
    return result.seen[(dst, coll.info["flags"][i])] - result.start


@cocotb.test()
async def collectives_check(dut):
    """Broadcast, Allgather, halo exchange and the collision case, byte-exact everywhere."""
    tb = TB(dut)
    await tb.start()
    log = dut._log
    buf = tb.mem.symmetric(PARAMS.get("buffer", 256 * 1024), window=tb.window)
    for size in PARAMS.get("bcast", []):
        for root in PARAMS.get("roots", [0]):
            r = await run_bcast(tb, size, root % tb.n, buf)
            log.info("broadcast %d B from %d on %d nodes: %.0f ns", size, root, tb.n, r.time)
    for size in PARAMS.get("allgather", []):
        r = await run_allgather(tb, size, buf)
        log.info("allgather %d B blocks on %d nodes: %.0f ns", size, tb.n, r.time)
    for size in PARAMS.get("ring_allgather", []):
        r = await run_allgather(tb, size, buf, ring=True)
        log.info("ring allgather %d B blocks on %d nodes: %.0f ns", size, tb.n, r.time)
    for kind, size, paths in PARAMS.get("small", []):
        r = await SMALL[kind](tb, size, buf, paths)
        log.info("%s of %d B on %d nodes (%s): %.0f ns", kind, size, tb.n, paths, r.time)
    for n, px, py in PARAMS.get("halo", []):
        for order in ("pairwise", "naive"):
            r = await run_halo(tb, HaloGrid(n, px, py), buf, order)
            log.info("halo N=%d on %dx%d (%s): %.0f ns", n, px, py, order, r.time)
    size = PARAMS.get("collision", 0)
    if size:
        senders, receiver = collision_nodes(tb.topology)
        result, coll = await run_puts(tb, [(s, receiver, size) for s in senders], buf)
        each = [arrival(result, coll, i) for i in range(2)]
        log.info("collision: %s -> %d, %d B each: %s ns, total %.3f GB/s", senders, receiver,
                 size, [round(t) for t in each], 2 * size / max(each))
    if PARAMS.get("fault"):
        await bad_source(tb, buf)
        await bad_destination(tb, buf)
    await tb.counters_clean()
    tb.cluster.check()
    await ClockCycles(dut.clk, 10)


async def bad_source(tb, buf):
    """A put whose source is outside the node's memory: the host answers its read with UR, the
    channel stops, the receiver's flag never comes: ``run`` raises the channel's DmaFault."""
    dst = Place(1, "host", buf)
    coll = puts(tb.mem, [(Place(0, "host", buf), dst, 64)])
    step = coll.programs[0].steps[0]
    step.transfers[0] = replace(step.transfers[0], src=0x7F00_0000_0000)   # nothing there
    try:
        await run(tb.mem, coll, timeout_ns=20_000)
    except DmaFault as fault:
        tb.dut._log.info("bad source: %s", fault)
        assert fault.channel == 0 and fault.desc_done == 0, fault
    else:
        raise AssertionError("a put from unmapped memory completed")
    for place in coll.flags:                # cleared by run, never written
        tb.expect(place, bytes(4))
    tb.check("bad source", Collective("none", [], []))


async def bad_destination(tb, buf):
    """Puts to a node the routes do not reach: the chip refuses them (DST_UNROUTABLE) and sends
    nothing, the flag never comes: ``run`` raises PutFault naming the refusal."""
    coll = puts(tb.mem, [(Place(0, "host", buf), Place(1, "host", buf), 40)])
    step = coll.programs[0].steps[0]
    step.transfers[0] = replace(step.transfers[0],
                                dst=tb.amap.tca_base + tb.n * tb.amap.node_size)
    try:
        await run(tb.mem, coll, timeout_ns=10_000, paths="inline")
    except PutFault as fault:
        tb.dut._log.info("bad destination: %s", fault)
        assert fault.error == PutError.DST_UNROUTABLE and fault.refused == 2, fault
    else:
        raise AssertionError("puts to an unrouted node completed")
    await tb.cluster.drivers[0].put_clear()
    for place in coll.flags:
        tb.expect(place, bytes(4))
    tb.check("bad destination", Collective("none", [], []))


@cocotb.test()
async def collectives_bench(dut):
    """Times of the collectives against size (each result checked), written as JSON."""
    tb = TB(dut)
    await tb.start(noise=False)
    out = {"topology": PARAMS.get("topology"), "nodes": tb.n,
           "pipeline_ns": tb.cluster.hardip_pipeline_ns,
           "bcast": [], "allgather": [], "ring": [], "halo": [], "collision": [], "hops": [],
           "small": []}
    buf = tb.mem.symmetric(PARAMS.get("buffer", tb.amap.host_size // 2), window=tb.window)
    repeat = PARAMS.get("repeat", 1)

    def point(kind, **row):
        out[kind].append(row)
        dut._log.info("%s %s", kind, row)
        with open(PARAMS["result_file"], "w") as f:      # what is done so far, if stopped
            json.dump(out, f, indent=1)
        if PARAMS.get("progress_file"):
            with open(PARAMS["progress_file"], "a") as f:
                f.write(f"{tb.n} nodes {kind} {row}\n")

    if PARAMS.get("hops"):     # the nearest node at each hop count (the run is deterministic)
        nearest = {}
        for dst in range(1, tb.n):
            nearest.setdefault(tb.routes.hops(0, dst), dst)
        for hops, dst in sorted(nearest.items()):
            r, c = await run_puts(tb, [(0, dst, 8)], buf)
            point("hops", dst=dst, hops=hops, ns=arrival(r, c, 0))
    for size in PARAMS.get("bcast_sizes", []):
        times = [(await run_bcast(tb, size, 0, buf)).time for _ in range(repeat)]
        point("bcast", bytes=size, ns=min(times), steps=(tb.n - 1).bit_length())
    for size in PARAMS.get("allgather_sizes", []):
        times = [(await run_allgather(tb, size, buf)).time for _ in range(repeat)]
        point("allgather", bytes=size, ns=min(times), steps=(tb.n - 1).bit_length())
    for size in PARAMS.get("ring_allgather_sizes", []):
        times = [(await run_allgather(tb, size, buf, ring=True)).time for _ in range(repeat)]
        point("ring", bytes=size, ns=min(times))
    for kind, size, paths in PARAMS.get("small", []):
        times = [(await SMALL[kind](tb, size, buf, paths)).time for _ in range(repeat)]
        point("small", collective=kind, bytes=size, paths=paths, ns=min(times))
    px, py = PARAMS.get("halo_grid", (0, 0))
    for n in PARAMS.get("halo_ns", []):
        grid = HaloGrid(n, px, py)
        for order in ("pairwise", "naive"):
            r = await run_halo(tb, grid, buf, order)
            point("halo", n=n, grid=[px, py], order=order, ns=r.time,
                  jk_bytes=grid.nj * n * 8, ik_bytes=grid.ni * n * 8)
    senders, receiver = collision_nodes(tb.topology)
    for size in PARAMS.get("collision_sizes", []):
        alone, c1 = await run_puts(tb, [(senders[0], receiver, size)], buf)
        both, c2 = await run_puts(tb, [(s, receiver, size) for s in senders], buf)
        each = [arrival(both, c2, i) for i in range(2)]
        point("collision", bytes=size, senders=senders, receiver=receiver,
              alone_ns=arrival(alone, c1, 0), each_ns=each)
    await tb.counters_clean()
    tb.cluster.check()
    out["complete"] = True
    with open(PARAMS["result_file"], "w") as f:
        json.dump(out, f, indent=1)
