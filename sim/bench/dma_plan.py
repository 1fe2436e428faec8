"""The points of the DMA benchmark (``tb/dma/dma_perf_tb.py``) and their split into parallel jobs.

A point is a dict naming its figure and what sets it apart (``where``, ``mode``, ``size``,
``count``, ``n``, ``plane``, ``shape``), in the order the saved results list them:

- ``start``: one 8-byte descriptor, local and to the neighbour: the start and the drain of a
  chain, almost no wire time (the lower bound of every chain, docs/dma.md);
- ``chain128``: Figures 4 and 7 of 002 section 4.1, chains of ``chain`` transfers of each size
  (shortened to move ``max_total`` bytes at most), local and to the neighbour, descriptors one
  after the other in host memory;
- ``scattered``: the same chains to the neighbour for the sizes of :data:`SCATTERED_SIZES`,
  every descriptor :data:`SCATTER_STRIDE` bytes from the last (no two adjacent): the engine
  fetches adjacent descriptors in blocks, scattered ones one host round trip each;
- ``single``: Figure 5, one transfer from a descriptor or from the register slots;
- ``chain4k``: Figure 6, 4 KiB transfers, chain length varied;
- ``halo``: the halo planes, block-stride against contiguous (000 section 4, 002 section 3.4).

Each point is measured from an idle system (the testbench waits for quiet links after every
point), so points are independent: :func:`split` groups them into jobs (one simulation each)
and :func:`merge` puts the jobs' results back in plan order, the same list a single sequential
simulation of the plan writes.
"""

__all__ = ["FIGURES", "BOUNDED", "FULL_CHAIN", "QUICK_CHAIN", "FULL_TOTAL", "QUICK_TOTAL",
           "SCATTERED_SIZES", "SCATTER_STRIDE", "sizes", "plan", "label", "weight", "split",
           "merge"]

FIGURES = ("chain128", "scattered", "single", "chain4k", "halo")
#: Figures whose points are bounded below by the ``start`` points (measured with them).
BOUNDED = ("chain128", "scattered", "chain4k")
FULL_CHAIN, QUICK_CHAIN = 128, 32            # transfers per chain, Figures 4 and 7
FULL_TOTAL, QUICK_TOTAL = 1 << 19, 1 << 17   # bytes per point at most, Figures 4 and 7
#: Sizes of the scattered-descriptor rows (short transfers, where fetching descriptors matters).
SCATTERED_SIZES = (8, 128, 512, 4096)
#: Bytes from one scattered descriptor to the next (a 32-byte descriptor, then 96 free bytes).
SCATTER_STRIDE = 128
CHAIN4K = (1, 2, 4, 8, 16, 32, 64, 128)
PLANES = ("jk", "ik", "ij")
SHAPES = ("block-stride", "contiguous")
_KEYS = ("where", "mode", "shape", "plane", "n", "size", "count")


def sizes(quick):
    """Transfer sizes of Figures 4, 5 and 7: 8 B to 128 KiB by 2x, or by 4x and 4 KiB."""
    if quick:       # 8 B to 128 KiB by 4x, and 4 KiB (where the DMA's goal starts)
        return sorted({8 << (2 * i) for i in range(8)} | {4096})
    return [8 << i for i in range(15)]


