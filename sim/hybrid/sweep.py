"""Broadcast and Allgather against size, the hybrid against MPI alone (000 Figures 12-15).

One machine per collective, every size and network on it, every byte checked (000 Figures 12
and 14 on 8 nodes, 13 and 15 on 16).

::

    python -m peach2.sim.hybrid.sweep --out build/hybrid_sweep.json     # 2 x 2x2, 8 nodes
    python -m peach2.sim.hybrid.sweep --shape 2x4 --out ...             # 16 nodes
    python -m peach2.sim.hybrid.sweep --shape 2x4 --subclusters 1 --per-subcluster 2 \
        --collective broadcast --out ...          # 000 Figure 11: one 2x4 split virtually

It prints, per collective, the time of MPI alone and of the hybrid at every size and their
ratio (above 1: the hybrid is faster), as 000 plots "relative performance", beside what the
paper states for its figures.

``--tune`` makes a tuning sweep instead (:func:`~.tuning.sweep.tuning_sweep`; issue 31's item
4): every network the tuning table chooses among (:data:`~.tuning.CHOICES`) at :data:`SIZES`
and :data:`~.tuning.sweep.CHECK_SIZES`, the table from SIZES, network ``tuned`` run with it at
every size, and its time against the best fixed network's; the result is merged into the
machine's entry in ``docs/results/tuning.json``, whose tables network ``tuned`` reads: the sizes
measured replace the entry's, its other sizes stay (with their stamps), the table is built from
both, and a kept size whose choice that changes is run ``tuned`` again
(:func:`~.tuning.sweep.merge_tuning`; so a machine whose sizes take hours is measured a few
sizes at a time; ``--cutoff`` cuts a choice's run short once it is slower than the fastest
known at its size, a lower bound is all the table needs)::

    python -m peach2.sim.hybrid.sweep --shape 2x4 --subclusters 1 --per-subcluster 2 \
        --collective allgather --tune
    python -m peach2.sim.hybrid.sweep --shape 2x8 --subclusters 4 --collective allgather \
        --tune --sizes 65536        # adds 64 KiB blocks to the 64-node table

``--save`` merges a sweep's rows into the hybrid section's results (``docs/results/hybrid.json``,
:func:`~.saved.merge_curves`), stamped with the run, in place of the rows of the sizes it
measured.  Sweeps may run side by side: each saves under a lock (:func:`~.saved.updating`).
"""

import argparse
import json
import sys
from pathlib import Path

from peach2.sim.node import NodeParams
from peach2.sim.run import run_info, started
from peach2.sim.system import MachinePlan

from .figures import machine_entry, size_text
from .groups import Groups
from .launch import gpu_window, run
from .saved import (
    CURVES_FILE,
    holding_entry,
    merge_curves,
    stamp_tuning,
    tuning_key,
    tuning_runs,
    updating,
)
from .tuning import TABLE_FILE
from .tuning.sweep import CHECK_SIZES, choices, tuning_sweep, tuning_table_text

__all__ = ["SIZES", "PAPER", "sweep", "rows_of", "table", "main"]

#: PEACH2's GPU read rate: HA-PACS/TCA's Ivy Bridge nodes (the node model's, which the MPI
#: side's GPUDirect reads use too), not the GPU model's default (002's Sandy Bridge 870 MB/s).
GPU_READ = NodeParams().gpu_read_bytes_per_s

#: Broadcast bytes and Allgather blocks (000 plots 8 B .. 4 MB and 16 B .. 1 MB).
SIZES = {"broadcast": [8, 64, 512, 2048, 8192, 32768, 131072, 524288],
         "allgather": [16, 128, 1024, 4096, 16384, 65536]}

#: What "TCA/InfiniBand hybrid communication in XcalableACC" states of its Figures 12-15.
PAPER = {("broadcast", 8): "up to 21% faster; slower at 2-8 KB (MVAPICH2's protocol switch) and "
                           "above 512 KB",
         ("broadcast", 16): "up to 14% faster",
         ("allgather", 8): "up to 46% faster; slower at 1-4 KB; slower from 64 KB",
         ("allgather", 16): "up to 40% faster; slower at 512 B-1 KB; slower from 32 KB"}


