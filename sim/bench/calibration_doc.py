"""The ``calibration`` section of ``docs/benchmarks.md``: the calibration table and 000 Figure 4.

The measurement is split by model:

- the PEACH2 rows and the TCA curve come from one cocotb simulation of two neighbour chips on
  Verilator (``tb/calibration/bench_calibration.py`` and ``pingpong_tb.py``, run by ``peach2
  bench calibration`` in a child process, since they import their test folder's modules);
- the MPI rows and curves come from the node / InfiniBand / MPI model,
  :mod:`peach2.sim.mpi.pingpong` (:func:`~peach2.sim.mpi.pingpong.calibrate`,
  :func:`~peach2.sim.mpi.pingpong.table`, :func:`~peach2.sim.mpi.pingpong.checks`), called by
  :func:`mpi_side`.

Every figure is half a round trip of a ping-pong of GPU (or host) memory between two
neighbour nodes.  This module holds the constants both sides share, :func:`crossover`, the
table's rows (:func:`table_rows`), the plot (:func:`plot`) and the section's text
(:func:`section`).
"""

from peach2.sim.mpi.pingpong import CURVES, SIZES
from peach2.sim.node import NodeParams
from peach2.sim.pcie import GPU_READ_BANDWIDTH, PIO_NEIGHBOUR_NS

__all__ = ["TOPOLOGY", "GPU_READS", "TCA_MAX", "QUICK_SIZES", "tca_sizes", "PLOT", "TARGETS",
           "sizes", "quick_shortened", "PUT_GOAL_NS", "PUT_RATE_GOAL", "GPU_PUT_GOAL_NS",
           "PATH_SIZES", "best_paths", "auto_path",
           "mpi_side", "crossover", "table_rows", "plot", "section"]

TOPOLOGY = "line:2"
#: GPU read rates of the TCA curves, ``(name, bytes per second)``; the first is the machine's
#: (HA-PACS/TCA's Ivy Bridge nodes, the rate :class:`~peach2.sim.node.NodeParams` gives the MPI
#: side's GPUDirect reads too), the second 002's Sandy Bridge test system (the GPU model's
#: default).
GPU_READS = [("HA-PACS/TCA", NodeParams().gpu_read_bytes_per_s), ("002", GPU_READ_BANDWIDTH)]
#: The largest TCA size of each curve in the full run: the two-chip simulation advances a few
#: hundred to a few thousand cycles per second (a 1 MiB round trip is 0.8 ms, minutes of wall
#: time on a loaded machine), so the TCA curve stops at 1 MiB, past 000's crossover (512 KB),
#: and the 002 curve, whose crossover is far below, at 64 KiB; the MPI curves go to 4 MiB.
TCA_MAX = {"HA-PACS/TCA": 1 << 20, "002": 64 << 10}
#: --quick: these sizes (the MPI curves' too) instead of 8 B .. 4 MiB by 2x.
QUICK_SIZES = [8, 512, 4096, 32 << 10, 256 << 10, 512 << 10, 1 << 20]
#: The plot, a file name under the document's image folder.
PLOT = "calibration_fig4.png"
SOURCE = "HA-PACS/TCA, GTC 2014"
#: PEACH2 rows: (key in the simulation's data, what, target us).
TARGETS = (
    ("dma_host", "PEACH2 DMA, CPU memory to remote CPU memory, 8 B", 1.8),
    ("dma_gpu", "PEACH2 DMA, GPU memory to remote GPU memory, 8 B", 2.3),
    ("pio", "PEACH2 PIO store, CPU to remote CPU memory, 8 B", 0.8),
)
TOLERANCE = 0.15


def sizes(quick):
    """The MPI curves' sizes."""
    return QUICK_SIZES if quick else SIZES


def tca_sizes(quick):
    """``[(name, bytes per second, sizes)]``: each TCA curve's GPU read rate and sizes."""
    return [(name, rate, [n for n in sizes(quick) if n <= TCA_MAX[name]])
            for name, rate in GPU_READS]


