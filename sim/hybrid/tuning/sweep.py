"""A tuning sweep (issue 31's item 4): every network the tuning table chooses among, measured
per size on one machine, the table built from the times, and network ``tuned`` run with it at
every size against the best fixed network's time.  ``python -m peach2.sim.hybrid.sweep --tune``
runs it and saves it (``docs/results/tuning.json``); a machine's sweep may be measured over
several runs (:func:`merge_tuning`)."""

from peach2.sim.system import MachinePlan

from ..algorithms import probe
from ..figures.tuning import table_lines
from ..groups import Groups
from ..launch import gpu_window, run
from .cutoff import cut_runs, time_of
from .table import CHOICES, build_table, choose, fastest_times

__all__ = ["CHECK_SIZES", "choices", "tuning_sweep", "merge_tuning", "tuning_table_text"]

#: Sizes between :data:`~peach2.sim.hybrid.sweep.SIZES` where a tuning sweep checks the table
#: built from those.
CHECK_SIZES = {"broadcast": [32, 1024, 4096, 16384, 65536, 262144],
               "allgather": [64, 512, 2048, 8192, 32768]}

def choices(groups, collective):
    """The networks of :data:`~.table.CHOICES` ``collective`` can take on ``groups``, less
    those that would run as another of them (a ``hops`` that keeps every TCA step)."""
    out, seen = [], set()
    for network in CHOICES[collective]:
        try:
            coll = probe(groups, collective, network)
        except ValueError:
            continue
        same = (tuple(p.name for p in coll.phases), coll.groups.size)
        if same not in seen:
            seen.add(same)
            out.append(network)
    return out


def tuning_sweep(shape, subclusters, collective, sizes, checks=None, *, gpu_read,
                 per_subcluster=1, seed=1, kept=None, networks=None, cutoff=False):
    """Measure every network of :func:`choices` (or those of ``networks``) at ``sizes`` and
    ``checks`` (default :data:`CHECK_SIZES`), build the tuning table from the table sizes
    (``sizes`` and those of ``kept``) that have every choice measured, then run network
    ``tuned`` with that table at each such size measured here (``gpu_read``: bytes/s of
    PEACH2's GPU reads).
    Returns ``{"nodes", "groups", "table", "times", "rows", "checks", ...}``, a row per size
    with every choice measured: ``times`` (network -> ns), ``best`` (the fastest fixed
    network) and ``best_ns``, ``tuned`` (the network the table chose) and ``tuned_ns``
    (measured in its own run), ``ratio`` = tuned / best, ``check`` (a size the table was not
    built from).

    ``kept``: this machine's saved entry, whose times of the networks and sizes not measured
    here and whose rows of other sizes stay (:func:`merge_tuning`), so a machine's sweep can be
    measured over several runs (one choice of a 64-node size can take an hour); a size whose
    choices are not all measured yet has times and no row (``pending``), and a kept row whose
    choice the new table changes is run again (``tuned`` at its size, listed in ``retuned``).
    What this run measured has no ``run`` index; what was kept keeps its index into
    ``kept``'s runs (:func:`~peach2.sim.hybrid.saved.tuning_runs`).

    ``cutoff``: a choice only has to be known slower than the fastest, not how much slower, so
    each network runs in simulations of its own and a run that takes longer than the fastest
    time known at its size (kept, of the networks not measured now, or measured before it) is
    cut short there (:func:`~.cutoff.cut_runs`): its time is ``over_ns`` (a lower bound; a row's
    ``over``), and it saves the rest of the run (at 64 nodes, hours for the slowest
    choices)."""
    sizes = sorted(sizes)
    checks = sorted(set(checks if checks is not None else CHECK_SIZES[collective]) - set(sizes))
    plan = MachinePlan(shape, subclusters)
    groups = Groups(plan, per_subcluster)
    every = sorted(set(sizes) | set(checks))
    name = f"tune-{shape.replace(':', '')}x{subclusters}x{per_subcluster}-{collective}"
    kw = {"seed": seed, "per_subcluster": per_subcluster, "gpu_read": gpu_read,
          "name": name}     # a build folder of its own: sweeps may run side by side
    nets = choices(groups, collective)
    wanted = nets if networks is None else [n for n in nets if n in networks]
    unknown = sorted(set(networks or ()) - set(nets))
    if unknown or not wanted:
        raise ValueError(f"networks {unknown or networks} are not among this machine's "
                         f"choices: {', '.join(nets)}")
    window = gpu_window(collective, plan.n_nodes, max(every))
    if cutoff:
        fresh, preset = cut_runs(shape, subclusters, collective, wanted, every,
                                 fastest_times((kept or {}).get("times", ()), skip=wanted),
                                 dict(kw, gpu_size=window))
    else:
        fixed = run(shape, subclusters, [{"collective": collective, "network": n,
                                          "sizes": every} for n in wanted], gpu_size=window,
                    **kw)
        fresh, preset = [time_of(r) for r in fixed["runs"]], fixed["preset"]
    for t in fresh:
        t.update(collective=collective, nodes=plan.n_nodes, groups=groups.count)
    merged = merge_tuning(kept, fresh, sizes, checks, nets)
    times, tuning = merged["times"], merged["table"]
    again = sorted(set(merged["new_rows"]) | set(merged["retune"]))
    rows = [r for s, r in merged["kept_rows"].items() if s not in merged["retune"]]
    if again:
        tuned = run(shape, subclusters, [{"collective": collective, "network": "tuned",
                                          "sizes": again}], tuning_table=tuning,
                    gpu_size=gpu_window(collective, plan.n_nodes, max(again)), **kw)
        for r in tuned["runs"]:
            here = [t for t in times if t["size"] == r["size"]]
            mine = {t["network"]: t["time_ns"] for t in here if "time_ns" in t}
            over = {t["network"]: t["over_ns"] for t in here if "time_ns" not in t}
            best = min(mine, key=lambda n: (mine[n], n))
            rows.append({"size": r["size"], "check": r["size"] in merged["checks"],
                         "times": mine, **({"over": over} if over else {}), "best": best,
                         "best_ns": mine[best], "tuned": r["network"],
                         "tuned_ns": r["time_ns"], "ratio": r["time_ns"] / mine[best]})
    return {"nodes": plan.n_nodes, "groups": groups.count, "shape": shape,
            "subclusters": subclusters, "per_subcluster": per_subcluster,
            "collective": collective, "preset": preset, "gpu_read": gpu_read,
            "networks": nets, "table": tuning, "times": times,
            "rows": sorted(rows, key=lambda r: r["size"]), "checks": merged["checks"],
            "pending": merged["pending"], "retuned": merged["retune"]}


