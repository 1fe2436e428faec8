"""Himeno's halo exchange per iteration over TCA, MPI and hybrid (000 Figures 9-10), and one
plane exchanged by TCA and by MPI against the plane's size (000 Figure 6), on the co-simulated
machine, every byte checked.

::

    python -m peach2.sim.hybrid.halo_bench --out build/halo.json            # 8 nodes + Fig. 6
    python -m peach2.sim.hybrid.halo_bench --part figure6 --planes 32,64 --out ...
    python -m peach2.sim.hybrid.halo_bench --nodes 16 --out build/halo16.json

PEACH2 reads GPU0 at HA-PACS/TCA's rate (:data:`GPU_READ`).  8 nodes are one 2x4
sub-cluster: ``tca`` uses it whole, ``hybrid`` splits it into two groups of
four as 000 Figure 11 did; 16 nodes are one 2x8.  The time of a run is one halo exchange (one
Himeno iteration's communication) from the common start to the last node's end.  Figure 6's
runs exchange one plane of an ``N^3`` array of doubles (``N x N x 8`` bytes) between two
neighbours (a sub-cluster of two nodes), both directions at once: the ``jk`` plane (Block) and the ``ik`` plane (Block
Stride; MPI packs and unpacks it).  The result is a JSON list of rows.
"""

import argparse
import json
import sys
from pathlib import Path

from peach2.sim.node import NodeParams

from .halo import SIZES
from .launch import run

__all__ = ["GRIDS", "PLANES", "PAPER", "measure", "tables", "main"]

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


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m peach2.sim.hybrid.halo_bench",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8, choices=sorted(GRIDS))
    ap.add_argument("--part", choices=("all", "halo", "figure6"), default="all",
                    help="the halo per iteration (Figures 9-10), Figure 6's planes, or both")
    ap.add_argument("--planes", help="Figure 6's N, comma separated (default "
                                     f"{','.join(map(str, PLANES))})")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSON list of rows")
    args = ap.parse_args(argv)
    if args.out and not Path(args.out).resolve().parent.is_dir():
        ap.error(f"--out: no folder {Path(args.out).resolve().parent}")
    try:
        planes = [int(n) for n in args.planes.split(",")] if args.planes else None
    except ValueError:
        ap.error(f"--planes: integers separated by commas, not {args.planes!r}")
    if planes and min(planes) < 1:
        ap.error("--planes: N must be at least 1")
    rows = measure(args.nodes, halo=args.part != "figure6",
                   figure6=args.part != "halo" and args.nodes == 8, planes=planes,
                   seed=args.seed)
    print(tables(rows))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