def quick_shortened():
    """What ``--quick`` leaves out."""
    return [f"{len(QUICK_SIZES)} ping-pong sizes (8 B, 512 B, 4 KiB, 32 KiB, 256 KiB, 512 KiB, "
            f"1 MiB) instead of {len(SIZES)} (8 B to 4 MiB by 2x; TCA curves up to 1 MiB and "
            "64 KiB)"]


def mpi_side(point_sizes):
    """The MPI rows, checks and curves of :mod:`peach2.sim.mpi.pingpong` for ``point_sizes``."""
    from peach2.sim.mpi.pingpong import calibrate, checks, table

    curves = table(point_sizes, CURVES)
    return {"calibration": calibrate(), "checks": checks(curves), "curves": curves}


def _size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def tca_curve(saved, name=None):
    """``{size: MB/s}`` of the TCA curve ``name`` (default: the first, the machine's)."""
    curves = saved["tca"]["curves"]
    name = name or next(iter(curves))
    return {r["size"]: r["mb_s"] for r in curves[name]}


def crossover(tca, mpi):
    """Where ``mpi`` (``{size: MB/s}``) catches up with ``tca``: ``(last, first)``, the largest
    size up to which TCA is ahead at every size from the smallest, and the first size where it
    is not (None when TCA stays ahead, or is never ahead)."""
    common = sorted(set(tca) & set(mpi))
    last = None
    for n in common:
        if tca[n] <= mpi[n]:
            return last, n
        last = n
    return last, None


def table_rows(saved):
    """The five rows: ``{what, model_us, target_us, error, source, fitted}``."""
    rows = []
    for r in saved["mpi"]["calibration"]:
        rows.append({"what": r["what"], "model_us": r["model_us"], "target_us": r["target_us"],
                     "error": r["model_us"] / r["target_us"] - 1, "source": r["source"],
                     "fitted": f"`{r['fitted']}` = {r['default_ps'] / 1e6:.2f} us (fitted to "
                               f"this row; refit gives {r['refit_ps'] / 1e6:.2f} us)"})
    tca = saved["tca"]
    pipeline = (f"none for this row (the hard IPs' {tca['pipeline_ns']:.0f} ns per crossing "
                f"was fitted once to 002's {PIO_NEIGHBOUR_NS:.0f} ns PIO store)")
    fitted = {
        "dma_host": pipeline + f"; host memory answers reads after "
                               f"{tca['host_read_latency_ns']:.0f} ns",
        "dma_gpu": pipeline + f"; the GPU model's read path: {tca['gpu_read_latency_ns']:.0f} "
                              "ns (its default, assumed)",
        "pio": f"`HARDIP_PIPELINE_NS` = {tca['pipeline_ns']:.0f} ns, fitted to 002's "
               f"{PIO_NEIGHBOUR_NS:.0f} ns one-way store, not to this row",
    }
    for key, what, target in TARGETS:
        model = tca[key]["one_way_ns"] / 1000
        rows.append({"what": what, "model_us": round(model, 3), "target_us": target,
                     "error": model / target - 1, "source": SOURCE, "fitted": fitted[key]})
    return rows


