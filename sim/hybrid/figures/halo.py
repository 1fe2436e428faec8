"""The ``halo`` section of ``docs/benchmarks.md``: Himeno's halo exchange, 000 Figures 9-10
(one exchange over TCA, MVAPICH2-GDR and the hybrid on 8 and 16 nodes) and Figure 6 (one
plane, Block and Block Stride, TCA against MPI with pack/unpack), from the rows of
:mod:`peach2.sim.hybrid.halo_bench` saved in ``docs/results/halo.json``, beside what the paper
states (:data:`peach2.sim.hybrid.halo_bench.PAPER`, checked point by point by :func:`compare`).
"""

from pathlib import Path

from ..halo_bench import tables
from .collectives import save_figure

__all__ = ["PLOTS", "STRONG_PLOT", "PLANES_PLOT", "NETWORKS", "NOTES", "compare",
           "plot_strong", "plot_planes", "section"]

#: The section's plots, file names under the document's image folder.
STRONG_PLOT = "halo_strong.png"
PLANES_PLOT = "halo_planes.png"
PLOTS = (STRONG_PLOT, PLANES_PLOT)
#: The rows' networks, as the paper names them.
NETWORKS = {"tca": "TCA", "mpi": "MV2GDR", "hybrid": "hybrid"}
#: Figure 6's curves: (plane, network) -> the paper's name.
CURVES = {("jk", "tca"): "TCA Block", ("jk", "mpi"): "MV2GDR Block",
          ("ik", "tca"): "TCA Block Stride", ("ik", "mpi"): "MV2GDR pack/unpack"}
#: The array sides N where 000 Figure 6 has MV2GDR catch up with TCA: Block, Block Stride.
CROSSOVERS = {"jk": (320, 384), "ik": (512, 576)}

#: What explains where the model and 000 agree or differ (written from the saved rows).
NOTES = """
**Figures 9-10 against 000** (000 plots Himeno's whole iteration, computation included; the
times here are of the exchange alone, so the ratios are larger than the paper's):

- **Middle (2, 4, 1): the hybrid beats both**, as the paper finds at (2, 4, 1). Its MPI part
  (one 32 KiB `jk` plane, staged through host memory) and its TCA part (two 64 KiB `ik`
  planes, about 47 us at 2.8 GB/s) take about as long as each other and run at once; TCA
  alone sends a node's 160 KiB from one chain in series (61 us), and MV2GDR alone adds two
  pack and two unpack kernels to its staging.
- **Small (2, 4, 1): the hybrid gains only 1.22x over MV2GDR** and is 3.8x slower than TCA
  alone. Its `jk` plane is 8 KiB, the largest message MV2GDR-QPI-Tuned still sends by
  GPUDirect RDMA across QPI, where the model's one-way time is 65 us (126 MB/s: the
  Figure 4 curve of [mpi](mpi.md#calibration)). That is MVAPICH2's protocol switch, which the
  paper blames for its Broadcast and Allgather dips; the paper states its Small gains at
  (2, 8, 1), whose `jk` planes are 4 KiB (16 nodes: 1.56x).
- **(2, 8, 1), the paper's Figure 9 point: for Small, TCA alone is the fastest and the hybrid
  beats MV2GDR**, the paper's order (it states TCA 70 % and the hybrid up to 40 % faster than
  MV2GDR; here 3.6x and 1.56x for the exchange alone). For Middle the hybrid is the fastest of
  the three here; the paper has it ahead of MV2GDR at (2, 8, 1) and of both only at (2, 4, 1).
- **(4, 4, 1): TCA alone loses its lead at Middle** (92.3 us against MV2GDR's 89.6). Ranks sit
  on the nodes in order, so an `i` neighbour is 4 ring hops away (rank 0 to rank 4) or across
  an S link and the ring, and those planes share ring links; the paper chose partitions and
  mappings in which every exchange is one hop. The hybrid sends those planes over InfiniBand
  and is 1.7x faster than either. Small (4, 4, 1) is all 8 KiB messages, MV2GDR's slow
  GPUDirect-across-QPI size (above), up to four per node.
- (2, 8, 1) moves 88 % of its bytes block-stride, within the paper's "80-90 %" for (2, 8, 1)
  and (2, 4, 1); (2, 4, 1) here moves 75 % (one halo plane, no Himeno `+1` sizes).

**Figure 6 against 000** (bandwidth = one plane / exchange time, both directions at once; the
paper's is a ping-pong's):

- TCA's Block Stride runs exactly as fast as its Block at every `N` (its bursts are 256 B to
  2 KiB, each at the full rate of the GPU read path), as the paper finds up to `N` = 384.
- MV2GDR with pack/unpack stays below its Block by the two kernels (6.5 us at 8 KiB, 18 us
  at 512 KiB), as in the paper. Its dip at `N` = 32 is the GPUDirect-across-QPI regime above.
- TCA is ahead at every `N` measured (to 256). The model's MV2GDR ping-pong passes TCA's
  2.8 GB/s GPU-read bound at 1 MiB ([mpi](mpi.md#calibration): 2825 MB/s), a plane of
  `N` = 362, inside the paper's Block crossover (`N` = 320-384); larger planes were not
  simulated (minutes of simulation each).
"""


