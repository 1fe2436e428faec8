"""The hybrid sweeps' saved results (``docs/results/hybrid.json`` and ``tuning.json``), written
by sweeps that may run side by side: every read-modify-write holds a lock, so two sweeps
finishing together both keep their entries.

A curves file (``hybrid.json``, 000 Figures 12-15) holds ``{"machines"}``: a machine
entry (:func:`peach2.sim.hybrid.figures.machine_entry`) per machine, each row naming the run
that measured it (``"run"``, an index into the machine's ``"runs"``: the stamps of
:func:`peach2.sim.run.run_info`).  :func:`merge_curves` puts one sweep's rows in: the rows of
the sizes it measured are replaced, the others kept with their own stamps, so a machine
measured over several sessions says which rows are how old, and the benchmarks' stale mark
follows every stamp (:mod:`peach2.sim.bench.staleness`).

A tuning file (``tuning.json``) holds ``{"machines"}`` too, an entry per tuning sweep's machine
and collective (:func:`peach2.sim.hybrid.tuning.sweep.tuning_sweep`), with its stamps in ``"runs"``
and a ``run`` index on every time and row (an entry saved before, with one ``"run"`` stamp,
reads as runs of one): :func:`stamp_tuning` puts a sweep's merged entry in.  A tuning sweep
holds its entry from the start to the save (:func:`holding_entry`): it merges into the entry
as it read it at the start, so two sweeps of one entry run one after the other.

A tuning sweep runs ``mpi`` and ``hybrid`` too, on the same machine and in the same way as a
curves sweep (``--save``), so on the 64-node machine, where one size of one network takes up
to an hour, its times need not be measured twice: :func:`take_tuning` copies them into the
curves as rows stamped with the tuning run that measured them.  A run's time depends a little
on the runs before it in the same simulation (a sweep's runs follow each other from one
machine state, not from reset): of the 44 times both kinds of sweep measured at 2439574, 40 are
the same, two differ by 1 ns and two by 0.56 us (the 16-node hybrid Broadcast of 2 and 8 KiB,
1.7% and 0.7%)::

    python -m peach2.sim.hybrid.saved --shape 2x8 --subclusters 4 --collective allgather \
        --sizes 16384,65536

A size whose ``mpi`` and ``hybrid`` times two runs measured (one choice a command, as the 64-node
sweeps are run) gets a row stamped with both: the hybrid's run as every row's ``run``, the
other as its ``mpi_run``.
"""

import argparse
import fcntl
import json
import sys
from contextlib import contextmanager
from pathlib import Path

from peach2.sim.mpi.collective import select_bcast

__all__ = ["CURVES_FILE", "TUNING_FILE", "updating", "holding_entry", "merge_curves",
           "machine_key", "tuning_key",
           "tuning_runs", "stamp_tuning", "take_tuning", "main"]

#: The hybrid section's saved results, and the tuning section's.
CURVES_FILE = Path(__file__).resolve().parents[2] / "docs" / "results" / "hybrid.json"
TUNING_FILE = CURVES_FILE.with_name("tuning.json")


@contextmanager
def updating(path):
    """Yield the saved results at ``path`` (``{"machines": []}`` when there is no file yet),
    holding an exclusive lock on ``path`` + ``.lock`` (created if need be); the dict is
    written back when the block ends without an exception.  ``OSError`` and ``ValueError``
    (a file that is not JSON) propagate."""
    path = Path(path)
    lock = path.with_name(path.name + ".lock")
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        saved = json.loads(path.read_text()) if path.exists() else {"machines": []}
        yield saved
        path.write_text(json.dumps(saved, indent=1) + "\n")


@contextmanager
def holding_entry(path, key, note=None):
    """Hold tuning file ``path``'s entry ``key`` (:func:`tuning_key`) for a whole tuning sweep:
    an exclusive lock on ``path`` + ``.<collective>-<nodes>-<groups>.lock``.  A sweep reads the
    entry when it starts and puts its merge in the entry's place when it ends, so a second
    sweep of the same entry must wait for the first: it says so on ``note`` (default standard
    error) and waits.  Sweeps of other entries go on."""
    path = Path(path)
    collective, nodes, groups = key
    lock = path.with_name(f"{path.name}.{collective}-{nodes}-{groups}.lock")
    with open(lock, "a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another tuning sweep of the {collective} on {nodes} nodes in "
                  f"{groups} groups to end (it holds {lock})", file=note or sys.stderr, flush=True)
            fcntl.flock(held, fcntl.LOCK_EX)
        yield