def plot(saved, path):
    """000 Figure 4 from the saved data: MB/s against bytes, log-log, every curve."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .results import save_plot

    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    for i, (name, rows) in enumerate(saved["tca"]["curves"].items()):
        label = "TCA GPU0-GPU0" if i == 0 else f"TCA GPU0-GPU0, {name}'s GPU read"
        ax.plot([r["size"] for r in rows], [r["mb_s"] for r in rows], marker="o",
                markersize=3, color="black", linestyle="-" if i == 0 else ":", label=label)
    for name, marker in zip(CURVES, ("s", "^", "v")):
        rows = saved["mpi"]["curves"][name]
        where = "GPU2-GPU2" if name == "MV2GDR" else "GPU0-GPU0"
        ax.plot([r["size"] for r in rows], [r["mb_s"] for r in rows], marker=marker,
                markersize=3, label=f"{name} {where}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.axvline(512 << 10, color="grey", linewidth=0.8, linestyle="--")
    ax.text(512 << 10, 0.03, "000: TCA ahead\nup to 512 KB ", fontsize=7, color="grey",
            ha="right", transform=ax.get_xaxis_transform())
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("ping-pong bandwidth (MB/s)")
    ax.set_title("Ping-pong between neighbour nodes' GPUs (000 Figure 4), model")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_plot(fig, path, 100)
    plt.close(fig)


def _statements(saved):
    """Rows ``(statement, model, holds)`` of 000 section 4 against the model."""
    tca = tca_curve(saved)
    mv2 = {r["size"]: r["mb_s"] for r in saved["mpi"]["curves"]["MV2GDR"]}
    last, first = crossover(tca, mv2)
    paper = 512 << 10
    def at(n):
        return f" ({tca[n]:.0f} against {mv2[n]:.0f} MB/s)"
    if first is None:
        model = f"TCA ahead at every size measured (up to {_size(last)}{at(last)})"
    else:
        model = ((f"TCA ahead up to {_size(last)}{at(last)}" if last else "TCA never ahead")
                 + f", MV2GDR ahead from {_size(first)}{at(first)}")
    # where the paper puts it: TCA ahead at 512 KB, MV2GDR ahead at the next size measured
    holds = last == paper if first else None
    out = [("TCA ahead of MV2GDR up to 512 KB", model, holds)]
    for r in saved["mpi"]["checks"]:
        if r["source"].startswith("000"):
            out.append((f"{r['what']}: {r['expected']}", r["model"], r["ok"]))
    return out, (last, first)


#: Goals of the inline puts on this pair of chips (sub-microsecond puts): kick to flag, and
#: puts appended per microsecond; and of the 8-byte put a GPU kernel starts, its store to the
#: flag seen by the receiving GPU.
PUT_GOAL_NS, PUT_RATE_GOAL, GPU_PUT_GOAL_NS = 900, 20, 1500


def _put_lines(tca):
    """The inline puts' figures ([put](put.md)) of the same simulation, if it measured them."""
    put, stream = tca.get("put"), tca.get("put_stream")
    if not put or not stream:
        return []
    kick = put["kick_to_flag_ns"]
    rate = stream["per_us"]
    one = tca.get("put_stream_one_flag")
    lines = [
        "",
        "### Inline puts",
        "",
        "The same two chips, an 8-byte inline put ([put](put.md)): 64 bytes written into BAR 4 "
        "carrying the data, sent as a memory write and a completion write into the receiver's "
        "host flag, with no host read. From host 0's store (the kick) to host 1 seeing its flag: "
        f"**{kick:.0f} ns** (goal <= {PUT_GOAL_NS} ns: "
        f"{'met' if kick <= PUT_GOAL_NS else 'NOT met'}; Tofu's lowest level 0.91 us for 4 "
        "bytes, 004 section 6.1); half a round trip of a put ping-pong "
        f"{put['one_way_ns']:.0f} ns, against the DMA's {tca['dma_host']['one_way_ns']:.0f} ns "
        f"(two host reads first) and PIO's {tca['pio']['one_way_ns']:.0f} ns (one store, no "
        f"flag). {stream['count']} puts issued back to back, each with its completion write, "
        f"land at **{rate:.1f} per us** (first flag to last; goal >= {PUT_RATE_GOAL}: "
        f"{'met' if rate >= PUT_RATE_GOAL else 'NOT met'}).",
    ]
    if one:
        lines += [
            "",
            f"With a completion write on the last put only, the same {one['count']} puts land "
            f"at {one['per_us']:.1f} per us, N's wire bound (45.5 per us: a 64-byte write with a "
            "4-DW header is 88 wire bytes; the put engine takes 6 cycles a put, 41.7 per us "
            "with both writes, more alone). A flag on every put makes two TLPs a put, and the "
            "rate halves: it is then paced by the number of TLPs (about 49 per us), not by bytes "
            "(60 wire bytes a put on E), which fits the links' posted header credits (64, the "
            "hard IP's default) over their calibrated credit round trip (not measured apart).",
        ]
    return lines + _queue_lines(tca)