def sweep(shape="2x2", subclusters=2, sizes=None, seed=1, per_subcluster=1,
          gpu_read=GPU_READ):
    """Run every size of ``sizes`` (default :data:`SIZES`) over ``mpi`` and ``hybrid``; return
    ``{collective: [{"size", "mpi_ns", "hybrid_ns", "ratio"}]}`` and the machine's figures.
    ``per_subcluster``: TCA groups per sub-cluster (2: 000 Figure 11's virtual split);
    ``gpu_read``: bytes/s of PEACH2's GPU reads (default HA-PACS/TCA's, as the MPI side's)."""
    sizes = sizes or SIZES
    bad = [c for c in sizes if c not in SIZES]
    if bad:
        raise ValueError(f"collectives are {list(SIZES)}, not {bad}")
    p = MachinePlan(shape, subclusters).n_nodes
    out, raw = {}, {}
    for collective, values in sizes.items():
        runs = [{"collective": collective, "network": net, "sizes": values}
                for net in ("mpi", "hybrid")]
        result = run(shape, subclusters, runs, seed=seed, per_subcluster=per_subcluster,
                     gpu_read=gpu_read, gpu_size=gpu_window(collective, p, max(values)))
        raw[collective] = result
        out[collective] = rows_of(result, collective)
    return out, raw


def rows_of(result, collective):
    """``[{"size", "mpi_ns", "hybrid_ns", "ratio", "mpi_algorithm"}]`` of ``collective`` in a
    :func:`~.launch.run` result, for every size run over both ``mpi`` and ``hybrid``."""
    runs = [r for r in result["runs"] if r["name"] == collective]
    times = {(r["network"], r["size"]): r["time_ns"] for r in runs}
    algorithm = {r["size"]: r["info"].get("mpi_algorithm") for r in runs
                 if r["network"] == "mpi"}
    sizes = sorted({s for net, s in times if net == "mpi"} & {s for net, s in times
                                                            if net == "hybrid"})
    return [{"size": s, "mpi_ns": times[("mpi", s)], "hybrid_ns": times[("hybrid", s)],
             "ratio": times[("mpi", s)] / times[("hybrid", s)],
             "mpi_algorithm": algorithm[s]} for s in sizes]