def machine_key(entry):
    """What makes two entries the same machine: shape, sub-clusters, groups per sub-cluster
    and PEACH2's GPU read rate."""
    return (entry["shape"], int(entry["subclusters"]), int(entry["per_subcluster"]),
            entry.get("gpu_read"))


def merge_curves(saved, entry, run):
    """Merge one sweep's machine ``entry`` (its rows without run indices) measured by ``run``
    into ``saved`` (a curves file's dict, changed in place and returned): the machine's rows
    of the collectives and sizes ``entry`` has are replaced, the others kept; stamps no row
    names any more are dropped.  A row whose ``mpi_ns`` another run measured carries that
    run's stamp (``"mpi_stamp"``); it is saved with the stamp's index (``"mpi_run"``).  The file has no section-wide stamp: each machine's stamps
    are shown under its heading."""
    machines = saved.setdefault("machines", [])
    old = next((m for m in machines if machine_key(m) == machine_key(entry)), None)
    kept_runs, rows = {}, {}           # old run index -> new, in order of first use
    if old is not None:
        for collective, values in old["rows"].items():
            fresh = {r["size"] for r in entry["rows"].get(collective, ())}
            kept = [r for r in values if r["size"] not in fresh]
            for r in kept:
                kept_runs.setdefault(r.get("run", 0), len(kept_runs))
                if "mpi_run" in r:
                    kept_runs.setdefault(r["mpi_run"], len(kept_runs))
            rows[collective] = [dict(r, run=kept_runs[r.get("run", 0)],
                                     **({"mpi_run": kept_runs[r["mpi_run"]]}
                                        if "mpi_run" in r else {})) for r in kept]
    old_runs = (old.get("runs") or [None]) if old is not None else []
    runs = [old_runs[i] for i in kept_runs] + [run]
    for collective, values in entry["rows"].items():
        new = []
        for r in values:
            r = dict(r, run=len(runs) - 1)
            stamp = r.pop("mpi_stamp", None)        # its mpi time measured by another run
            if stamp is not None:
                if stamp not in runs:
                    runs.append(stamp)
                r["mpi_run"] = runs.index(stamp)
            new.append(r)
        rows[collective] = sorted(rows.get(collective, []) + new, key=lambda r: r["size"])
    merged = dict(entry, rows=rows, runs=runs)
    if old is None:
        machines.append(merged)
    else:
        machines[machines.index(old)] = merged
    saved.pop("run", None)
    return saved


def tuning_key(entry):
    """What makes two tuning entries the same: collective, nodes and TCA groups."""
    return (entry["collective"], int(entry["nodes"]), int(entry["groups"]))


def tuning_runs(entry):
    """The stamps of a tuning entry, indexed by its times' and rows' ``run`` (an entry of one
    ``"run"`` stamp: that one)."""
    return list(entry.get("runs") or [entry.get("run")])


def stamp_tuning(saved, result, run, kept_runs=()):
    """Put ``result`` (a :func:`~peach2.sim.hybrid.tuning.sweep.tuning_sweep`, whose kept times and rows
    index ``kept_runs``, the stamps of the entry it was merged with, and whose new ones have no
    index) measured by ``run`` into ``saved`` (a tuning file's dict, changed in place and
    returned), in place of the same machine's entry; stamps nothing names any more are
    dropped."""
    kept_runs = list(kept_runs)
    used = {}                           # old index -> new, in order of first use
    items = result["times"] + result["rows"]
    for item in items:
        if item.get("run") is not None:
            used.setdefault(item["run"], len(used))
    runs = [kept_runs[i] if i < len(kept_runs) else None for i in used] + [run]
    entry = {k: v for k, v in result.items() if k not in ("retuned", "run")}
    for key in ("times", "rows"):
        entry[key] = [dict(x, run=used[x["run"]] if x.get("run") is not None else len(runs) - 1)
                      for x in result[key]]
    entry["runs"] = runs
    machines = saved.setdefault("machines", [])
    saved["machines"] = [m for m in machines if tuning_key(m) != tuning_key(entry)] + [entry]
    saved["run"] = run
    return saved