def _queue_lines(tca):
    """The DMA queue's appends ([dma](dma.md), "Queue mode"), if the run measured them."""
    rows = tca.get("queue_stream")
    if not rows:
        return []
    one = next((r for r in rows if r["batch"] == 1), rows[0])
    others = ", ".join(f"{r['per_us']:.1f} per us with {r['batch']} a doorbell"
                       for r in rows if r is not one)
    read = one["status_read_ns"]
    return [
        "",
        f"A DMA queue instead ([dma](dma.md), \"Queue mode\"): {one['count']} 8-byte "
        "descriptors appended to a running register-mode queue of host 0's chip, each with "
        f"its completion write into host 1's flag, land at **{one['per_us']:.1f} per us** "
        f"with a doorbell each ({others}). Each descriptor is 9 write TLPs into its slot and "
        "the doorbell one more, which the register block takes in four cycles each (five for "
        "the three of two DWs): 172 ns a descriptor, 5.8 per us at most; and the driver "
        f"learns of a free slot only by reading `CH_STATUS` ({read:.0f} ns a read here) once "
        "four are held. The DMA reads each "
        "descriptor's 8 bytes from host memory as well: for data this small the inline puts "
        "are the path, and a queue is for data already in host or GPU memory.",
    ]


def _gpu_put_lines(tca):
    """The GPU kernel's put ([put](put.md), "Puts from a GPU kernel"), if it was measured."""
    put = tca.get("gpu_put")
    if not put:
        return []
    direct, gmpi = put["direct"]["one_way_ns"], put["gmpi"]["one_way_ns"]
    timed = len(put["direct"]["times_ns"]) - 1
    return [
        "",
        "### Puts from a GPU kernel",
        "",
        "The same two chips, a GPU model on each; `tb/put/gpu_put_tb.py` on the same build. GPU "
        "0's kernel stores an 8-byte inline put into its chip's BAR 4 peer to peer through the "
        "root complex (no host CPU involved), with a completion write into a flag in GPU 1's "
        "memory, which GPU 1's kernel polls. From the kernel's store to GPU 1 seeing its flag "
        f"(median of {timed} after a warm-up): **{direct:.0f} ns** (goal <= {GPU_PUT_GOAL_NS} "
        f"ns: {'met' if direct <= GPU_PUT_GOAL_NS else 'NOT met'}; HA-PACS/TCA's DMA GPU to GPU "
        f"2.3 us, the row above: {tca['dma_gpu']['one_way_ns']:.0f} ns). The same put through "
        f"GMPI's host daemon (001: the kernel writes a request into a ring, a host daemon polls "
        f"it and starts the transfer, about 10 us a call, section 5.1): {gmpi:.0f} ns. Every "
        "byte of both GPUs and hosts checked after each put; a malformed descriptor from the "
        f"kernel refused and counted ({put['refused']}), the next put sent.",
    ]


#: Sizes of the paths-by-size table (one step host to neighbour host, kick to flag).
PATH_SIZES = [8, 32, 128, 512, 1024, 1536, 2048, 3072, 4096]


def best_paths(rows):
    """``{size: (fastest path, its ns, {path: ns})}`` of the paths-by-size rows."""
    by = {}
    for r in rows:
        by.setdefault(r["size"], {})[r["path"]] = r["ns"]
    return {n: (min(t, key=t.get), min(t.values()), t) for n, t in sorted(by.items())}


class _HostMemory:
    """Just what ``step_path`` asks of a node's memories: its host memory of ``size`` bytes."""

    def __init__(self, size):
        self.size = size

    def region(self, node, window):
        return 0, range(self.size)


def auto_path(size):
    """The path ``run(paths="auto")`` picks today for one step of ``size`` bytes from the node's
    host memory to an aligned destination (as the paths-by-size rows send)."""
    from peach2.sim.collectives.paths import step_path
    from peach2.sim.collectives.plan import Step
    from peach2.sim.driver import memcpy
    return step_path(_HostMemory(size), 0, Step(0, [memcpy(0, 0, size)]))


