"""Himeno's halo exchange over TCA, MPI and the hybrid (000 Figures 9-10), and one plane (6).

The exchange per iteration, and one plane exchanged by TCA and by MPI against the plane's size
(Figure 6), on the co-simulated machine, every byte checked.

::

    python -m peach2.sim.hybrid.halo_bench                  # 8 nodes (Figures 9-10) + Figure 6
    python -m peach2.sim.hybrid.halo_bench --nodes 16       # (2, 8, 1) and (4, 4, 1)
    python -m peach2.sim.hybrid.halo_bench --part figure6 --planes 32,64 --out build/halo.json

PEACH2 reads GPU0 at HA-PACS/TCA's rate (:data:`GPU_READ`).  8 nodes are one 2x4
sub-cluster: ``tca`` uses it whole, ``hybrid`` splits it into two groups of
four as 000 Figure 11 did; 16 nodes are one 2x8.  The time of a run is one halo exchange (one
Himeno iteration's communication) from the common start to the last node's end.  Figure 6's
runs exchange one plane of an ``N^3`` array of doubles (``N x N x 8`` bytes) between two
neighbours (a sub-cluster of two nodes), both directions at once: the ``jk`` plane (Block) and the ``ik`` plane (Block
Stride; MPI packs and unpacks it).

The rows go to ``--out`` (default :data:`RESULTS_FILE`, the ``halo`` section of
``docs/benchmarks.md``, drawn by :mod:`peach2.sim.hybrid.figures.halo`) as
``{"run": {...}, "parts": [...], "rows": [...]}``: the rows of the figures and node counts a
run measured replace those saved, the others are kept (:func:`merge`); ``parts`` holds each
kept run's stamp (:func:`peach2.sim.run.run_info`) and ``run`` the section's, made of them.
A file in the older format (a bare list of rows) is read as rows without a stamp
(:func:`saved_form`).
"""

import argparse
import json
import sys
from pathlib import Path

from peach2.sim.node import NodeParams
from peach2.sim.run import ROOT, run_info, started

from .halo import SIZES
from .launch import run

__all__ = ["GRIDS", "PLANES", "PAPER", "RESULTS_FILE", "measure", "tables", "saved_form",
           "load", "merge", "main"]

#: The ``halo`` section's saved results.
RESULTS_FILE = ROOT / "docs" / "results" / "halo.json"

#: The partitions (Pi, Pj) of 000 section 6.1 that fit each machine.
GRIDS = {8: [(2, 4)], 16: [(2, 8), (4, 4)]}
#: Machine of each node count: (shape of one sub-cluster, sub-clusters).
MACHINES = {8: ("2x4", 1), 16: ("2x8", 1)}
#: Figure 6's array sides N (plane N x N x 8 bytes: 8 KiB .. 512 KiB).
PLANES = [32, 64, 128, 256]
#: Figure 6's machine: two neighbours, one hop apart (a ring of two sub-cluster nodes; the
#: chips of a larger sub-cluster would only idle).
FIGURE6_MACHINE = "ring:2"
#: PEACH2's reads of GPU0: HA-PACS/TCA's Ivy Bridge rate (2.8 GB/s, GTC 2015), the rate the MPI
#: model's GPUDirect reads use, not the GPU model's default (002's Sandy Bridge 870 MB/s).
GPU_READ = NodeParams().gpu_read_bytes_per_s

#: What "TCA/InfiniBand hybrid communication in XcalableACC" states (section 6.1, section 4).
PAPER = {
    "small": "Fig. 9: (2,8,1): TCA 70% faster than MV2GDR; hybrid up to 40% faster than "
             "MV2GDR, slower than TCA",
    "middle": "Fig. 10: TCA faster than MV2GDR; hybrid faster than MV2GDR at (2,8,1) and "
              "faster than both MV2GDR and TCA at (2,4,1) (block-stride 80-90% of the bytes)",
    "fig6": "Fig. 6: jk (Block): TCA ahead of MV2GDR up to N = 320-384; ik (Block Stride): "
            "TCA about as fast as its Block up to N = 384, MV2GDR with pack/unpack below its "
            "Block, TCA ahead up to N = 512-576",
}


def _halo(size, network):
    return {"collective": "halo", "network": network, "sizes": size}


def measure(nodes=8, halo=True, figure6=True, planes=None, seed=1):
    """Run the halo of every size and partition of ``nodes`` over the three networks
    (``halo``) and Figure 6's planes (``figure6``, on two nodes); return the rows."""
    rows = _halo_rows(nodes, seed) if halo else []
    if figure6:
        rows += _figure6(planes or PLANES, seed)
    return rows