def _halo(rows):
    """``{(size, (Pi, Pj), network): row}`` of Figures 9-10's rows."""
    return {(r["size"], tuple(r["grid"]), r["network"]): r for r in rows
            if r["figure"] in ("9", "10")}


def _planes(rows):
    """``{(plane, N, network): row}`` of Figure 6's rows."""
    return {(r["plane"], r["n"], r["network"]): r for r in rows if r["figure"] == "6"}


def _grid(grid):
    return f"({grid[0]}, {grid[1]}, 1)"


def _times(t, size, grid):
    """TCA, MV2GDR and hybrid time (us) of one size and partition, or None if one is missing."""
    got = [t.get((size, grid, n)) for n in NETWORKS]
    return None if None in got else [r["time_us"] for r in got]


def compare(rows):
    """``[(figure, statement, model, holds)]``: 000's statements on Figures 9-10 and 6 against
    the rows, for those the rows reach (``holds`` None where they do not reach the sizes the
    statement is about)."""
    out = []
    t = _halo(rows)
    small = _times(t, "small", (2, 8))
    if small:
        tca, mpi, hyb = small
        out.append(("9", "(2, 8, 1): TCA 70% faster than MV2GDR (whole iteration)",
                    f"TCA {mpi / tca:.2f}x MV2GDR (exchange alone)", mpi > tca))
        out.append(("9", "(2, 8, 1): hybrid up to 40% faster than MV2GDR, slower than TCA",
                    f"hybrid {mpi / hyb:.2f}x MV2GDR, {hyb / tca:.2f}x TCA's time",
                    mpi > hyb > tca))
    middle = {g: _times(t, "middle", g) for g in sorted({k[1] for k in t if k[0] == "middle"})}
    middle = {g: v for g, v in middle.items() if v}
    if middle:
        slower = [_grid(g) for g, (tca, mpi, _) in middle.items() if tca >= mpi]
        out.append(("10", "TCA faster than MV2GDR",
                    ", ".join(f"{_grid(g)}: {mpi / tca:.2f}x" for g, (tca, mpi, _)
                              in middle.items()), not slower))
    if (2, 8) in middle:
        tca, mpi, hyb = middle[(2, 8)]
        out.append(("10", "(2, 8, 1): hybrid faster than MV2GDR",
                    f"hybrid {mpi / hyb:.2f}x MV2GDR", hyb < mpi))
    if (2, 4) in middle:
        tca, mpi, hyb = middle[(2, 4)]
        out.append(("10", "(2, 4, 1): hybrid faster than both MV2GDR and TCA",
                    f"hybrid {mpi / hyb:.2f}x MV2GDR, {tca / hyb:.2f}x TCA", hyb < min(tca, mpi)))
    shares = {g: t[("middle", g, "hybrid")]["block_stride_share"] for g in ((2, 8), (2, 4))
              if ("middle", g, "hybrid") in t}
    if shares:
        out.append(("10", "(2, 8, 1) and (2, 4, 1): block-stride 80-90% of the bytes",
                    ", ".join(f"{_grid(g)}: {s:.0%}" for g, s in shares.items()),
                    all(0.8 <= s <= 0.9 for s in shares.values())))
    out += _compare_planes(_planes(rows))
    return out