def _path_lines(tca):
    """The paths-by-size table, if the simulation measured it."""
    rows = tca.get("paths")
    if not rows:
        return []
    names = ("pio", "inline", "register", "dma")
    lines = ["", "### Paths by size", "",
             "One step of a collective from host 0's memory into host 1's, with its completion "
             "write into host 1's flag, from the kick to host 1 seeing the flag (ns), by each "
             "path of `peach2.sim.collectives.paths` that can take it: PIO, the CPU's stores "
             "(one 8-byte store and the flag's; the model charges a CPU nothing for a store, so "
             "only one store is offered), inline puts of up to 32 bytes ([put](put.md)), register "
             "mode (the slots set before the kick, 002 section 3.4) and the chained DMA (the "
             "chain written before the kick). 002 section 4.2 asks for exactly this choice: "
             "\"a few bytes by PIO, under a few KB by register-mode DMA\"; `run(paths=\"auto\")` "
             "makes it, and \"auto\" marks its pick.", "",
             "| size | " + " | ".join(names) + " | auto | fastest |",
             "| ---: | " + " | ".join("---:" for _ in names) + " | --- | --- |"]
    for size, (best, ns, times) in best_paths(rows).items():
        pick = auto_path(size)
        cells = [f"{times[p]:.0f}" if p in times else "-" for p in names]
        lost = times[pick] / ns - 1 if pick in times else None
        lines.append(f"| {_size(size)} | " + " | ".join(cells) + f" | {pick}"
                     + (f" (+{lost:.0%})" if lost else "") + f" | {best} |")
    return lines