def _halo_rows(nodes, seed):
    shape, subclusters = MACHINES[nodes]
    sizes = [{"dims": list(SIZES[name]), "grid": list(grid), "elem": 4}
             for name in SIZES for grid in GRIDS[nodes]]
    runs = [_halo(sizes, net) for net in ("tca", "mpi", "hybrid")]
    result = run(shape, subclusters, runs, seed=seed, gpu_size=4 << 20, gpu_read=GPU_READ)
    names = {tuple(d): n for n, d in SIZES.items()}
    rows = [{"figure": "9" if names[tuple(r["size"]["dims"])] == "small" else "10",
             "nodes": nodes, "size": names[tuple(r["size"]["dims"])],
             "dims": r["size"]["dims"], "grid": r["size"]["grid"], "network": r["network"],
             "time_us": r["time_ns"] / 1000, "i_plane": r["info"]["i_plane"],
             "j_plane": r["info"]["j_plane"],
             "block_stride_share": r["info"]["block_stride_share"]} for r in result["runs"]]
    return rows


def _figure6(planes, seed):
    jk = [{"dims": [2, n, n], "grid": [2, 1], "elem": 8} for n in planes]      # i: Block
    ik = [{"dims": [n, 8, n], "grid": [1, 2], "elem": 8} for n in planes]      # j: Block Stride
    runs = [_halo(s, net) for s in (jk, ik) for net in ("tca", "mpi")]
    big = max(planes)
    gpu = 1 << ((big + 2) * 6 * big * 8 + 4 * big * big * 8).bit_length()
    result = run(FIGURE6_MACHINE, 1, runs, seed=seed, gpu_size=max(1 << 20, gpu),
                 gpu_read=GPU_READ)
    rows = []
    for r in result["runs"]:
        plane = "jk" if r["size"]["grid"] == [2, 1] else "ik"
        n = r["size"]["dims"][2]
        rows.append({"figure": "6", "nodes": 2, "plane": plane, "n": n, "bytes": n * n * 8,
                     "network": r["network"], "time_us": r["time_ns"] / 1000,
                     "mb_per_s": n * n * 8 / r["time_ns"] * 1000})
    return rows


