"""``docs/benchmarks.md``, rebuilt from every section's saved results (``docs/results/*.json``).

:func:`rebuild` writes the head note, then each section of
:data:`peach2.sim.bench.results.SECTIONS` between ``<!-- <section>:begin -->`` and
``<!-- <section>:end -->`` markers: rendered from its saved results when there are some, else
the section's text as it stands in the document (so a section whose figures predate the saved
files, or that was never measured here, is never deleted), else a line saying how to measure
it.  Every rendered section starts with its run's stamp (command, commit, date, seconds, machine
load, what ``--quick`` shortened) and, when the gateware or a model behind its figures changed
since that run, a line saying so (:mod:`peach2.sim.bench.staleness`).  The DMA and sub-cluster sections are rendered by
:mod:`peach2.sim.bench.dma_doc` and :mod:`peach2.sim.bench.cluster_doc`.

Plots (``docs/img/``, :data:`IMAGES`) are redrawn only for the sections a run measured (and
any plot that is missing): re-rendering another section's text never rewrites its images, so a
run of one section changes no other section's files.  Plots are saved without metadata
(:func:`~peach2.sim.bench.results.save_plot`), so the same figures give the same bytes.
"""

import json
import sys
from pathlib import Path

from peach2.sim.hybrid import figures as hybrid_figures
from peach2.sim.hybrid.figures import halo as halo_figures
from peach2.sim.hybrid.figures import tuning as tuning_figures

from . import calibration_doc, collectives_doc, dma_doc, gpu_doc
from .cluster_doc import section as cluster_section
from .machine import doc as machine_doc
from .results import RESULTS, ROOT, SECTIONS, load, save_plot, stamp
from .staleness import mark

__all__ = ["DOC", "IMG", "PLOT", "IMAGES", "rebuild", "stamp", "plot_adapters"]

DOC = ROOT / "docs" / "benchmarks.md"
#: Where the plots go (read when a section is drawn, so a test can point it elsewhere).
IMG = ROOT / "docs" / "img"
#: The adapters section's plot, a file name under :data:`IMG`.
PLOT = "loopback_throughput.png"
#: Every section's plots, file names under :data:`IMG`.
IMAGES = {"adapters": [PLOT], "dma": list(dma_doc.PLOTS.values()),
          "collectives": [collectives_doc.PLOT], "calibration": [calibration_doc.PLOT],
          "machine": [machine_doc.PLOT], "hybrid": list(hybrid_figures.PLOTS),
          "halo": list(halo_figures.PLOTS),
          "tuning": [tuning_figures.plot_name({"collective": c, "nodes": n, "groups": g})
                     for c, n, g in tuning_figures.PLOT_MACHINES]}

HEAD = """# Benchmarks

Each section below is written from its saved results, `docs/results/<section>.json` (committed:
the figures, and the command, commit, date, seconds, machine load and anything `--quick`
shortened of the run that measured them). `peach2 bench [SECTION ...] [--quick]` (sections
adapters, router, dma, cluster, gpu, collectives, calibration, machine, hybrid, halo, tuning;
the same as `python tb/bench/benchmarks.py`, which runs `tb/cluster/bench_cluster.py`,
`tb/cluster/bench_gpu.py`, `tb/collectives/bench_collectives.py`,
`tb/calibration/bench_calibration.py`, `python -m peach2.sim.bench.machine.speed` and
`python -m peach2.sim.hybrid.halo_bench` and `python -m peach2.sim.hybrid.sweep --tune` for
theirs) measures only the sections it names, saves
their files and rebuilds this document from all saved files; `peach2 bench --doc-only` only
rebuilds it, drawing only missing plots (`--redraw SECTION,...`: those sections' plots too;
[bench](sim/bench.md)). A section without a saved file keeps its text as committed
and names its own run. A run's stamp gives the command as it was run then.
Started under `mpiexec`, a run sends its independent points (the DMA figures' simulations, the
collectives' simulations, the adapters' and the router's runs) to MPI's worker ranks and saves
the same results from rank 0: `mpiexec -n 5 python tb/bench/benchmarks.py dma` runs four
simulations at a time, on one machine or, with a hostfile, on a cluster's nodes
([bench](sim/bench.md#on-mpi-ranks)).
Every figure is simulated time of the real design (Icarus Verilog unless the section says
otherwise), with the link timed by cocotbext-pcie's wire model at Gen2 x8 (4 GB/s raw; each TLP
costs header + payload + 8 bytes of framing). The bound is that wire-format bound for exactly the
TLPs measured. Paper numbers ("002 section 4.1") are those of [papers](papers.md).
"""