def section(saved, img, draw=True):
    """The section's ``(title, body)``; draws the plot under ``img`` when ``draw``."""
    if draw is True or (draw and PLOT in draw):
        plot(saved, img / PLOT)
    tca = saved["tca"]
    rows = table_rows(saved)
    lines = [
        "",
        "8-byte latency through the whole model against the HA-PACS/TCA figures the TCA team "
        "presented at GTC 2014: every figure is **half a round trip of a ping-pong** between two "
        "neighbour nodes (node 0 sends, node 1 waits until the message is there and sends it "
        "back; one warm-up round trip first). MPI rows: `python -m peach2.sim.mpi.pingpong`'s "
        "node, InfiniBand and MPI model (MVAPICH2-GDR; [mpi](mpi.md)). PEACH2 rows: two chips "
        f"of the HDL sub-cluster `{tca['topology']}` on Verilator (default cable credits, "
        f"calibrated hard-IP pipeline of {tca['pipeline_ns']:.0f} ns per crossing), a host and "
        "a GPU model per node. DMA: one descriptor prepared beforehand and started by a register "
        "write, ending in a completion write into a flag of the receiver's host memory, which "
        "its CPU polls; the receiver then starts its own DMA back. PIO: an 8-byte store into the "
        "other host's memory, which that host polls and answers by a store back. Every byte "
        "received is checked, and both nodes' whole host windows and GPU memories after each "
        "size.",
        "",
        "| path | model (us) | target (us) | error | source | fitted |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['what']} | {r['model_us']:.2f} | {r['target_us']:.1f} | "
                     f"{r['error']:+.1%} | {r['source']} | {r['fitted']} |")
    worst = max(abs(r["error"]) for r in rows)
    lines += ["", f"Every row within {worst:.1%} of its target "
                  f"({'within' if worst <= TOLERANCE else 'NOT within'} the 15% asked). "
              "Nothing was fitted to the three PEACH2 rows; what they rest on: the hard IPs' "
              "crossing time, fitted to 002's one-way PIO store, which holds the CPU's store and "
              "polling too, so the PIO ping-pong's half round trip lands on it; host memory "
              f"answering the chip's reads {tca['host_read_latency_ns']:.0f} ns after they "
              "arrive (the sub-cluster's default: a read already pays two fitted crossings, "
              "which stand for the memory path as well); the 8-byte DMA reads host memory "
              "twice, its descriptor and then its data (the GPU row: the descriptor, then "
              "the GPU), so an extra host read latency L would add about 2L to the CPU row and L "
              "to the GPU row; the GPU row's extra half microsecond is the GPU model's read "
              f"latency ({tca['gpu_read_latency_ns']:.0f} ns, assumed: no paper gives it)."]
    lines += _put_lines(tca)
    lines += _gpu_put_lines(tca)
    lines += _path_lines(tca)
    statements, (last, first) = _statements(saved)
    names = list(tca["curves"])
    lines += [
        "",
        "### Ping-pong bandwidth, 000 Figure 4",
        "",
        f"![000 Figure 4, model](img/{PLOT})",
        "",
        "GPU-to-GPU ping-pong bandwidth (size / one-way time) between neighbour nodes: TCA "
        "GPU0-GPU0 through the chips' DMA (the GPU model's read path is the source's ceiling), "
        "MV2GDR GPU2-GPU2 (GPUs on the HCA's socket), MV2GDR-QPI GPU0-GPU0 (across QPI) and "
        "MV2GDR-QPI-Tuned (GPUDirect up to 8 KB only). The TCA curve reads the GPU at "
        f"{GPU_READS[0][1] / 1e9:.1f} GB/s, the rate the node model gives HA-PACS/TCA's Ivy "
        "Bridge nodes for every device reading a GPU on its own socket (`NodeParams."
        "gpu_read_bytes_per_s`, PEACH2 GPU-to-GPU at GTC 2015, the same rate the MPI curves' "
        "GPUDirect reads use); "
        + (f"the dotted curve is the same run at 002's {GPU_READS[1][1] / 1e6:.0f} MB/s "
           "(Sandy Bridge, the GPU model's default). " if len(names) > 1 else "")
        + "Neither rate is fitted to the figure. The TCA curves stop at "
        + " and ".join(f"{_size(max(r['size'] for r in tca['curves'][n]))} ({n} GPU read)"
                       for n in names)
        + " (the simulation of two chips runs at a few hundred to a few thousand cycles a "
        "second: a 1 MiB round trip is 0.8 ms of simulated time), the MPI curves, a fluid model, "
        "at 4 MiB.",
        "",
        "| 000 section 4 | model | holds |",
        "| --- | --- | --- |",
    ]
    for what, model, ok in statements:
        lines.append(f"| {what} | {model} | "
                     f"{'yes' if ok else ('n/a' if ok is None else 'no')} |")
    if len(names) > 1:
        slow_last, slow_first = crossover(tca_curve(saved, names[1]),
                                          {r["size"]: r["mb_s"]
                                           for r in saved["mpi"]["curves"]["MV2GDR"]})
        lines += ["", f"With 002's {GPU_READS[1][1] / 1e6:.0f} MB/s GPU read path instead, TCA "
                      f"would be ahead of MV2GDR only up to {_size(slow_last) if slow_last else '-'}"
                      f" (MV2GDR ahead from {_size(slow_first) if slow_first else '-'}): the "
                      "paper's crossover needs the faster GPU reads of HA-PACS/TCA's Ivy Bridge "
                      "nodes."]
    header = "| size | " + " | ".join(
        ["TCA"] + [f"TCA ({n} GPU read)" for n in names[1:]] + list(CURVES)) + " |"
    lines += ["", "MB/s (one-way size / time):", "", header,
              "| ---: |" + " ---: |" * (len(names) + len(CURVES))]
    tca_rows = {n: {r["size"]: r for r in tca["curves"][n]} for n in names}
    mpi_rows = {c: {r["size"]: r for r in saved["mpi"]["curves"][c]} for c in CURVES}
    for n in sorted(set().union(*tca_rows.values(), *mpi_rows.values())):
        cells = [f"{tca_rows[name][n]['mb_s']:.1f}" if n in tca_rows[name] else "" for name in
                 names]
        cells += [f"{mpi_rows[c][n]['mb_s']:.1f}" if n in mpi_rows[c] else "" for c in CURVES]
        lines.append(f"| {_size(n)} | " + " | ".join(cells) + " |")
    return "Calibration: latency table and 000 Figure 4", "\n".join(lines)