def table(rows, nodes, collective):
    """Markdown table of one collective's sweep."""
    what = "bytes" if collective == "broadcast" else "block"
    lines = [f"| {what} | MPI alone (us) | hybrid (us) | MPI / hybrid |",
             "| ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {size_text(r['size'])} | {r['mpi_ns'] / 1000:.1f} | "
                     f"{r['hybrid_ns'] / 1000:.1f} | {r['ratio']:.2f} |")
    lines.append(f"\n000 on {nodes} nodes: {PAPER.get((collective, nodes), 'not measured')}.")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m peach2.sim.hybrid.sweep",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="2x2", help="one sub-cluster's rings x nodes per ring "
                    "(2x2: 4 nodes, 2x4: 8, 2x8: 16)")
    ap.add_argument("--subclusters", type=int, default=2, help="sub-clusters, joined by "
                    "InfiniBand (default 2)")
    ap.add_argument("--per-subcluster", type=int, default=1,
                    help="TCA groups per sub-cluster (2: 000 Figure 11's virtual split)")
    ap.add_argument("--collective", action="append", choices=list(SIZES),
                    help="only this collective (repeatable; default both)")
    ap.add_argument("--sizes", help="comma-separated sizes instead of SIZES (with one "
                    "--collective)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tune", action="store_true",
                    help="a tuning sweep (every network of the tuning's choices, the table "
                         "from SIZES, checked at CHECK_SIZES by network tuned); its sizes "
                         "replace those of this machine's entry in --out (default "
                         "docs/results/tuning.json), its other sizes are kept and the table "
                         "is built from both")
    ap.add_argument("--save", nargs="?", const=str(CURVES_FILE), metavar="JSON",
                    help="merge the rows into the hybrid section's results (default "
                         "docs/results/hybrid.json), stamped with this run, in place of those "
                         "of the same machine, collective and size")
    ap.add_argument("--conditions", help="with --tune or --save: what else ran on the machine "
                    "(saved with the run)")
    ap.add_argument("--checks", help="with --tune and --sizes: comma-separated sizes to check "
                    "the table at (not built from them; default none with --sizes)")
    ap.add_argument("--networks", help="with --tune: only these of the machine's choices "
                    "(comma-separated); a size gets its row, and goes into the table, once "
                    "every choice is measured there, over as many runs as it takes")
    ap.add_argument("--cutoff", action="store_true",
                    help="with --tune: cut a run short once it takes longer than the fastest "
                         "choice known at its size (saved, or measured before it): the table "
                         "shows > its time there; each network in simulations of its own")
    ap.add_argument("--max-size", type=int, metavar="BYTES",
                    help="only sizes up to BYTES (of SIZES, and CHECK_SIZES with --tune)")
    ap.add_argument("--out", help="JSON of the figures")
    args = ap.parse_args(argv)
    if args.max_size is not None and args.max_size < 1:
        ap.error(f"--max-size: at least 1 byte, not {args.max_size}")
    if args.tune and args.save:
        ap.error("--save goes without --tune (a tuning sweep saves into --out)")
    if args.conditions and not (args.tune or args.save):
        ap.error("--conditions goes with --tune or --save")
    if args.tune and not args.out:
        args.out = str(TABLE_FILE)
    for option, value in (("--out", args.out), ("--save", args.save)):
        if value and not Path(value).resolve().parent.is_dir():
            ap.error(f"{option}: no folder {Path(value).resolve().parent}")
    try:
        Groups(MachinePlan(args.shape, args.subclusters), args.per_subcluster)
    except ValueError as e:
        ap.error(str(e))
    chosen = {c: SIZES[c] for c in (args.collective or SIZES)}
    if args.sizes:
        if len(chosen) != 1:
            ap.error("--sizes goes with one --collective")
        values = _size_list(ap, "--sizes", args.sizes)
        chosen = {c: values for c in chosen}
    if args.max_size is not None:
        chosen = {c: [v for v in values if v <= args.max_size] for c, values in chosen.items()}
        if not all(chosen.values()):
            ap.error(f"--max-size {args.max_size} leaves no size")
    if args.networks and not args.tune:
        ap.error("--networks goes with --tune")
    if args.cutoff and not args.tune:
        ap.error("--cutoff goes with --tune")
    groups = Groups(MachinePlan(args.shape, args.subclusters), args.per_subcluster)
    for collective in (args.collective or SIZES) if args.networks else ():
        nets = choices(groups, collective)
        unknown = sorted(set(args.networks.split(",")) - set(nets))
        if unknown:
            ap.error(f"--networks: {', '.join(unknown)} not among the {collective}'s choices "
                     f"here: {', '.join(nets)}")
    checks_given = []
    if args.checks:
        if not (args.tune and args.sizes):
            ap.error("--checks goes with --tune and --sizes")
        checks_given = _size_list(ap, "--checks", args.checks)
    merged = args.out if args.tune else args.save
    problem = merged and _unreadable(merged)
    if problem:
        print(f"{'--out' if args.tune else '--save'}: cannot read {merged}: {problem}",
              file=sys.stderr)
        return 4
    if args.tune:
        return _tune(args, chosen, checks_given)
    start = started()
    rows, raw = sweep(args.shape, args.subclusters, chosen, args.seed, args.per_subcluster)
    nodes = next(iter(raw.values()))["runs"][0]["nodes"]
    split = f", {args.per_subcluster} groups each" if args.per_subcluster > 1 else ""
    for collective, values in rows.items():
        print(f"\n{collective}, {nodes} nodes ({args.subclusters} x {args.shape}{split}), "
              f"{raw[collective]['preset']}:\n")
        print(table(values, nodes, collective))
    if args.out:
        try:
            Path(args.out).write_text(json.dumps(
                {"shape": args.shape, "subclusters": args.subclusters,
                 "per_subcluster": args.per_subcluster, "nodes": nodes, "gpu_read": GPU_READ,
                 "rows": rows, "runs": raw},
                indent=1))
        except OSError as e:
            print(f"--out: cannot write {args.out}: {e}", file=sys.stderr)
            return 4
    if args.save:
        stamp = run_info("python -m peach2.sim.hybrid.sweep " + " ".join(
            a for a in argv_of(args) if a), start, conditions=args.conditions)
        entry = machine_entry(args.shape, args.subclusters, args.per_subcluster, rows, raw,
                              gpu_read=GPU_READ)
        try:
            with updating(args.save) as saved:
                merge_curves(saved, entry, stamp)
        except (OSError, ValueError) as e:
            print(f"--save: cannot update {args.save}: {e}", file=sys.stderr)
            return 4
        print(f"saved {args.save}", file=sys.stderr)
    return 0


