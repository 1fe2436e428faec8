"""The DMA benchmark run as parallel simulations: jobs, progress, merge, CPU-time estimate.

:func:`run` measures the points of :func:`peach2.sim.bench.dma_plan.plan`, by default each in
its own cocotb simulation of ``tb/dma/dma_perf_tb.py`` (test ``figures``, two chips, from reset),
``workers`` simulations at a time, heaviest first; it prints a line as each point finishes (which
simulation, point k of n, elapsed, estimated time left) and returns the results in plan order
(:func:`~peach2.sim.bench.dma_plan.merge`).  A point measured alone depends on nothing else, so
the figures are the same whatever ``workers`` is.  Points measured one after the other in one
simulation are not quite independent: the chips and the link models keep state from the points
before (measured on 855043f's design: 128 x 4 KiB local took 153 486 ns alone and 153 478 ns
after two 128 x 8 B chains in the same simulation, Icarus and Verilator alike; one 8-byte
descriptor transfer 1462 ns alone on both, 1458 ns in the one-simulation run at 2402965).  So
``jobs`` (fewer simulations, each of several points, :func:`~peach2.sim.bench.dma_plan.split`)
is for Icarus, whose every simulation compiles the design again (about 40 s of CPU), and may
move a figure by a cycle or two.

Builds never race: the netlist is converted once before the pool starts (the runner caches it,
:func:`peach2.sim.run.runner.run_cocotb`); each Icarus simulation builds in its own folder
(``build/sim/<name>-<k>``); Verilator builds are shared under a file lock by the runner, and
with ``tb/dma/dma_probe.vlt`` as ``tb/dma/test_dma.py`` passes it, the build is the DMA soak's.

Under ``mpiexec`` with several ranks (:class:`peach2.sim.bench.pool.PointPool`), rank 0 makes the
build and the worker ranks run the simulations, one each at a time: each job measures its rank's
CPU seconds (the rank's and its children's while the job ran) and sends them back with its
result and its progress lines, which rank 0 prints as each job's result arrives; the CPU seconds
of the run are rank 0's plus those.  The build must be where every rank finds it (one machine,
or a shared file system; else each rank's first job builds its own copy).

The machine may be shared, so the run also adds up CPU seconds (every child process's, the
simulators' and compilers') and estimates the wall time on an idle machine by replaying the
pool's schedule with each simulation's CPU seconds (:func:`idle_estimate`).
"""

import functools
import json
import resource
import threading
import time
from pathlib import Path

from peach2.sim.hdl import Chips
from peach2.sim.run import BUILD, SIM_BUILD, emit_verilog, pick_simulator, run_cocotb

from .dma_plan import label, merge, split, weight
from .pool import PointPool

__all__ = ["SCRATCH", "SIMULATOR", "run", "idle_estimate", "Board", "save_costs"]

#: Scratch files of the benchmark runs (the saved results are under docs/results/).
SCRATCH = BUILD / "bench"
#: The DMA run's simulator unless ``PEACH2_SIM`` or the caller says else: the same figures as
#: Icarus to the last digit (checked on 128 x 8 B and 128 x 4 KiB chains, local and to the
#: neighbour) at a tenth to a thirtieth of the CPU time, once the build (minutes) is made.
SIMULATOR = "verilator"


def _minutes(s):
    return f"{s / 60:.1f} min" if s >= 100 else f"{s:.0f} s"


def idle_estimate(job_cpu, workers):
    """Wall seconds of ``workers`` processes taking jobs in order (each the next free one) when
    job ``k`` costs ``job_cpu[k]`` CPU seconds and nothing else runs."""
    free = [0.0] * max(1, workers)
    for cpu in job_cpu:
        k = free.index(min(free))
        free[k] += cpu
    return max(free)