def plot_adapters(points, path=None):
    """Plot the loopback throughput of the adapters' points against the wire bound (default
    path: :data:`PLOT` under :data:`IMG`)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = path or IMG / PLOT
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for hdr, marker in ((4, "o"), (3, "s")):
        pts = sorted((r for r in points if r["header_dw"] == hdr), key=lambda r: r["payload"])
        xs = [r["payload"] for r in pts]
        ax.plot(xs, [r["gbps"] for r in pts], marker=marker, label=f"measured, {hdr}-DW header")
        ax.plot(xs, [r["bound_gbps"] for r in pts], linestyle=":", color="black", zorder=3,
                label=f"wire bound, {hdr}-DW header")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("MWr payload (bytes)")
    ax.set_ylabel("GB/s")
    ax.set_title("RX -> TX loopback into host memory, Gen2 x8")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_plot(fig, path, 100)
    plt.close(fig)


def adapters_section(saved, draw=True):
    """The adapters section; ``draw``: True, False or the file names of the plots to draw."""
    rows = "\n".join(
        f"| {r['payload']} | {r['header_dw']} | {r['tlps']} | {r['gbps']:.3f} | "
        f"{r['bound_gbps']:.3f} | {100 * r['fraction']:.1f}% |"
        for r in sorted(saved["points"], key=lambda r: (-r["header_dw"], r["payload"])))
    if draw is True or (draw and PLOT in draw):
        plot_adapters(saved["points"])
    return "Hard-IP adapters: loopback write stream", f"""
Memory writes are injected at the receive side of the Stratix IV hard-IP model, cross
`AvalonST128RX`, the internal TLP stream and `AvalonST128TX`, leave over the timed link and land
in the host's memory (checked byte for byte). Throughput is payload bytes over the time from the
first TLP's start to the last TLP's end on the link. The regression asserts >= 99% of the bound
for 256-byte writes (`tb/tlp/test_adapters.py::test_host_write_stream_throughput`).

| payload (B) | header (DW) | TLPs | GB/s | bound GB/s | of bound |
| ---: | ---: | ---: | ---: | ---: | ---: |
{rows}

![loopback throughput](img/{PLOT})

The 4-DW, 256-byte row is the papers' 3.66 GB/s bound (002 section 4.1:
4 GB/s x 256 / (256 + 16 + 2 + 4 + 1 + 1)). Writes with address bit 2 set and a 4-DW header
take 18 Avalon beats for 256 bytes (72 ns) against 70 ns of wire time, so for that one alignment
the hard IP's interface, not the link, would set the pace; the benchmark uses aligned buffers as
DMA does."""


def router_section(saved, draw=True):
    latency, busy, pio = saved["latency"], saved["all_ports_busy"], saved["pio"]
    lat_rows = "\n".join(f"| {r['from']} -> {r['to']} | {r['bytes']} | {r['cycles']} | "
                         f"{4 * r['cycles']} |" for r in latency)
    worst = max(r["cycles"] for r in latency)
    verdict = (f"Met: {worst} cycles at most." if worst <= 8 else
               f"Not met: up to {worst} cycles.")
    busy_rows = "\n".join(f"| {r['name']} | {r['tlps']} | {r['gbps']:.3f} | "
                          f"{r['bound_gbps']:.3f} | {100 * r['fraction']:.1f}% |" for r in busy)
    return "Router: latency through one chip", f"""
Cycles at 250 MHz from the start of packet on the receiving port's `rx_st` to the start of
packet on the sending port's `tx_st`, idle chip, default build (`peach2 generate` defaults: TX
cut-through from 1 beat for TLPs of three or more Avalon beats). Goal: 8 cycles or fewer (the
papers' 0.3-0.4 us per extra hop includes hard IPs and cable). {verdict}

| path | MWr payload (B) | cycles | ns |
| --- | ---: | ---: | ---: |
{lat_rows}

Where the cycles go: the RX adapter's input FIFO (distributed RAM, one cycle), realignment
(the first internal beat needs the Avalon beat after the header) and its output register, the
ingress's two stages (header class and table compares, then the decision), the packet buffer
(block-RAM FIFO with registered output, two cycles; N-bound headers are translated as they are
written into it) and its output register slice, the crossbar's registered grant (one cycle
unless the output's grant already names the input) and its output register, the TX adapter's
FIFO (distributed RAM, one cycle) and its output register. The stages added for the timing
budget of 6 LUT levels at 250 MHz (RX output register, second ingress stage, buffer slice,
crossbar grant) cost one cycle each.

## Router: all four ports busy

Flows N -> E, E -> W, W -> S and S -> N of 256-byte writes (4-DW headers) at once, each
port's TX link metered (S -> N lands in host memory through the offset subtraction, checked
byte for byte).