def tables(rows):
    """Markdown tables of the rows, each beside what 000 states."""
    out = []
    halo = [r for r in rows if r["figure"] in ("9", "10")]
    if halo:
        t = {(r["size"], tuple(r["grid"]), r["network"]): r for r in halo}
        out += ["| size | nodes | (Pi, Pj, 1) | block-stride share | TCA (us) | MV2GDR (us) | "
                "hybrid (us) | MV2GDR / hybrid | MV2GDR / TCA |",
                "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for size, grid, _ in sorted({k for k in t if k[2] == "mpi"},
                                    key=lambda k: (k[0] != "small", k[1])):
            tca, mpi, hyb = (t.get((size, grid, n)) for n in ("tca", "mpi", "hybrid"))
            out.append(f"| {size} | {mpi['nodes']} | ({grid[0]}, {grid[1]}, 1) | "
                       f"{hyb['block_stride_share']:.0%} | {tca['time_us']:.1f} | "
                       f"{mpi['time_us']:.1f} | {hyb['time_us']:.1f} | "
                       f"{mpi['time_us'] / hyb['time_us']:.2f} | "
                       f"{mpi['time_us'] / tca['time_us']:.2f} |")
        out += ["", f"The paper, Small: {PAPER['small']}.",
                f"The paper, Middle: {PAPER['middle']}.", ""]
    fig6 = [r for r in rows if r["figure"] == "6"]
    if fig6:
        t = {(r["plane"], r["n"], r["network"]): r for r in fig6}
        out += ["| N | plane | TCA Block (MB/s) | MV2GDR Block (MB/s) | TCA Block Stride (MB/s) "
                "| MV2GDR pack/unpack (MB/s) |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for n in sorted({r["n"] for r in fig6}):
            vals = [t[(p, n, net)]["mb_per_s"] for p in ("jk", "ik") for net in ("tca", "mpi")]
            out.append(f"| {n} | {n * n * 8 // 1024} KiB | " + " | ".join(f"{v:.0f}"
                                                                         for v in vals) + " |")
        out += ["", f"The paper, {PAPER['fig6']}."]
    return "\n".join(out)


def saved_form(data, where="the saved halo results"):
    """``data`` as ``{"run", "parts", "rows"}``: a dict with ``rows`` as it is, a bare list of
    rows (the format before the run stamp) with no run; anything else is refused."""
    if isinstance(data, list):
        return {"run": None, "parts": [], "rows": data}
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        return {"run": data.get("run"), "parts": data.get("parts", []), "rows": data["rows"]}
    raise ValueError(f"{where}: not halo_bench's results (a dict with 'run' and 'rows', or a "
                     "list of rows)")


def load(path=RESULTS_FILE):
    """The results saved at ``path`` in :func:`saved_form`, or None when there are none."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    return saved_form(data, str(path))


def _key(row):
    return [row["figure"], row["nodes"]]


def _what(keys):
    """``[["9", 8], ["10", 8], ["6", 2]]`` -> ``Figures 9-10 on 8 nodes, Figure 6``."""
    nodes = sorted({n for f, n in keys if f != "6"})
    out = [f"Figures 9-10 on {n} nodes" for n in nodes]
    return ", ".join(out + (["Figure 6"] if any(f == "6" for f, _ in keys) else []))


def merge(saved, rows, run):
    """``saved`` (:func:`saved_form`'s, or None) with ``rows``, measured by ``run``
    (:func:`~peach2.sim.run.run_info`'s), in place of the saved rows of the same figures and
    node counts.  Each run whose rows are kept stays in ``parts``; the section's ``run`` joins
    their commands and names the oldest part's commit (the figures are stale since then)."""
    keys = _keys(rows)
    old = saved or {"run": None, "parts": [], "rows": []}
    kept = [r for r in old["rows"] if _key(r) not in keys]
    parts = []
    earlier = old["parts"] or ([{**old["run"], "keys": _keys(kept)}] if old["run"] and kept
                               else [])
    for part in earlier:
        left = [k for k in part["keys"] if k not in keys]
        if left:
            parts.append({**part, "keys": left, "what": _what(left)})
    if kept and not parts:          # rows without a stamp (the list format)
        parts.append({"command": "?", "commit": "unknown", "keys": _keys(kept),
                      "what": _what(_keys(kept)), "conditions": "saved without a run stamp"})
    parts.append({**run, "keys": keys, "what": _what(keys)})
    return {"run": _section_run(parts), "parts": parts, "rows": kept + rows}


def _keys(rows):
    out = []
    for k in map(_key, rows):
        if k not in out:
            out.append(k)
    return out


def _section_run(parts):
    """The stamp of the section from its parts' (one part: that part's)."""
    if len(parts) == 1:
        return {k: v for k, v in parts[0].items() if k not in ("keys", "what")}
    commands = []
    for p in parts:
        if p["command"] not in commands:
            commands.append(p["command"])
    seconds = [p.get("seconds") for p in parts]
    shortened = [s for p in parts for s in p.get("shortened") or []]
    commit, date = parts[0]["commit"], max(p.get("date") or "" for p in parts) or None
    return {"command": "; ".join(commands), "commit": commit, "date": date,
            "seconds": sum(seconds) if None not in seconds else None,
            "cores": parts[-1].get("cores"), "load": None,
            "shortened": list(dict.fromkeys(shortened)),
            "conditions": "; ".join(
                p["what"] + (f" at {p['commit']}" if p["commit"] != commit else "")
                + (f" on {p['date']}" if p.get("date") and p["date"] != date else "")
                + (f" ({p['conditions']})" if p.get("conditions") else "") for p in parts)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m peach2.sim.hybrid.halo_bench",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8, choices=sorted(GRIDS))
    ap.add_argument("--part", choices=("all", "halo", "figure6"), default="all",
                    help="the halo per iteration (Figures 9-10), Figure 6's planes, or both")
    ap.add_argument("--planes", help="Figure 6's N, comma separated (default "
                                     f"{','.join(map(str, PLANES))})")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(RESULTS_FILE),
                    help="JSON of the results: the rows measured replace those of the same "
                         "figures and node counts, the others are kept (default: the halo "
                         "section of docs/benchmarks.md, docs/results/halo.json)")
    ap.add_argument("--conditions", help="what else ran on the machine (saved with the rows)")
    args = ap.parse_args(argv)
    if args.part == "figure6" and args.nodes != 8:
        ap.error("--part figure6: Figure 6 runs with the 8-node measurement (--nodes 8)")
    out = Path(args.out)
    if not out.resolve().parent.is_dir():
        ap.error(f"--out: no folder {out.resolve().parent}")
    try:
        saved = load(out)
    except ValueError as e:
        ap.error(f"--out: {e}")
    try:
        planes = [int(n) for n in args.planes.split(",")] if args.planes else None
    except ValueError:
        ap.error(f"--planes: integers separated by commas, not {args.planes!r}")
    if planes and min(planes) < 1:
        ap.error("--planes: N must be at least 1")
    start = started()
    rows = measure(args.nodes, halo=args.part != "figure6",
                   figure6=args.part != "halo" and args.nodes == 8, planes=planes,
                   seed=args.seed)
    print(tables(rows))
    command = " ".join(["python -m peach2.sim.hybrid.halo_bench", *(
        a for a in _options(args) if a)])
    shortened = ([f"Figure 6: N = {', '.join(map(str, planes))} instead of "
                  f"{', '.join(map(str, PLANES))}"] if planes and planes != PLANES and
                 args.part != "halo" and args.nodes == 8 else [])
    data = merge(saved, rows, run_info(command, start, shortened, args.conditions))
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"saved {out}", file=sys.stderr)
    return 0


def _options(args):
    """The options of the measurement (for the saved command; not --out or --conditions)."""
    return [f"--nodes {args.nodes}" if args.nodes != 8 else "",
            f"--part {args.part}" if args.part != "all" else "",
            f"--planes {args.planes}" if args.planes else "",
            f"--seed {args.seed}" if args.seed != 1 else ""]


if __name__ == "__main__":
    sys.exit(main())