class Board:
    """Progress of a parallel run: prints ``dma: point 7 of 60 done (simulation 12 of 60:
    <label>, <GB/s>, <CPU s>), 95 s elapsed, about 9.3 min left`` as points finish (with
    ``, its point 3 of 15`` when a simulation measures several).

    The estimate scales the elapsed time by the weight (:func:`weight`) of the points left
    against the weight done."""

    def __init__(self, points, groups, out=print):
        self.points, self.groups, self.out = points, groups, out
        self.total = sum(weight(p) for p in points)
        self.done_weight, self.done = 0.0, 0
        self.start = time.time()
        self.lock = threading.Lock()

    def event(self, k, e):
        """Print job ``k``'s event ``e`` (a JSON line of ``dma_perf_tb.py``)."""
        with self.lock:
            elapsed = time.time() - self.start
            if e["event"] == "setup":
                return
            point = self.points[self.groups[k][e["k"]]]
            self.done += 1
            self.done_weight += weight(point)
            left = elapsed * max(0.0, self.total - self.done_weight) / self.done_weight
            its = (f", its point {e['k'] + 1} of {len(self.groups[k])}"
                   if len(self.groups[k]) > 1 else "")
            self.out(f"dma: point {self.done} of {len(self.points)} done (simulation {k + 1} of "
                     f"{len(self.groups)}{its}: {label(point)}, {e['gbps']:.3f} GB/s, "
                     f"{e['cpu_s']:.0f} s CPU), {_minutes(elapsed)} elapsed, about "
                     f"{_minutes(left)} left", flush=True)


def _follow(path, k, board, stop, every=1.0):
    """Print the events job ``k`` appends to ``path`` until ``stop`` is set."""
    seen = 0
    while True:
        last = stop.wait(every)
        text = path.read_text() if path.exists() else ""
        complete = text[:text.rfind("\n") + 1]
        for line in complete[seen:].splitlines():
            board.event(k, json.loads(line))
        seen = len(complete)
        if last:
            return


def _build(test_dir, simulator, name):
    """Convert the netlist (cached by the runner) and, for Verilator, make the shared build
    (``peach2.sim.run.verilator.build``, the one :func:`run_cocotb` then finds), before the pool."""
    chips = Chips(2)
    folder = SIM_BUILD / f"{name}-0"
    source = emit_verilog(chips, "chips2", folder / (
        "chips2.v" if simulator == "icarus" else "chips2-vl.v"), simulator=simulator)
    if simulator == "verilator":
        from peach2.sim.run import verilator
        verilator.build(sources=[source, *chips.extra_sources(folder, simulator)],
                        toplevel="chips2", build_args=list(getattr(chips, "verilator_args", ())),
                        root=SIM_BUILD / "_verilator")


def _job(k, group, points, *, test_dir, name, simulator, params, board=None):
    """Run job ``k`` (the points ``group`` of ``points``); return its result file's data, with
    ``events`` (the progress lines it wrote) and ``job_cpu_s`` (CPU seconds of this process and
    its children meanwhile: the job's own where it is the only one, on an MPI worker rank).

    With a ``board``, print its progress lines while it runs (the local pool's threads)."""
    result_file = SCRATCH / f"{name}-{k}.json"
    progress_file = SCRATCH / f"{name}-{k}-progress.log"
    SCRATCH.mkdir(parents=True, exist_ok=True)
    for f in (result_file, progress_file):
        f.unlink(missing_ok=True)
    stop = threading.Event()
    follower = None
    if board is not None:
        follower = threading.Thread(target=_follow, args=(progress_file, k, board, stop),
                                    daemon=True)
        follower.start()
    cpu0 = _children_cpu() + time.process_time()
    try:
        run_cocotb(component=Chips(2), toplevel="chips2", test_module="dma_perf_tb",
                   name=f"{name}-{k}", test_dir=test_dir, testcase="figures", seed=1,
                   simulator=simulator,
                   params={**params, "points": [points[i] for i in group],
                           "result_file": str(result_file),
                           "progress_file": str(progress_file)})
    finally:
        stop.set()
        if follower is not None:
            follower.join()
    data = json.loads(result_file.read_text())
    text = progress_file.read_text() if progress_file.exists() else ""
    data["events"] = [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]
    data["job_cpu_s"] = _children_cpu() + time.process_time() - cpu0
    return data


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _one(item, **kwargs):
    """:func:`_job` of ``item`` = ``(k, group)`` (what :class:`PointPool` maps)."""
    return _job(*item, **kwargs)


