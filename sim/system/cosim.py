"""The machine with real sub-clusters: cocotb runs the PEACH2 chips, the machine the switch.

::

    one simulator process (cocotb)                       per window of W = 112 ns (28 cycles)
    ├── Cluster s (chips on Verilator, hosts, GPUs)      1. await Timer(W): the chips, hosts
    │     TCA all-to-all (PIO + DMA)                        and GPUs of every local
    ├── bridged Node per node: host0, GPU0/1 = the          sub-cluster run to the edge
    │     cocotb bytes, timing of the node model;        2. machine.run_until(edge - 1): the
    │     the HCA's own DMA: TLPs of its HcaModel           MPI ranks, HCAs and switch run
    └── Machine (its local partitions)                      their events up to the edge
          PartitionWorld: MPI ranks on the HCAs             (HCA DMAs start in cocotb), and
          ── LocalTransport or MpiTransport ──>             crossings are exchanged (a
             other ranks' partitions                        blocking MPI call; simulated
                                                            time stands still meanwhile)

One process holds every sub-cluster (one HDL top of S * n chips, :class:`~.plan.MachinePlan`)
and :class:`~peach2.sim.machine.LocalTransport`; under ``mpiexec`` each rank holds its own
sub-cluster and :class:`~peach2.sim.machine.MpiTransport`.  Both make the same calls at the same
simulated times, so both give the same bytes and the same times.

The MPI side runs on the fabric's clock, after cocotb reached the window's end: an HCA DMA
stamped ``t`` starts as TLPs in cocotb at that edge (at most ``W`` late) and its completion
comes back as a fabric event at its cocotb time (:mod:`.endpoint_dma`); the node model's own
copies touch the cocotb memories when the machine runs them (at most ``W`` late).  The two
kinds of traffic use disjoint memory here, so neither bound changes a byte.
"""

import hashlib
import json
import time

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time

from peach2.routes import default_address_map
from peach2.sim.harness import Cluster
from peach2.sim.harness.cluster import gather
from peach2.sim.machine import LocalTransport, Machine, MpiTransport
from peach2.sim.node import NodeParams
from peach2.sim.run import run_inputs

from .bridge import bridged_node
from .endpoint_dma import endpoint_dma, hca_params
from .mpi_traffic import MpiAllToAll
from .plan import CLOCK_PS, WINDOW_PS, MachinePlan
from .tca_traffic import TcaAllToAll
from .world import PartitionWorld

__all__ = ["MachineDriver", "digest"]