def take_tuning(curves, tuning, collective, sizes):
    """Copy the ``mpi`` and ``hybrid`` times at ``sizes`` of a tuning entry (``tuning``, of
    ``collective``) into the curves file's dict ``curves`` (changed in place and returned) as
    rows of the same machine, each stamped with the tuning run that measured its hybrid time
    and, if another run measured its mpi time, with that one too (``"mpi_run"``; the stamps
    marked ``"from_tuning"``), in place of the rows of those sizes.  ``ValueError`` when the
    curves have no such machine, or a size lacks either time or has one cut short."""
    machine = next((m for m in curves.get("machines", ())
                    if machine_key(m) == machine_key(tuning)), None)
    if machine is None:
        raise ValueError(f"the curves have no machine {machine_key(tuning)}: measure it with "
                         "`python -m peach2.sim.hybrid.sweep ... --save` first")
    runs = tuning_runs(tuning)
    times = {(t["network"], t["size"]): t for t in tuning["times"]}
    by_run = {}
    for size in sizes:
        mpi, hybrid = times.get(("mpi", size)), times.get(("hybrid", size))
        if mpi is None or hybrid is None:
            raise ValueError(f"{collective} {size}: the tuning sweep has not measured "
                             f"{'mpi' if mpi is None else 'hybrid'} there")
        cut = [t["network"] for t in (mpi, hybrid) if "time_ns" not in t]
        if cut:
            raise ValueError(f"{collective} {size}: {cut[0]} was cut short there (only a "
                             f"lower bound)")
        run, mpi_run = hybrid.get("run", 0), mpi.get("run", 0)
        algorithm = (select_bcast(tuning["nodes"], size)
                     if collective == "broadcast" else None)
        by_run.setdefault(run, []).append(
            {"size": size, "mpi_ns": mpi["time_ns"], "hybrid_ns": hybrid["time_ns"],
             "ratio": mpi["time_ns"] / hybrid["time_ns"], "mpi_algorithm": algorithm,
             **({"mpi_stamp": dict(runs[mpi_run], from_tuning=True)} if mpi_run != run
                else {})})
    base = {k: v for k, v in machine.items() if k not in ("rows", "runs")}
    for run, rows in by_run.items():
        merge_curves(curves, dict(base, rows={collective: rows}),
                     dict(runs[run], from_tuning=True))
    return curves


def main(argv=None):
    """``python -m peach2.sim.hybrid.saved``: :func:`take_tuning` from the command line; exit
    status 1 when the files do not have what is asked (nothing written), 4 when one cannot be
    read or written."""
    ap = argparse.ArgumentParser(
        prog="python -m peach2.sim.hybrid.saved",
        description="Copy a tuning sweep's mpi and hybrid times into the hybrid section's "
                    "curves (docs/results/hybrid.json), stamped with the tuning run")
    ap.add_argument("--shape", required=True, help="sub-cluster shape, e.g. 2x8")
    ap.add_argument("--subclusters", type=int, required=True)
    ap.add_argument("--per-subcluster", type=int, default=1)
    ap.add_argument("--collective", choices=("broadcast", "allgather"), required=True)
    ap.add_argument("--sizes", required=True, help="comma-separated bytes (Allgather: blocks)")
    ap.add_argument("--tuning", type=Path, default=TUNING_FILE, help="tuning results to read")
    ap.add_argument("--curves", type=Path, default=CURVES_FILE, help="curves to update")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes: not a list of integers: {args.sizes!r}")
    try:
        tuning = json.loads(args.tuning.read_text())
    except (OSError, ValueError) as e:
        print(f"--tuning: cannot read {args.tuning}: {e}", file=sys.stderr)
        return 4
    machine = (args.shape, args.subclusters, args.per_subcluster)
    entry = next((m for m in tuning.get("machines", ())
                  if m["collective"] == args.collective and machine_key(m)[:3] == machine),
                 None)
    if entry is None:
        print(f"{args.tuning}: no {args.collective} tuning entry for {args.subclusters} x "
              f"{args.shape}, {args.per_subcluster} group(s) each", file=sys.stderr)
        return 1
    try:
        with updating(args.curves) as curves:
            take_tuning(curves, entry, args.collective, sizes)
    except ValueError as e:
        print(f"{args.curves}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"--curves: cannot update {args.curves}: {e}", file=sys.stderr)
        return 4
    print(f"{args.curves}: {args.collective} at {args.sizes} from the tuning sweep",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
