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

from peach2.sim.machine import LocalTransport, MpiTransport
from peach2.sim.run import run_inputs

from .assembly import MachineSim
from .mpi_traffic import MpiAllToAll
from .plan import CLOCK_PS, MachinePlan
from .tca_traffic import TcaAllToAll

__all__ = ["digest", "machine_all_to_all"]


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
    sim = MachineSim(dut, plan, transport, seed, host_size=params.get("host_size", 1 << 20),
                     hca_endpoint=params.get("hca_endpoint", False))   # launch.run: True
    machine, local, clusters = sim.machine, sim.local, sim.clusters
    dut._log.info(sim.describe())
    await sim.up()
    up_ps, wall_up = sim.up_ps, sim.bringup_wall_s

    tca = {s: TcaAllToAll(c, s * plan.n, seed, stores=params.get("stores", 1),
                          max_size=params.get("tca_size", 512)) for s, c in clusters.items()}
    mpi = MpiAllToAll(plan, seed, params.get("mpi_size", 2048))
    reserve = next(iter(tca.values())).share
    worlds = sim.make_worlds(mpi.peers, reserve=reserve)
    programs = {s: mpi.setup(w) for s, w in worlds.items()}

    driver = sim.driver
    driver.check_every = params.get("check_every", 4)
    start = await sim.align()
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
    dut._log.info("HCA endpoint DMA (reads, writes, refused) per sub-cluster: %s",
                  sim.hca_dma_counts())
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