class MachineDriver:
    """Steps ``machine`` one window at a time from inside a cocotb test.

    Members
    -------
    machine : Machine
    window_ps : int
        The machine's window, a whole number of clock cycles.
    windows : int
        Windows run so far.
    """

    def __init__(self, machine, check_every=4):
        if machine.window_ps % CLOCK_PS:
            raise ValueError(f"the window ({machine.window_ps} ps) must be a whole number of "
                             f"{CLOCK_PS} ps clock cycles")
        self.machine = machine
        self.window_ps = machine.window_ps
        self.check_every = check_every
        self.windows = 0

    async def align(self, t_ps):
        """Collective: run the machine and cocotb to the first window edge at or after the
        latest ``t_ps`` of every rank; return that edge."""
        latest = max(self.machine.transport.allgather(t_ps))
        edge = -(-latest // self.window_ps) * self.window_ps
        now = int(get_sim_time("ps"))
        if edge > now:
            await Timer(edge - now, "ps")
        if edge > self.machine.now + 1:
            self.machine.run_until(edge - 1)
        return edge

    async def step(self):
        """Advance cocotb by one window, then the machine to the same edge; return it."""
        await Timer(self.window_ps, "ps")
        edge = int(get_sim_time("ps"))
        self.machine.run_until(edge - 1)
        self.windows += 1
        return edge

    async def run(self, done):
        """Step windows until ``done()`` holds on every rank (asked every ``check_every``
        windows, a collective); return the edge where it held everywhere."""
        while True:
            edge = await self.step()
            if self.windows % self.check_every == 0 \
                    and all(self.machine.transport.allgather(bool(done()))):
                return edge


def digest(cluster, node):
    """SHA-256 of node ``node``'s host window and GPU memories in ``cluster``."""
    h = hashlib.sha256()
    amap = cluster.address_map
    h.update(bytes(cluster.memory(node)[1][0:amap.host_size]))
    for i in range(len(cluster.gpus[node])):
        h.update(bytes(cluster.gpu_memory(node, i)[1][0:amap.gpu_size]))
    return h.hexdigest()


async def _idle(driver, windows):
    """Step ``windows`` windows with no traffic; return their wall time and rate (the
    machine's per-rank time at the window edges included, gathered from every rank)."""
    before = driver.machine.stats.as_dict()
    wall0 = time.perf_counter()
    for _ in range(windows):
        await driver.step()
    wall = time.perf_counter() - wall0
    driver.windows -= windows
    ranks = driver.machine.transport.allgather(_delta(driver.machine.stats.as_dict(), before, wall))
    return {"windows": windows, "wall_s": wall,
            "cycles_per_s": windows * driver.window_ps / CLOCK_PS / wall, "ranks": ranks}


def _delta(after, before, wall):
    """The counters of one phase: ``after - before`` and the phase's wall time."""
    keys = ("windows", "exchanges", "crossings_sent", "crossings_received", "step_s",
            "exchange_s")
    out = {k: after[k] - before[k] for k in keys}
    out["phase_wall_s"] = wall
    out["edge_fraction"] = out["exchange_s"] / wall if wall else 0.0
    return out


@cocotb.test()
async def machine_all_to_all(dut):
    """TCA all-to-all inside every sub-cluster, MPI all-to-all across; every byte checked."""
    params, seed = run_inputs()
    plan = MachinePlan(params["shape"], params["subclusters"])
    transport = MpiTransport() if params.get("mpi") else LocalTransport()
    machine = Machine(plan.subclusters, plan.n, transport=transport, window_ps=WINDOW_PS)
    local = [p.index for p in machine.partitions]
    dut._log.info("machine %s x %d (%d nodes), seed %d, %s: sub-clusters %s here",
                  plan.shape, plan.subclusters, plan.n_nodes, seed, transport.describe(), local)
    amap = default_address_map(plan.n, host_size=params.get("host_size", 1 << 20), n_gpus=2)
    node_params = NodeParams()
    endpoint = params.get("hca_endpoint", False)   # launch.run passes it (default: True)
    clusters = {}
    for k, s in enumerate(local):
        clusters[s] = Cluster(dut, plan.topology, amap, hdl_cables=True, seed=seed + 16 * s * plan.n,
                              prefixes=[f"c{k * plan.n + i}_" for i in range(plan.n)],
                              hca=hca_params(node_params) if endpoint else None)
    n_cables = len(plan.cables(len(local)))
    for j in range(n_cables):
        getattr(dut, f"cable{j}_down").value = 0
    wall0 = time.perf_counter()
    await gather(c.reset_and_start() for c in clusters.values())
    up_ps = int(get_sim_time("ps"))
    wall_up = time.perf_counter() - wall0

    tca = {s: TcaAllToAll(c, s * plan.n, seed, stores=params.get("stores", 1),
                          max_size=params.get("tca_size", 512)) for s, c in clusters.items()}
    mpi = MpiAllToAll(plan, seed, params.get("mpi_size", 2048))
    worlds = {}
    for s, cluster in clusters.items():
        reserve = tca[s].share
        nodes = {s * plan.n + i: bridged_node(cluster, i, node_params, reserve=reserve)
                 for i in range(plan.n)}
        part = machine.partition(s)
        dmas = {g: endpoint_dma(cluster, g - s * plan.n, node, part.fabric, g)
                for g, node in nodes.items()} if endpoint else None
        worlds[s] = PartitionWorld(part, nodes, mpi.peers, dmas=dmas)
    programs = {s: mpi.setup(w) for s, w in worlds.items()}

    driver = MachineDriver(machine, check_every=params.get("check_every", 4))
    start = await driver.align(up_ps)
    idle = None
    if params.get("idle_windows"):
        idle = await _idle(driver, params["idle_windows"])
        start += idle["windows"] * driver.window_ps
    dut._log.info("up at %d ps; traffic from %d ps", up_ps, start)
    before = machine.stats.as_dict()
    wall1 = time.perf_counter()
    tasks = [cocotb.start_soon(t.run()) for t in tca.values()]
    for s, w in worlds.items():
        w.start(programs[s], start)
    end = await driver.run(lambda: all(t.done_ps is not None for t in tca.values())
                           and all(w.finished for w in worlds.values()))
    wall = time.perf_counter() - wall1
    for task in tasks:
        await task

    checked = 0
    for s in local:
        checked += tca[s].check()
        for g in worlds[s].ranks:
            checked += mpi.check(g)
        clusters[s].check()
    hca_dma = {s: [sum(getattr(w.ranks[g].hca.dma, k, 0) for g in w.ranks)
                   for k in ("reads", "writes", "failed")] for s, w in worlds.items()}
    dut._log.info("HCA endpoint DMA (reads, writes, refused) per sub-cluster: %s", hca_dma)
    mine = {s: {"digests": {str(s * plan.n + i): digest(clusters[s], i) for i in range(plan.n)},
                "mpi_done_ps": {str(g): worlds[s].results[g] for g in worlds[s].ranks},
                "tca_done_ps": tca[s].done_ps, "tca_bytes": tca[s].bytes}
            for s in local}
    everything = {}
    for part in transport.allgather(mine):
        everything.update(part)
    cycles = (end - start) / CLOCK_PS
    stats = transport.allgather(machine.stats.as_dict())
    traffic_stats = transport.allgather(_delta(machine.stats.as_dict(), before, wall))
    checked = sum(transport.allgather(checked))
    dut._log.info("%d nodes: traffic done at %d ps (%d windows), %d bytes checked; %.0f cycles "
                  "in %.1f s wall: %.0f cycles/s (bring-up %.1f s)", plan.n_nodes, end,
                  driver.windows, checked, cycles, wall, cycles / wall, wall_up)
    if transport.rank == 0 and params.get("out"):
        result = {"shape": plan.shape, "subclusters": plan.subclusters, "ranks": transport.size,
                  "transport": transport.describe(), "seed": seed, "start_ps": start,
                  "end_ps": end, "windows": driver.windows, "bytes_checked": checked,
                  "subcluster": {str(s): everything[s] for s in sorted(everything)},
                  "wall_s": wall, "bringup_wall_s": wall_up, "cycles_per_s": cycles / wall,
                  "stats": stats, "traffic_stats": traffic_stats, "idle": idle,
                  "local_subclusters": len(local)}
        with open(params["out"], "w") as f:
            json.dump(result, f, indent=1)