def _compare_planes(p):
    ns = sorted({k[1] for k in p})
    if not ns:
        return []
    out = []

    def mbs(plane, n, net):
        return p[(plane, n, net)]["mb_per_s"] if (plane, n, net) in p else None

    for plane, what in (("jk", "Block"), ("ik", "Block Stride: TCA")):
        lo, hi = CROSSOVERS[plane]
        pairs = [(n, mbs(plane, n, "tca"), mbs(plane, n, "mpi")) for n in ns]
        pairs = [x for x in pairs if None not in x]
        if not pairs:
            continue
        behind = [n for n, tca, mpi in pairs if tca <= mpi]
        reach = pairs[-1][0] >= lo
        model = (f"MV2GDR ahead from N = {behind[0]}" if behind else
                 f"TCA ahead at every N measured (to {pairs[-1][0]})")
        holds = (bool(behind) and lo <= behind[0] <= hi) if reach else (
            False if behind else None)
        against = "MV2GDR" if plane == "jk" else "MV2GDR with pack/unpack"
        out.append(("6", f"{what} ahead of {against} up to N = {lo}-{hi}", model, holds))
    same = [(n, mbs("ik", n, "tca") / mbs("jk", n, "tca")) for n in ns
            if mbs("ik", n, "tca") and mbs("jk", n, "tca")]
    if same:
        worst = min(same, key=lambda x: x[1])
        out.append(("6", "TCA's Block Stride about as fast as its Block up to N = 384",
                    f"Block Stride / Block at least {worst[1]:.2f} (N = {worst[0]})",
                    all(abs(r - 1) <= 0.1 for _, r in same)))
    below = [(n, mbs("ik", n, "mpi") / mbs("jk", n, "mpi")) for n in ns
             if mbs("ik", n, "mpi") and mbs("jk", n, "mpi")]
    if below:
        out.append(("6", "MV2GDR with pack/unpack below its Block",
                    "pack/unpack / Block " + ", ".join(f"{r:.2f}" for _, r in below) +
                    f" (N = {', '.join(str(n) for n, _ in below)})",
                    all(r < 1 for _, r in below)))
    return out


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_strong(rows, path):
    """000 Figures 9-10's comparison: per size a panel of bars, TCA / MV2GDR / hybrid time of
    one halo exchange per partition (8 and 16 nodes)."""
    plt = _pyplot()
    t = _halo(rows)
    sizes = [s for s in ("small", "middle") if any(k[0] == s for k in t)]
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        points = sorted({(t[k]["nodes"], k[1]) for k in t if k[0] == size})
        width = 0.8 / len(NETWORKS)
        for i, (net, name) in enumerate(NETWORKS.items()):
            xs = [j + (i - 1) * width for j in range(len(points))]
            ys = [t[(size, g, net)]["time_us"] if (size, g, net) in t else 0
                  for _, g in points]
            bars = ax.bar(xs, ys, width, label=name)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks(range(len(points)),
                      [f"{n} nodes\n{_grid(g)}" for n, g in points])
        ax.set_ylabel("one halo exchange (us)")
        dims = next(t[k]["dims"] for k in t if k[0] == size)
        figure = next(t[k]["figure"] for k in t if k[0] == size)
        ax.set_title(f"Himeno {size.capitalize()} ({'x'.join(map(str, dims))} floats), "
                     f"as 000 Figure {figure}", fontsize=9)
        top = max(r["time_us"] for k, r in t.items() if k[0] == size)
        ax.set_ylim(0, top * 1.25)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", ncols=3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def plot_planes(rows, path):
    """000 Figure 6's layout: bandwidth of one plane against the array side N for TCA Block,
    MV2GDR Block, TCA Block Stride and MV2GDR with pack/unpack; 000's crossovers shaded."""
    plt = _pyplot()
    p = _planes(rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    # Block solid with small filled markers, Block Stride dotted with large open ones: TCA's
    # two curves coincide and both stay visible.
    for (plane, net), name in CURVES.items():
        ns = sorted(n for (pl, n, nt) in p if (pl, nt) == (plane, net))
        block = plane == "jk"
        ax.plot(ns, [p[(plane, n, net)]["mb_per_s"] for n in ns],
                marker="o" if net == "tca" else "s", markersize=4 if block else 9,
                linestyle="-" if block else ":", linewidth=1.5 if block else 2, label=name,
                markerfacecolor=None if block else "none")
    for plane, colour in (("jk", "tab:blue"), ("ik", "tab:green")):
        lo, hi = CROSSOVERS[plane]
        ax.axvspan(lo, hi, color=colour, alpha=0.12,
                   label=f"000: MV2GDR catches up ({'Block' if plane == 'jk' else 'Block Stride'})")
    ax.set_xscale("log", base=2)
    ticks = sorted({n for _, n, _ in p} | {lo for lo, _ in CROSSOVERS.values()})
    ax.set_xticks(ticks, [str(n) for n in ticks])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("N (plane of an N^3 array of doubles: N x N x 8 bytes)")
    ax.set_ylabel("MB/s (one plane / exchange time)")
    ax.set_title("One plane between two neighbours, as 000 Figure 6", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def _refuse_old(saved):
    if not isinstance(saved, dict) or not isinstance(saved.get("rows"), list):
        raise ValueError(
            "docs/results/halo.json: not a dict with 'run' and 'rows' (a bare list of rows is "
            "halo_bench's format before the run stamp: peach2.sim.hybrid.halo_bench.saved_form "
            "reads it, and a run of python -m peach2.sim.hybrid.halo_bench saves it anew)")
    return saved["rows"]


def section(saved, img, draw=True, notes=NOTES):
    """The section's ``(title, body)`` from halo_bench's saved results; draws the plots under
    ``img`` when ``draw`` (True, or a list of file names to draw)."""
    rows = _refuse_old(saved)
    strong = [r for r in rows if r["figure"] in ("9", "10")]
    planes = [r for r in rows if r["figure"] == "6"]
    lines = [
        "",
        "Himeno's halo exchange on the co-simulated machine ([hybrid](hybrid.md#halo-exchange-"
        "himeno-sections-52-53-and-61)): the PEACH2 chips on Verilator, InfiniBand and "
        "MVAPICH2-GDR 2.0 as models ([mpi](mpi.md)), every node's array, halos and pack slots "
        "checked after every run; PEACH2 reads GPU0 at HA-PACS/TCA's 2.8 GB/s and MV2GDR is "
        "MV2GDR-QPI-Tuned on GPU0. **TCA**: every plane over PEACH2 (`jk` planes one burst, "
        "`ik` planes one block-stride descriptor, pairwise per dimension); **MV2GDR**: every "
        "plane over InfiniBand, `ik` planes packed and unpacked by a GPU kernel; **hybrid**: "
        "Block (`jk`, the `i` neighbours) over MPI at the same time as Block Stride (`ik`, the "
        "`j` neighbours) over TCA inside each grid row (000 section 5.2). 8 nodes are one 2x4 "
        "(the hybrid splits it in two groups, 000 Figure 11), 16 one 2x8.",
        "",
        "```",
        "python -m peach2.sim.hybrid.halo_bench              # 8 nodes (Figures 9-10), Figure 6",
        "python -m peach2.sim.hybrid.halo_bench --nodes 16   # 16 nodes: (2, 8, 1), (4, 4, 1)",
        "peach2 bench --doc-only --redraw halo              # redraw from the saved rows",
        "```",
        "",
        "Each run saves its rows in `docs/results/halo.json` in place of those of the same "
        "figures and node counts (`--out` elsewhere); `peach2 bench halo` runs both.",
    ]
    if strong:
        if draw is True or (draw and STRONG_PLOT in draw):
            plot_strong(strong, Path(img) / STRONG_PLOT)
        lines += ["", "### Halo per iteration: 8 and 16 nodes (000 Figures 9-10)", "",
                  f"![halo strong scaling](img/{STRONG_PLOT})", "",
                  "One halo exchange (the communication of one Himeno iteration) from the "
                  "common start to the last node's end; block-stride share: the bytes the "
                  "hybrid sends over TCA.", "", tables(strong).rstrip()]
    if planes:
        if draw is True or (draw and PLANES_PLOT in draw):
            plot_planes(planes, Path(img) / PLANES_PLOT)
        lines += ["", "### One plane, Block and Block Stride (000 Figure 6)", "",
                  f"![halo planes](img/{PLANES_PLOT})", "",
                  "One plane of an `N^3` array of doubles (`N x N x 8` bytes) exchanged "
                  "between two neighbours (a sub-cluster of two nodes), both directions at "
                  "once: the `jk` plane (Block) and the `ik` plane (Block Stride; MV2GDR packs "
                  "and unpacks it).", "", tables(planes)]
    checks = compare(rows)
    if checks:
        lines += ["", "### 000's statements against the model", "",
                  "| figure | 000 says | model | holds |", "| --- | --- | --- | --- |"]
        lines += [f"| {f} | {s} | {m} | "
                  f"{'yes' if h else 'no' if h is False else 'not reached'} |"
                  for f, s, m, h in checks]
    if notes:
        lines += ["", notes.strip()]
    return "Halo exchange: TCA, MV2GDR and hybrid (000 Figures 6, 9-10)", "\n".join(lines)