def run(points, *, workers, test_dir, jobs=None, read_latency_ns=500, simulator=None,
        name="bench-dma", out=print):
    """Measure ``points`` in ``jobs`` simulations (default: one per point), ``workers`` at a
    time (under ``mpiexec``, one per worker rank: :class:`~peach2.sim.bench.pool.PointPool`);
    return ``(data, costs)``: the section's data (``points`` in plan order,
    ``paper_bound_gbps``, ``read_latency_ns``) and what the run cost (``cpu_s``: CPU seconds
    of this process and every child, and under MPI of every worker rank and its children while
    it ran a job, ``build_cpu_s``: of the netlist and the build, ``idle_s``: the build's CPU
    seconds plus :func:`idle_estimate` of the jobs, ``jobs``, ``workers``, ``ranks`` (1 without
    MPI), ``simulator``, ``per_point``: each point's CPU seconds in plan order).
    ``simulator`` defaults to ``PEACH2_SIM``, else :data:`SIMULATOR`."""
    simulator = pick_simulator(simulator or SIMULATOR)
    groups = split(points, jobs or len(points))
    # heaviest first (the pool's schedule); merge() restores plan order
    groups.sort(key=lambda g: -sum(weight(points[i]) for i in g))
    pool = PointPool("dma", workers)
    workers = max(1, min(pool.workers, len(groups)))
    SCRATCH.mkdir(parents=True, exist_ok=True)
    where = (f"{workers} at a time on {pool.workers} MPI worker ranks" if pool.mpi
             else f"{workers} at a time")
    out(f"dma: {len(points)} points in {len(groups)} simulations ({simulator}), {where}",
        flush=True)
    cpu0, own0, wall0 = _children_cpu(), time.process_time(), time.time()
    _build(test_dir, simulator, name)       # once, before the pool: no two jobs build it
    build_cpu = _children_cpu() - cpu0 + time.process_time() - own0
    build_wall = time.time() - wall0
    out(f"dma: netlist and build ready in {build_wall:.0f} s ({build_cpu:.0f} s CPU)",
        flush=True)
    board = Board(points, groups, out)
    # the local pool's threads print progress as it comes; a worker rank sends it with the result
    job = functools.partial(_one, points=points, test_dir=test_dir, name=name,
                            simulator=simulator, params={"read_latency_ns": read_latency_ns},
                            board=None if pool.mpi else board)

    def done(k, result):
        if pool.mpi:
            for e in result["events"]:
                board.event(k, e)
    results = pool.map(job, list(enumerate(groups)), done=done,
                       names=[f"simulation {k + 1}: " + ", ".join(label(points[i]) for i in g)
                              for k, g in enumerate(groups)])
    merged = merge(points, groups, [r["points"] for r in results])
    cpu = _children_cpu() - cpu0 + time.process_time() - own0
    if pool.mpi:        # the worker ranks' CPU seconds, each job's measured where it ran
        cpu += sum(r["job_cpu_s"] for r in results)
    measured = [sum(c["cpu_s"] for c in r["costs"]) for r in results]
    # what the jobs cost beyond their points (simulator start-up, Icarus compile), per job
    overhead = max(0.0, cpu - build_cpu - sum(measured)) / len(groups)
    per_point = [None] * len(points)
    for group, r in zip(groups, results):
        for i, c in zip(group, r["costs"][1:]):
            per_point[i] = c["cpu_s"]
    # The build: make's own parallelism is not counted on (its CPU seconds, serial).
    costs = {"cpu_s": round(cpu), "build_cpu_s": round(build_cpu),
             "idle_s": round(build_cpu + idle_estimate([m + overhead for m in measured],
                                                       workers)),
             "jobs": len(groups), "workers": workers,
             "ranks": pool.workers + 1 if pool.mpi else 1, "simulator": simulator,
             "per_point": per_point}
    first = results[0]
    return ({"points": merged, "paper_bound_gbps": first["paper_bound_gbps"],
             "read_latency_ns": first["read_latency_ns"]}, costs)


def save_costs(path, points, costs):
    """Write each point's label and CPU seconds (and the run's totals) to ``path``."""
    Path(path).write_text(json.dumps({**costs, "per_point": [
        {"point": label(p), "cpu_s": c} for p, c in zip(points, costs["per_point"])]},
        indent=1) + "\n")