| flow (TX port) | TLPs | GB/s | bound GB/s | of bound |
| --- | ---: | ---: | ---: | ---: |
{busy_rows}

## PIO store latency, host A -> host B

Two chips cabled E -> W, a host on each N; a 4-byte store from host 0 into node 1's host window
(`tb/system`, test `pio_latency`). Time from the host's write call to the write reaching host
1's memory:

```
{json.dumps(pio, indent=2)}
```

The simulation counts the three links' wire time (host - chip 0, cable, chip 1 - host; the
link model adds a fixed port delay), every cycle of both chips, and the hard-IP models' beat
timing. It does not model the hard IPs' PHY, data-link and transaction-layer pipelines, the
cable's length or the host's memory path, which is why it is far below the 782 ns the papers
measured on hardware (002 section 4)."""


def collectives_section(saved, draw=True):
    return collectives_doc.section(saved, IMG, draw)


def gpu_section(saved, draw=True):
    return gpu_doc.section(saved)


def dma_section(saved, draw=True):
    return dma_doc.dma_markdown(saved, IMG, draw)


def calibration_section(saved, draw=True):
    return calibration_doc.section(saved, IMG, draw)


def machine_section(saved, draw=True):
    return machine_doc.section(saved, IMG, draw)


def hybrid_section(saved, draw=True):
    return hybrid_figures.section(saved, IMG, draw, hybrid_figures.NOTES, heat=heat_stamps())


def heat_stamps(results=None):
    """Each heatmap picture's run stamp from its saved result (``heat_<name>.json`` under
    ``results``, default the results folder), None for one without a stamp; pictures with no
    saved result are left out."""
    from peach2.sim.hybrid.heatmap import PICTURES
    folder = Path(results) if results else RESULTS
    out = {}
    for name in PICTURES:
        path = folder / f"heat_{name}.json"
        try:
            out[name] = json.loads(path.read_text()).get("run")
        except FileNotFoundError:
            continue
        except (OSError, ValueError, AttributeError) as e:
            raise ValueError(f"{path}: not a saved heatmap result ({e})") from None
    return out


def halo_section(saved, draw=True):
    return halo_figures.section(saved, IMG, draw)


def tuning_section(saved, draw=True):
    return tuning_figures.section(saved, IMG, draw)


def _cluster_section(saved, draw=True):
    return cluster_section(saved)


#: Each section's renderer: ``(saved results, plots to draw) -> (title, body)``; the plots
#: to draw are True (all), False (none) or a list of file names of :data:`IMAGES`.
RENDER = {"adapters": adapters_section, "router": router_section, "dma": dma_section,
          "cluster": _cluster_section, "gpu": gpu_section, "collectives": collectives_section,
          "calibration": calibration_section, "machine": machine_section,
          "hybrid": hybrid_section, "halo": halo_section, "tuning": tuning_section}


def _markers(name):
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def kept_text(old, name):
    """The text between ``name``'s markers in ``old`` (markers excluded), or None."""
    begin, end = _markers(name)
    if begin not in old or end not in old.split(begin, 1)[1]:
        return None
    return old.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def render(name, saved, draw=True):
    """A section's markdown from its saved results: heading, stamp, body; ``draw`` (True, False
    or file names) says which of its plots are (re)drawn."""
    title, body = RENDER[name](saved, draw)
    top = stamp(saved.get("run"))       # none where each part carries its own (hybrid)
    return f"## {title}\n\n" + (f"{top}\n\n" if top else "") + body.strip()


def rebuild(doc=DOC, measured=()):
    """Write ``doc`` from every section's saved results (kept text where there are none);
    return the sections that were rendered from saved results.

    ``measured``: the sections this run measured, whose plots are redrawn; another section's
    plots are drawn only when one is missing, never rewritten."""
    old = doc.read_text() if doc.exists() else ""
    parts, rendered = [HEAD], []
    for name in SECTIONS:
        saved = load(name)
        if saved is not None:
            draw = True if name in measured else \
                [f for f in IMAGES.get(name, ()) if not (IMG / f).exists()]
            text = render(name, saved, draw)
            rendered.append(name)
        else:
            text = kept_text(old, name)
            if text is None:
                text = (f"## {name}\n\nNot measured yet: `peach2 bench {name}` measures it "
                        f"and saves `docs/results/{name}.json`.")
        begin, end = _markers(name)
        parts.append(f"{begin}\n{mark(name, text)}\n{end}\n")
    doc.write_text("\n".join(parts))
    kept = [n for n in SECTIONS if n not in rendered]
    shown = doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc
    print(f"wrote {shown}: {', '.join(rendered) or 'no section'} from saved results"
          + (f"; kept as they were: {', '.join(kept)}" if kept else ""), file=sys.stderr,
          flush=True)
    return rendered
