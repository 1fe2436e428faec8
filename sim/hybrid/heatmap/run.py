"""One traced run per picture: which machine, which collective, and the run itself.

Each picture is one hybrid collective on one machine (:data:`PICTURES`), run by
:func:`peach2.sim.hybrid.launch.run` with the links' trace on
(:mod:`peach2.sim.system.link_trace`), PEACH2 reading GPU0 at HA-PACS/TCA's 2.8 GB/s as the
sweeps do.
"""

import time

from peach2.sim.node import NodeParams
from peach2.sim.system import MachinePlan

from ..groups import Groups
from ..halo import halo_grid, halo_groups
from ..launch import parse_run, run

__all__ = ["PICTURES", "heat_run", "heat_entry"]

#: Picture name -> (shape, sub-clusters, TCA groups per sub-cluster, run, GPU window bytes).
#: 8 nodes as the benchmarks have them: Broadcast and Allgather on 2 sub-clusters of 2x2
#: (000 Figures 12 and 14's sweep), the halo on one 2x4 split in two groups by its grid
#: (Figure 11's virtual split, Figure 9's (2, 4, 1)); 16 nodes: one 2x8 split in two (the
#: Allgather also with ``+ring``: its TCA part along the ring, one flow per cable).
PICTURES = {
    "broadcast": ("2x2", 2, 1, "broadcast:hybrid:32768", 1 << 20),
    "allgather": ("2x2", 2, 1, "allgather:hybrid:4096", 1 << 20),
    "halo": ("2x4", 1, 1, "halo:hybrid:small/2x4", 4 << 20),
    "broadcast16": ("2x8", 1, 2, "broadcast:hybrid:32768", 1 << 20),
    "allgather16": ("2x8", 1, 2, "allgather:hybrid:4096", 1 << 20),
    "allgather16ring": ("2x8", 1, 2, "allgather:hybrid+ring:4096", 1 << 20),
    "halo16": ("2x8", 1, 1, "halo:hybrid:small/2x8", 4 << 20),
}

#: PEACH2's GPU read rate in the pictures: HA-PACS/TCA's, as the sweeps use.
GPU_READ = NodeParams().gpu_read_bytes_per_s


def heat_run(shape, subclusters, per_subcluster, spec, *, gpu_size=1 << 20, gpu_read=GPU_READ,
             seed=1, **options):
    """Run ``spec`` (one ``COLLECTIVE:NETWORK:SIZE``, as ``launch --run``) with the trace on;
    return the run, its machine and its groups (``group_of``: each node's TCA group), ready
    for :func:`~.draw.draw`.  ``options`` go to :func:`~peach2.sim.hybrid.launch.run`."""
    r = parse_run(spec)
    if len(r["sizes"]) != 1:
        raise ValueError(f"one size per picture, not {spec!r}")
    plan = MachinePlan(shape, subclusters)
    size = r["sizes"][0]
    if r["collective"] == "halo":
        groups = halo_groups(plan, halo_grid(size), r["network"])
    else:
        groups = Groups(plan, per_subcluster)
    wall = time.perf_counter()
    result = run(shape, subclusters, [{**r, "trace": True}], per_subcluster=per_subcluster,
                 gpu_size=gpu_size, gpu_read=gpu_read, seed=seed, **options)
    heat = heat_entry(result["runs"][0], plan, groups)
    heat.update(spec=spec, gpu_read=gpu_read, seed=seed,
                wall_s=round(time.perf_counter() - wall, 1))
    return heat


def heat_entry(got, plan, groups):
    """The picture's entry of one traced run ``got`` (a run of
    :func:`~peach2.sim.hybrid.launch.run`'s result) on ``plan`` with TCA ``groups``."""
    size = got["size"]
    what = f"{got['name'].capitalize()} ({got['network']})" + (
        f", {'x'.join(map(str, size['dims']))} floats over {'x'.join(map(str, size['grid']))}"
        if got["name"] == "halo" else f", {_size(size)}")
    where = (f"{plan.n_nodes} nodes: {plan.subclusters} x {plan.shape}"
             + (f" split in {groups.count} groups" if plan.subclusters == 1 else ""))
    keep = ("name", "network", "size", "nodes", "groups", "time_ns", "start_ps", "done_ns",
            "phases", "phase_kinds", "phase_ps", "handoff_ns", "links")
    return {"shape": plan.shape, "subclusters": plan.subclusters,
            "per_subcluster": groups.per_subcluster,
            "group_of": [groups.of(g) for g in range(plan.n_nodes)],
            "title": f"{what}: {got['time_ns'] / 1000:.1f} us on {where}",
            **{k: got[k] for k in keep}}


def _size(n):
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"