def merge_tuning(kept, fresh, sizes, checks, networks):
    """The times of a tuning sweep that measured ``fresh`` (fixed networks' times at ``sizes``
    and ``checks``) merged with ``kept`` (the machine's saved entry, or None), for a machine
    whose choices are ``networks``.  Returns a dict: ``times`` (kept times of the networks and
    sizes not measured now, with their ``run`` index, 0 for an entry of one stamp, then
    ``fresh``), ``checks`` (every size the table is not built from), ``table`` (built from the
    other sizes that have every choice measured), ``pending`` (sizes that have not, or where a
    choice cut short, ``over_ns``, was cut below the fastest time there now: it has to run
    again),
    ``new_rows`` (sizes measured now that have every choice), ``kept_rows`` (the kept rows of
    sizes not measured now, by size) and ``retune`` (of those, the sizes whose tuned network
    the table now chooses differently)."""
    measured = {(t["network"], t["size"]) for t in fresh}
    fresh_sizes = {t["size"] for t in fresh}
    kept_times, kept_rows, kept_checks = [], {}, set()
    if kept is not None:
        kept_times = [dict(t, run=t.get("run", 0)) for t in kept["times"]
                      if (t["network"], t["size"]) not in measured]
        kept_rows = {r["size"]: dict(r, run=r.get("run", 0)) for r in kept["rows"]
                     if r["size"] not in fresh_sizes}
        kept_checks = set(kept.get("checks", [r["size"] for r in kept["rows"] if r["check"]]))
    times = kept_times + fresh
    checks = sorted((kept_checks - set(sizes)) | set(checks))
    have, fastest = {}, fastest_times(times)
    for t in times:
        have.setdefault(t["size"], set()).add(t["network"])
    undecided = {t["size"] for t in times
                 if "time_ns" not in t and t["over_ns"] < fastest.get(t["size"], float("inf"))}
    complete = {s for s, nets in have.items() if set(networks) <= nets} - undecided
    tuning = build_table([t for t in times if t["size"] in complete - set(checks)])
    first = times[0]
    retune = sorted(s for s, r in kept_rows.items()
                    if choose(tuning, first["collective"], first["nodes"], first["groups"], s)
                    != r["tuned"]) if tuning else []
    return {"times": times, "checks": checks, "table": tuning,
            "pending": sorted(set(have) - complete), "new_rows": sorted(fresh_sizes & complete),
            "kept_rows": kept_rows, "retune": retune}


def tuning_table_text(result):
    """Markdown table of one :func:`tuning_sweep`: every network's time per size, the best,
    the tuned choice and its time against the best."""
    return "\n".join(table_lines(result))