def plan(quick=False, chain=None, max_total=None, figures=None, only_sizes=None, chains=None,
         halo_n=None):
    """Return the points of a run, in the order of the saved results.

    ``figures`` (names of :data:`FIGURES`), ``only_sizes`` (Figures 4, 5, 7 and the scattered
    rows), ``chains`` (Figure 6) and ``halo_n`` pick a subset; None keeps everything."""
    chain = chain or (QUICK_CHAIN if quick else FULL_CHAIN)
    max_total = max_total or (QUICK_TOTAL if quick else FULL_TOTAL)
    wanted = set(figures or FIGURES)
    fig_sizes = [s for s in sizes(quick) if not only_sizes or s in only_sizes]
    out = []
    if wanted & set(BOUNDED):
        out += [{"figure": "start", "where": where, "size": 8, "count": 1}
                for where in ("local", "neighbour")]
    if "chain128" in wanted:
        for size in fig_sizes:
            n = max(1, min(chain, max_total // size))
            out += [{"figure": "chain128", "where": where, "size": size, "count": n}
                    for where in ("local", "neighbour")]
    if "scattered" in wanted:
        out += [{"figure": "scattered", "where": "neighbour", "size": size,
                 "count": max(1, min(chain, max_total // size))}
                for size in fig_sizes if size in SCATTERED_SIZES]
    if "single" in wanted:
        out += [{"figure": "single", "mode": mode, "size": size}
                for size in fig_sizes for mode in ("descriptor", "register")]
    if "chain4k" in wanted:
        out += [{"figure": "chain4k", "count": n, "size": 4096} for n in chains or CHAIN4K]
    if "halo" in wanted:
        out += [{"figure": "halo", "n": n, "plane": plane, "shape": shape}
                for n in halo_n or ((16, 64) if quick else (16, 32, 64))
                for plane in PLANES for shape in SHAPES]
    return out


def label(point):
    """``chain128 where=local size=8 count=128``: a point's figure and keys, for progress lines."""
    return " ".join([point["figure"]] + [f"{k}={point[k]}" for k in _KEYS if k in point])


def weight(point):
    """A rough cost of simulating ``point`` alone, in CPU seconds of Verilator on this project's
    2-core machine (Icarus: 10 to 30 times more): 3 s to start a simulation and set the chips
    up, plus the descriptors and the KiB it moves (128 x 8 B: 3-4 s more, 128 x 4 KiB: 8-11 s
    more) and a halo plane's bursts; for ordering the simulations and estimating the time
    left (measured at 855043f's design, the old engine)."""
    fig = point["figure"]
    if fig in ("chain128", "scattered", "chain4k", "start"):
        return 3 + 0.02 * point["count"] + 0.015 * point["count"] * point["size"] / 1024
    if fig == "single":
        return 3 + 0.015 * point["size"] / 1024
    n = point["n"]              # a halo plane moves n^2 doubles, block-stride in bursts of
    bursts = {"jk": 1, "ik": n, "ij": n * n}[point["plane"]]     # n^2, n or 1 doubles
    if point["shape"] == "contiguous":
        bursts = 1
    return 3 + 0.015 * 8 * n * n / 1024 + 0.0025 * bursts    # 64^2 bursts of 8 B: 10 s more


def split(points, jobs):
    """Group ``points`` into at most ``jobs`` lists of plan indices of similar total weight
    (heaviest first onto the lightest job), each list in plan order; empty jobs are dropped."""
    groups = [[] for _ in range(max(1, jobs))]
    loads = [0.0] * len(groups)
    for i in sorted(range(len(points)), key=lambda i: (-weight(points[i]), i)):
        k = loads.index(min(loads))
        groups[k].append(i)
        loads[k] += weight(points[i])
    return [sorted(g) for g in groups if g]


def merge(points, groups, results):
    """Put the results of the jobs (``results[k]`` measured ``groups[k]``, in order) back in
    plan order; checks that every result is the point it claims to be."""
    out = [None] * len(points)
    for group, measured in zip(groups, results):
        if len(group) != len(measured):
            raise ValueError(f"a job measured {len(measured)} points of {len(group)}")
        for i, r in zip(group, measured):
            want = points[i]
            if any(r.get(k) != v for k, v in want.items()):
                raise ValueError(f"result {label(r)} is not point {i} ({label(want)})")
            out[i] = r
    missing = [label(points[i]) for i, r in enumerate(out) if r is None]
    if missing:
        raise ValueError(f"no result for {', '.join(missing)}")
    return out
