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
and collective (:func:`peach2.sim.hybrid.sweep.tuning_sweep`), with its stamps in ``"runs"``
and a ``run`` index on every time and row (an entry saved before, with one ``"run"`` stamp,
reads as runs of one): :func:`stamp_tuning` puts a sweep's merged entry in.
"""

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path

__all__ = ["CURVES_FILE", "updating", "merge_curves", "machine_key", "tuning_key", "tuning_runs",
           "stamp_tuning"]

#: The hybrid section's saved results.
CURVES_FILE = Path(__file__).resolve().parents[2] / "docs" / "results" / "hybrid.json"


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


def machine_key(entry):
    """What makes two entries the same machine: shape, sub-clusters, groups per sub-cluster
    and PEACH2's GPU read rate."""
    return (entry["shape"], int(entry["subclusters"]), int(entry["per_subcluster"]),
            entry.get("gpu_read"))


def merge_curves(saved, entry, run):
    """Merge one sweep's machine ``entry`` (its rows without run indices) measured by ``run``
    into ``saved`` (a curves file's dict, changed in place and returned): the machine's rows
    of the collectives and sizes ``entry`` has are replaced, the others kept; stamps no row
    names any more are dropped.  The file has no section-wide stamp: each machine's stamps
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
            rows[collective] = [dict(r, run=kept_runs[r.get("run", 0)]) for r in kept]
    old_runs = (old.get("runs") or [None]) if old is not None else []
    runs = [old_runs[i] for i in kept_runs] + [run]
    for collective, values in entry["rows"].items():
        rows[collective] = sorted(rows.get(collective, []) + [dict(r, run=len(runs) - 1)
                                                              for r in values],
                                  key=lambda r: r["size"])
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
    """Put ``result`` (a :func:`~peach2.sim.hybrid.sweep.tuning_sweep`, whose kept times and rows
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
