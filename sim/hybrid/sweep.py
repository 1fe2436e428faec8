"""Broadcast and Allgather against size, hybrid against MPI alone (000 Figures 12 and 14 on 8
nodes): one machine per collective, every size and network on it, every byte checked.

::

    python -m peach2.sim.hybrid.sweep --out build/hybrid_sweep.json     # 2 x 2x2, 8 nodes
    python -m peach2.sim.hybrid.sweep --shape 2x4 --out ...             # 16 nodes
    python -m peach2.sim.hybrid.sweep --shape 2x4 --subclusters 1 --per-subcluster 2 \
        --collective broadcast --out ...          # 000 Figure 11: one 2x4 split virtually

It prints, per collective, the time of MPI alone and of the hybrid at every size and their
ratio (above 1: the hybrid is faster), as 000 plots "relative performance", beside what the
paper states for its figures.
"""

import argparse
import json
import sys
from pathlib import Path

from peach2.sim.node import NodeParams
from peach2.sim.system import MachinePlan

from .figures import size_text
from .launch import run

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
        need = max(values) * (p if collective == "allgather" else 1) + 4096
        runs = [{"collective": collective, "network": net, "sizes": values}
                for net in ("mpi", "hybrid")]
        result = run(shape, subclusters, runs, seed=seed, per_subcluster=per_subcluster,
                     gpu_read=gpu_read,
                     gpu_size=max(1 << 20, 1 << (need - 1).bit_length()))
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
    ap.add_argument("--shape", default="2x2", help="one sub-cluster (2x2: 8 nodes, 2x4: 16)")
    ap.add_argument("--subclusters", type=int, default=2)
    ap.add_argument("--per-subcluster", type=int, default=1,
                    help="TCA groups per sub-cluster (2: 000 Figure 11's virtual split)")
    ap.add_argument("--collective", action="append", choices=list(SIZES),
                    help="only this collective (repeatable; default both)")
    ap.add_argument("--sizes", help="comma-separated sizes instead of SIZES (with one "
                    "--collective)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSON of the figures")
    args = ap.parse_args(argv)
    if args.out and not Path(args.out).resolve().parent.is_dir():
        ap.error(f"--out: no folder {Path(args.out).resolve().parent}")
    chosen = {c: SIZES[c] for c in (args.collective or SIZES)}
    if args.sizes:
        if len(chosen) != 1:
            ap.error("--sizes goes with one --collective")
        try:
            values = sorted({int(v) for v in args.sizes.split(",")})
        except ValueError:
            ap.error(f"--sizes: integers separated by commas, not {args.sizes!r}")
        if values[0] < 1:
            ap.error("--sizes: at least 1 byte each")
        chosen = {c: values for c in chosen}
    rows, raw = sweep(args.shape, args.subclusters, chosen, args.seed, args.per_subcluster)
    nodes = next(iter(raw.values()))["runs"][0]["nodes"]
    split = f", {args.per_subcluster} groups each" if args.per_subcluster > 1 else ""
    for collective, values in rows.items():
        print(f"\n{collective}, {nodes} nodes ({args.subclusters} x {args.shape}{split}), "
              f"{raw[collective]['preset']}:\n")
        print(table(values, nodes, collective))
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"shape": args.shape, "subclusters": args.subclusters,
             "per_subcluster": args.per_subcluster, "nodes": nodes, "gpu_read": GPU_READ,
             "rows": rows, "runs": raw},
            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