def _unreadable(path):
    """Why the saved results at ``path`` cannot be read and merged into ("" if they can, or if
    there is no file yet): checked before a sweep's hours, not after."""
    try:
        if Path(path).exists():
            json.loads(Path(path).read_text())["machines"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{type(e).__name__}: {e}"
    return ""


def _size_list(ap, option, text):
    """The sorted sizes of ``option``'s comma-separated ``text``; a bad one ends through
    ``ap.error`` (one line, status 2)."""
    try:
        values = sorted({int(v) for v in text.split(",")})
    except ValueError:
        ap.error(f"{option}: integers separated by commas, not {text!r}")
    if values[0] < 1:
        ap.error(f"{option}: at least 1 byte each")
    return values


def _tune(args, chosen, checks_given):
    """``--tune``: a tuning sweep per collective, printed and merged into ``args.out`` (the
    machine's times and rows of other sizes kept: :func:`~.tuning.sweep.merge_tuning`), each
    holding its
    entry from its start to its save (:func:`~.saved.holding_entry`)."""
    out = Path(args.out)
    for collective, values in chosen.items():
        plan = MachinePlan(args.shape, args.subclusters)
        key = (collective, plan.n_nodes, Groups(plan, args.per_subcluster).count)
        with holding_entry(out, key):
            start = started()
            checks = checks_given if args.sizes else [
                v for v in CHECK_SIZES[collective]
                if args.max_size is None or v <= args.max_size]
            kept = _kept_entry(out, key)
            r = tuning_sweep(args.shape, args.subclusters, collective, values, checks,
                             gpu_read=GPU_READ, per_subcluster=args.per_subcluster,
                             seed=args.seed, kept=kept,
                             networks=args.networks and args.networks.split(","),
                             cutoff=args.cutoff)
            print(f"\n{collective}, {r['nodes']} nodes in {r['groups']} groups "
                  f"({args.subclusters} x {args.shape}), {r['preset']}, us (* = a size the "
                  f"table was not built from):\n")
            print(tuning_table_text(r))
            worst = max(r["rows"], key=lambda x: x["ratio"], default=None)
            if worst is not None:
                print(f"\nworst tuned / best: {worst['ratio']:.3f} at {size_text(worst['size'])}")
            if kept is not None:
                print(f"kept from the saved entry: what was not measured here; run tuned again "
                      f"at {', '.join(map(size_text, r['retuned'])) or 'none'} (the table "
                      f"changed there)")
            if r["pending"]:
                print(f"pending (not every choice measured yet, no row): "
                      f"{', '.join(map(size_text, r['pending']))}")
            stamp = run_info(
                "python -m peach2.sim.hybrid.sweep " + " ".join(a for a in argv_of(args) if a),
                start, conditions=args.conditions)
            try:
                with updating(out) as saved:
                    stamp_tuning(saved, r, stamp, tuning_runs(kept) if kept is not None else [])
            except (OSError, ValueError) as e:
                print(f"--out: cannot update {out}: {e}", file=sys.stderr)
                return 4
            print(f"saved {out}", file=sys.stderr)
    return 0


def _kept_entry(out, key):
    """The saved tuning entry ``key`` (:func:`~.saved.tuning_key`) in ``out`` (None if there is
    none, or it was measured with another GPU read rate: then it is replaced whole)."""
    if not out.exists():
        return None
    with updating(out) as saved:
        entry = next((m for m in saved["machines"] if tuning_key(m) == key), None)
    if entry is None or entry.get("gpu_read") != GPU_READ:
        return None
    return entry


def argv_of(args):
    """The options that chose this sweep's machine (for the saved command)."""
    return [f"--shape {args.shape}", f"--subclusters {args.subclusters}",
            f"--per-subcluster {args.per_subcluster}" if args.per_subcluster > 1 else "",
            *(f"--collective {c}" for c in (args.collective or [])),
            f"--sizes {args.sizes}" if args.sizes else "",
            f"--checks {args.checks}" if args.checks else "",
            f"--networks {args.networks}" if args.networks else "",
            f"--max-size {args.max_size}" if args.max_size else "",
            "--tune" if args.tune else "", "--cutoff" if args.cutoff else "",
            "--save" if args.save else ""]


if __name__ == "__main__":
    sys.exit(main())
