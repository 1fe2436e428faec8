"""The cocotb test that runs hybrid collectives on the co-simulated machine (started by
:func:`.launch.run`, in one process or as one MPI rank per sub-cluster).

Parameters (``PEACH2_PARAMS``): ``shape``, ``subclusters``, ``per_subcluster`` (TCA groups per
sub-cluster: 2 is 000 Figure 11's virtual split), ``mpi`` (this is one rank of an
``mpiexec``), ``preset`` (the MPI configuration, default ``MV2GDR-QPI-Tuned``: 000's setting
for GPU0), ``gpu_read`` (bytes/s of PEACH2's GPU reads; default the GPU model's),
``gpu_size`` (bytes of each GPU window), ``window_cycles`` (the machine's window),
``runs``: ``[{"collective": "broadcast" | "allgather" | "halo", "network": "tca" | "mpi" |
"hybrid" (with options: ``hybrid+ring+staged``) | "tuned", "sizes": [...]}]`` (the
Broadcast's bytes, the Allgather's block, the halo's ``{"dims", "grid", "elem"}``: its groups
follow its grid; ``"trace": true`` records the links' utilisation,
:mod:`peach2.sim.system.link_trace`; ``"limits_ns"``: per size, None or the time after which
the run is cut short, :func:`.runner.run_collective`: nothing runs after a cut run, and the
result's ``"stopped"`` lists the runs left), ``out`` (JSON written by rank 0: every run's figures),
``tuning_table`` (the table network ``tuned`` reads, default the saved one: :mod:`.tuning`).
"""

import json
import random

import cocotb

from peach2.sim.machine import LocalTransport, MpiTransport
from peach2.sim.mpi import preset
from peach2.sim.run import run_inputs
from peach2.sim.system import CLOCK_PS, MachinePlan, MachineSim

from .algorithms import allgather, broadcast
from .groups import Groups
from .halo import halo, halo_grid, halo_groups, himeno_array
from .runner import run_collective
from .tuning import choose, load_table

__all__ = ["hybrid_collectives", "build"]

_arrays = {}


def build(groups, collective, network, size, seed, table=None):
    """``(groups, Hybrid)`` of one run, its data drawn from ``seed`` (a halo's groups follow
    its grid); network ``tuned``: the one :func:`.tuning.choose` picks from ``table`` (default
    the saved table)."""
    if network == "tuned":
        network = choose(table or load_table(), collective, groups.plan.n_nodes, groups.count,
                         size)
    if collective == "halo":
        grid = halo_grid(size)
        key = (grid.dims, grid.elem, seed)
        if key not in _arrays:
            _arrays.clear()
            _arrays[key] = himeno_array(grid.dims, seed, grid.elem)
        groups = halo_groups(groups.plan, grid, network)
        return groups, halo(groups, grid, _arrays[key], network=network, seed=seed)
    rng = random.Random(f"{seed}:{collective}:{network}:{size}")
    if collective == "broadcast":
        coll = broadcast(groups, size, rng.randbytes(size), network=network)
    elif collective == "allgather":
        coll = allgather(groups, size, [rng.randbytes(size) for _ in range(groups.plan.n_nodes)],
                         network=network)
    else:
        raise ValueError(f"collective must be 'broadcast' or 'allgather', not {collective!r}")
    return coll.groups or groups, coll


@cocotb.test()
async def hybrid_collectives(dut):
    """Every run of ``runs``, one after the other on one machine; every byte checked."""
    params, seed = run_inputs()
    plan = MachinePlan(params["shape"], params["subclusters"])
    groups = Groups(plan, params.get("per_subcluster", 1))
    transport = MpiTransport() if params.get("mpi") else LocalTransport()
    gpu_size = params.get("gpu_size", 1 << 20)
    config = preset(params.get("preset", "MV2GDR-QPI-Tuned"))
    sim = MachineSim(dut, plan, transport, seed, host_size=1 << 20, gpu_size=gpu_size,
                     window_ps=params.get("window_cycles", 28) * CLOCK_PS,
                     gpu_read_bandwidth=params.get("gpu_read"))
    dut._log.info("%s; %d TCA groups of %d; MPI %s", sim.describe(), groups.count, groups.size,
                  config.name)
    await sim.up()
    everyone = range(plan.n_nodes)
    sim.make_worlds(lambda g: [h for h in everyone if h != g], reserve=(1 << 20) // 2,
                    params=config.params, socket=config.socket())
    results = []
    table = params.get("tuning_table")
    if table is None and any(run["network"] == "tuned" for run in params["runs"]):
        table = load_table()                    # once, not per run
    todo = []
    for run in params["runs"]:
        limits = run.get("limits_ns") or [None] * len(run["sizes"])
        todo += [(run, size, limit) for size, limit in zip(run["sizes"], limits)]
    stopped = []
    for i, (run, size, limit) in enumerate(todo):
        mine, coll = build(groups, run["collective"], run["network"], size, seed, table)
        r = await run_collective(sim, mine, coll, trace=run.get("trace", False),
                                 limit_ps=None if limit is None else round(limit * 1000))
        results.append({"size": size, **r, "asked": run["network"]})
        if r["cut"]:
            dut._log.info("%s %s, %s on %d nodes: cut short, over %.0f ns; the machine is left "
                          "mid-run, %d runs after it not run", r["name"], r["network"], size,
                          r["nodes"], r["over_ns"], len(todo) - i - 1)
            stopped = [{"collective": run["collective"], "network": run["network"],
                        "size": size} for run, size, _ in todo[i + 1:]]
            break
        dut._log.info("%s %s, %s on %d nodes (%d groups): %.0f ns (last MPI -> TCA start "
                      "%.0f ns late), %.1f s wall", r["name"], r["network"], size,
                      r["nodes"], r["groups"], r["time_ns"], r["handoff_ns"], r["wall_s"])
    if transport.rank == 0 and params.get("out"):
        with open(params["out"], "w") as f:
            json.dump({"shape": plan.shape, "subclusters": plan.subclusters,
                       "per_subcluster": groups.per_subcluster, "preset": config.name,
                       "ranks": transport.size, "window_ps": sim.machine.window_ps,
                       "seed": seed, "runs": results, "stopped": stopped}, f, indent=1)
