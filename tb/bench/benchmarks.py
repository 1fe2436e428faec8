"""Benchmarks: measure sections, save ``docs/results/*.json``, rebuild ``docs/benchmarks.md``.

Usage (from the repository root, after the README's test install; ``peach2 bench`` is the same)::

    python tb/bench/benchmarks.py                   # every section (adapters .. machine)
    python tb/bench/benchmarks.py adapters router   # only these; the others keep their saved results
    python tb/bench/benchmarks.py dma --quick       # fewer, shorter points (printed: what is shortened)
    python tb/bench/benchmarks.py --doc-only        # rebuild the document from the saved results
    python tb/bench/benchmarks.py --doc-only --redraw hybrid   # ... and redraw hybrid's plots
    mpiexec -n 5 python tb/bench/benchmarks.py dma  # the points on 4 MPI worker ranks, rank 0 saves

Sections: ``adapters`` (hard-IP adapters' loopback write stream, 10 points), ``router`` (latency
through one chip, all four ports busy, PIO latency host to host), ``dma`` (002 section 4.1,
Figures 4-7, scattered-descriptor chains and the halo planes, run as parallel Verilator
simulations, ``--jobs`` at a time: :mod:`peach2.sim.bench.dma_run`), ``cluster``
(``tb/cluster/bench_cluster.py``, run in a child process: the HDL sub-cluster's speed, build
time and latency per hop), ``gpu`` (``tb/cluster/bench_gpu.py``, run in a child process: a DMA
reading the local GPU against one reading host memory, beside 002's 870 MB/s GPU read ceiling
and the wire bound), ``calibration`` (``tb/calibration/bench_calibration.py``, run in a child
process, and :mod:`peach2.sim.mpi.pingpong`: the 8-byte latency table of the whole model against
HA-PACS/TCA's figures and 000 Figure 4's ping-pong bandwidth, TCA against the MPI curves;
:mod:`peach2.sim.bench.calibration_doc`), ``machine`` (:mod:`peach2.sim.bench.machine.speed`, in
a child process that starts its own ``mpiexec`` runs: the 64-node machine's simulation speed),
``hybrid`` (``python -m peach2.sim.hybrid.sweep --save`` in child processes, one per machine of
:data:`peach2.sim.hybrid.figures.MACHINES`, which merge their own stamped rows: 000 Figures
12-15), ``halo``
(:mod:`peach2.sim.hybrid.halo_bench` in child processes, which save their own rows: Himeno's halo
exchange over TCA, MV2GDR and the hybrid on 8 and 16 nodes, 000 Figures 9-10, and one plane,
Figure 6), ``tuning`` (``python -m peach2.sim.hybrid.sweep --tune`` in child processes, one per
machine of :data:`peach2.sim.hybrid.figures.tuning.MACHINES`, which save their own entries:
every network choice against size, the tuning table, the tuned network against the best).  A run saves only the sections it measured, so it
never removes another section's figures; each point prints a progress line with how many are
left.  Under ``mpiexec`` with several ranks the independent points go to the worker ranks and
rank 0 saves the same results (:mod:`peach2.sim.bench.pool`; ``--jobs`` is then refused).

Every figure comes from a simulation of the real design, timed by the wire model of the link
(cocotbext-pcie ``SimPort``, Gen2 x8), and is printed beside the wire-format bound for the same
TLPs.  Nothing here is asserted; the regression asserts the goals.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from peach2 import cli_options
from peach2.sim.bench import calibration_doc as bench_calibration_doc
from peach2.sim.bench import cluster_doc as bench_cluster_doc
from peach2.sim.bench import dma_run as bench_dma_run
from peach2.sim.bench import gpu_doc as bench_gpu_doc
from peach2.sim.bench.dma_doc import print_dma
from peach2.sim.bench.dma_plan import (
    FIGURES,
    FULL_CHAIN,
    FULL_TOTAL,
    QUICK_CHAIN,
    QUICK_TOTAL,
    plan,
    sizes,
)
from peach2.sim.bench.doc import rebuild
from peach2.sim.bench.machine.speed import IDLE_WINDOWS as MACHINE_IDLE
from peach2.sim.bench.machine.speed import QUICK_IDLE_WINDOWS as MACHINE_QUICK_IDLE
from peach2.sim.bench.machine.speed import QUICK_RUNS as MACHINE_QUICK_RUNS
from peach2.sim.bench.pool import PointPool, in_script, mpi_size
from peach2.sim.bench.results import (
    SECTIONS,
    PointProgress,
    run_info,
    save,
    shortened_note,
    started,
)
from peach2.sim.hdl import Chips, Loopback
from peach2.sim.run import SIMULATORS, run_cocotb

HERE = Path(__file__).resolve().parent
TB = HERE.parent

#: Scratch files of the benchmark runs (the saved results are under docs/results/).
SCRATCH = bench_dma_run.SCRATCH
FULL_TLPS, QUICK_TLPS = 1000, 200            # adapters: TLPs per point
FULL_BUSY, QUICK_BUSY = 1000, 300            # router: TLPs per all-ports-busy flow
#: collectives: what --quick leaves out (tb/collectives/bench_collectives.py says the same)
QUICK_COLLECTIVES = "sizes 8 B, 512 B, 32 KiB; halo N = 16, 32; collision 64 KiB"
HALO_QUICK = ("8 nodes and Figure 6 at N = 32, 64 only (the 16-node rows kept from the last "
              "full run)")

# Limits of the dma section's options (tb/dma/dma_perf_tb.py runs two chips with 4 MiB of host
# memory each and 16 KiB of descriptors per channel: 128 scattered descriptors, 128 bytes apart).
MAX_CHAIN = FULL_CHAIN                      # --chain, --chains: the paper's 128 at most
MIN_TOTAL, MAX_TOTAL = 1 << 12, 1 << 21     # --max-total: bytes per point, 4 KiB .. 2 MiB
MAX_READ_LATENCY = 100_000                  # --read-latency, ns
MAX_JOBS = 64                               # --jobs
MIN_HALO_N, MAX_HALO_N = 4, 64              # --halo-n: 64^3 doubles are 2 MiB
MAX_SIZE = max(sizes(False))                # --sizes: the largest transfer of the figures

#: One command per study, for ``--help``: (command, what it measures).
STUDIES = [
    ("peach2 bench adapters", "hard-IP adapters: loopback write stream, 10 points"),
    ("peach2 bench router", "latency through one chip, four ports busy, PIO host to host"),
    ("peach2 bench dma", "DMA on two chips: 002 Figures 4-7, scattered chains, halo planes"),
    ("peach2 bench cluster", "the simulated HDL sub-cluster: speed on 1, 4, 8 and 16 chips "
                             "(16: the 2x8), build time and PIO latency per hop of the 2x8"),
    ("peach2 bench gpu", "a DMA reading a GPU against one reading host memory (line:2)"),
    ("peach2 bench collectives", "Broadcast and Allgather on 8 (2x4) and 16 (2x8) nodes, halo "
                                 "exchange, two senders into one, latency per hop"),
    ("peach2 bench calibration", "8-byte latency of PEACH2 DMA/PIO and MPI against HA-PACS/TCA "
                                 "(GTC 2014), ping-pong bandwidth of 000 Figure 4 (TCA, MV2GDR)"),
    ("peach2 bench machine", "simulation speed of 2 and 4 sub-clusters of 2x8 (64 nodes): "
                             "one process against mpiexec -n 2 and -n 4, idle and under traffic"),
    ("peach2 bench hybrid", "Broadcast and Allgather, MPI alone against the hybrid, on 8 and 16 "
                            "nodes split as 000 Figure 11 (Figures 12-15); 32 and 64 nodes: "
                            "python -m peach2.sim.hybrid.sweep --shape 2x8 --subclusters 2 (or 4) "
                            "--save"),
    ("peach2 bench halo", "Himeno's halo exchange over TCA, MV2GDR and the hybrid on 8 and 16 "
                          "nodes (000 Figures 9-10), one plane Block / Block Stride (Figure 6)"),
    ("peach2 bench tuning", "every hybrid network choice against size on 8, 16, 32 and 64 "
                            "nodes, the tuning table built from them, the tuned network against "
                            "the best (hours: the 32- and 64-node sweeps)"),
    ("python tb/cluster/bench_cluster.py --only latency", "the 16-node sub-cluster's PIO "
                                                          "latency per hop alone"),
    ("python tb/collectives/bench_collectives.py --nodes 16", "the collectives on 16 nodes "
                                                              "alone"),
    ("python -m pytest tb/cluster tb/collectives -k 2x8", "the 16-node sub-cluster's "
                                                          "tests: all to all, collectives "
                                                          "(add --sim verilator for speed)"),
]

# The adapters' points: (run name, payload, header).
LOOPBACK = [(f"bench-loopback-{payload}-{header}", payload, header)
            for header in ("4dw", "3dw") for payload in (32, 64, 128, 256, 512)]


def _scratch(name):
    SCRATCH.mkdir(parents=True, exist_ok=True)
    return SCRATCH / f"{name}.json"


def loopback_point(name, payload, header, count):
    result_file = _scratch(name)
    run_cocotb(component=Loopback(), toplevel="loopback", test_module="host_loopback_tb",
               name=name, test_dir=TB / "tlp", testcase="write_stream", seed=1,
               params={"count": count, "payload": payload, "above_4g": header == "4dw",
                       "min_fraction": 0.0, "result_file": str(result_file)})
    result = json.loads(result_file.read_text())
    result.update(payload=payload, header_dw=4 if header == "4dw" else 3)
    return result


def loopback_item(item):
    """:func:`loopback_point` of ``(name, payload, header, count)`` (what the pool maps)."""
    return loopback_point(*item)


def adapters(quick):
    """The loopback write stream, 10 points two at a time (under ``mpiexec``, one per worker
    rank at a time); returns the section's data."""
    count = QUICK_TLPS if quick else FULL_TLPS
    progress = PointProgress("adapters", len(LOOPBACK))

    def done(_, result):
        progress.point(f"{result['payload']} B, {result['header_dw']}-DW header: "
                       f"{result['gbps']:.3f} GB/s")
    pool = PointPool("adapters", 2)
    points = pool.map(
        in_script(__file__, "loopback_item") if pool.mpi else loopback_item,
        [(*point, count) for point in LOOPBACK],
        names=[name for name, _, _ in LOOPBACK], done=done)
    print(f"{'payload':>8} {'hdr':>4} {'TLPs':>6} {'GB/s':>7} {'bound':>7} {'of bound':>9}")
    for r in sorted(points, key=lambda r: (-r["header_dw"], r["payload"])):
        print(f"{r['payload']:>8} {r['header_dw']:>4} {r['tlps']:>6} {r['gbps']:>7.3f} "
              f"{r['bound_gbps']:>7.3f} {100 * r['fraction']:>8.1f}%")
    return {"points": points}


def router_run(testcase, params=None):
    from peach2.top import PEACH2
    name = f"bench-router-{testcase}"
    result_file = _scratch(name)
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="bench_tb", name=name,
               test_dir=TB / "router", testcase=testcase, seed=1,
               params={**(params or {}), "result_file": str(result_file)})
    return json.loads(result_file.read_text())


def pio_latency():
    """``tb/system``'s ``pio_latency`` on its two-chip top (``test_system.run``'s build)."""
    result_file = _scratch("bench-system-latency")
    run_cocotb(component=Chips(2), toplevel="two_chips", test_module="system_tb",
               name="bench-system-latency", test_dir=TB / "system", testcase="pio_latency",
               seed=41, params={"result_file": str(result_file)}, simulator="verilator")
    return json.loads(result_file.read_text())


#: The router section's runs: (key in its data, progress label).
ROUTER = [("latency", "latency through one chip"), ("all_ports_busy", "all four ports busy"),
          ("pio", "PIO latency host to host")]


def router_point(item):
    """One run of the router section, ``(key, count)`` (what the pool maps)."""
    key, count = item
    if key == "pio":
        return pio_latency()
    return router_run(key, {"count": count} if key == "all_ports_busy" else None)


def router(quick):
    """Latency through one chip, four ports busy, PIO latency, two at a time (under
    ``mpiexec``, one per worker rank at a time); returns the section's data."""
    count = QUICK_BUSY if quick else FULL_BUSY
    progress = PointProgress("router", len(ROUTER))
    pool = PointPool("router", 2)
    results = pool.map(
        in_script(__file__, "router_point") if pool.mpi else router_point,
        [(key, count) for key, _ in ROUTER],
        names=[label for _, label in ROUTER], done=lambda k, _: progress.point(ROUTER[k][1]))
    data = {key: r for (key, _), r in zip(ROUTER, results)}
    for r in data["latency"]:
        print(f"latency {r['from']} -> {r['to']} {r['bytes']:>4} B: {r['cycles']} cycles")
    for r in data["all_ports_busy"]:
        print(f"{r['name']:>8}: {r['gbps']:.3f} GB/s of {r['bound_gbps']:.3f} "
              f"({100 * r['fraction']:.1f}%)")
    return data


def shortened(section, quick, chain=None, max_total=None):
    """What a run of ``section`` with these options measures less of than the full run."""
    if section == "adapters":
        return [f"{QUICK_TLPS} TLPs per point instead of {FULL_TLPS}"] if quick else []
    if section == "router":
        return [f"all-ports-busy flows of {QUICK_BUSY} TLPs instead of {FULL_BUSY}"
                ] if quick else []
    if section == "cluster":
        return bench_cluster_doc.quick_shortened() if quick else []
    if section == "gpu":
        return bench_gpu_doc.quick_shortened() if quick else []
    if section == "collectives":
        return [QUICK_COLLECTIVES] if quick else []
    if section == "calibration":
        return bench_calibration_doc.quick_shortened() if quick else []
    if section == "hybrid":
        return ["8 nodes (one 2x4 split virtually) only, not 16 (one 2x8)"] if quick else []
    if section == "halo":
        return [HALO_QUICK] if quick else []
    if section == "tuning":
        return ["8 nodes (one 2x4 split virtually) only, not 16, 32 and 64"] if quick else []
    if section == "machine":
        return [f"runs {', '.join(MACHINE_QUICK_RUNS)} only, {MACHINE_QUICK_IDLE} idle windows "
                f"instead of {MACHINE_IDLE}"] if quick else []
    chain = chain or (QUICK_CHAIN if quick else FULL_CHAIN)
    max_total = max_total or (QUICK_TOTAL if quick else FULL_TOTAL)
    out = []
    if quick:
        out += ["9 transfer sizes (8 B to 128 KiB by 4x, and 4 KiB) instead of 15 (by 2x)",
                "halo arrays N = 16 and 64 instead of 16, 32 and 64"]
    if chain < FULL_CHAIN:
        out.append(f"Figures 4 and 7: chains of {chain} transfers instead of {FULL_CHAIN} "
                   "(the chain column)")
    if max_total < FULL_TOTAL:
        out.append(f"Figures 4 and 7: {max_total // 1024} KiB per point at most instead of "
                   f"{FULL_TOTAL // 1024} KiB")
    return out


def dma(quick, read_latency_ns=500, chain=None, max_total=None, subset=None, jobs=None,
        simulator=None):
    """Run the DMA figures (``tb/dma/dma_perf_tb.py``) on two chips, ``jobs`` simulations at a
    time (default: the CPU count; :mod:`peach2.sim.bench.dma_run`); return ``(data, costs)``.

    ``chain`` and ``max_total`` override the chain length and the bytes per point of Figures 4
    and 7; ``subset`` (``figures``, ``sizes``, ``chains``, ``halo_n``) runs only some points."""
    subset = subset or {}
    points = plan(quick, chain, max_total, subset.get("figures"), subset.get("sizes"),
                  subset.get("chains"), subset.get("halo_n"))
    jobs = jobs or os.cpu_count() or 1     # under mpiexec: the worker ranks instead
    data, costs = bench_dma_run.run(points, workers=jobs, test_dir=TB / "dma",
                                    read_latency_ns=read_latency_ns, simulator=simulator)
    print_dma(data)
    ranks = f" (on {costs['ranks']} MPI ranks)" if costs["ranks"] > 1 else ""
    print(f"dma: {costs['cpu_s']} s CPU{ranks} in {costs['jobs']} simulations "
          f"({costs['simulator']}); about {costs['idle_s']} s on an idle machine with "
          f"{costs['workers']} at a time", flush=True)
    bench_dma_run.save_costs(SCRATCH / "bench-dma-costs.json", points, costs)
    return data, costs


def _run_script(script, *args, quick=False, conditions=None):
    """Run the benchmark script ``tb/<script>`` in a child process (it imports modules of its
    own test folder), with ``--quick`` and ``--conditions`` as given; a failed run raises."""
    argv = [sys.executable, str(TB / script), *args]
    argv += ["--quick"] if quick else []
    argv += ["--conditions", conditions] if conditions else []
    subprocess.run(argv, check=True)


def cluster(quick, conditions, command):
    """The sub-cluster section: ``tb/cluster/bench_cluster.py`` (it saves its own results under
    ``command``)."""
    _run_script("cluster/bench_cluster.py", "--command", command, quick=quick,
                conditions=conditions)


def gpu(quick):
    """The GPU read section: ``tb/cluster/bench_gpu.py``; return the data it measured."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gpu.json"
        _run_script("cluster/bench_gpu.py", "--out", str(out), quick=quick)
        return json.loads(out.read_text())


def calibration(quick):
    """The calibration section: the PEACH2 ping-pongs of ``tb/calibration/bench_calibration.py``
    (one Verilator simulation) and the MPI rows and curves of :mod:`peach2.sim.mpi.pingpong` at
    the same sizes; returns the section's data."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "calibration.json"
        _run_script("calibration/bench_calibration.py", "--out", str(out), quick=quick)
        tca = json.loads(out.read_text())
    sizes_ = bench_calibration_doc.sizes(quick)
    print(f"calibration: the MPI side, {len(sizes_)} sizes (peach2.sim.mpi.pingpong)", flush=True)
    data = {"tca": tca, "mpi": bench_calibration_doc.mpi_side(sizes_), "sizes": sizes_}
    for r in bench_calibration_doc.table_rows(data):
        print(f"  {r['what']:64} {r['model_us']:6.2f} us, target {r['target_us']:.1f} us "
              f"({r['error']:+.1%})", flush=True)
    return data


def machine(quick, conditions):
    """The machine section: :mod:`peach2.sim.bench.machine.speed` in a child process (it starts
    its runs under ``mpiexec`` and saves its own results)."""
    argv = [sys.executable, "-m", "peach2.sim.bench.machine.speed"]
    argv += ["--quick"] if quick else []
    argv += ["--conditions", conditions] if conditions else []
    subprocess.run(argv, check=True)


def halo(quick, conditions):
    """The halo section: ``python -m peach2.sim.hybrid.halo_bench`` in child processes, 8 nodes
    with Figure 6, then 16 nodes (``--quick``: 8 nodes, Figure 6 at N = 32, 64); each saves its
    rows into ``docs/results/halo.json`` in place of those it measured."""
    for extra in ([["--planes", "32,64"]] if quick else [[], ["--nodes", "16"]]):
        argv = [sys.executable, "-m", "peach2.sim.hybrid.halo_bench", *extra]
        argv += ["--conditions", conditions] if conditions else []
        subprocess.run(argv, check=True)


def tuning(quick, conditions):
    """The tuning section: ``python -m peach2.sim.hybrid.sweep --tune`` in a child process per
    machine of :data:`peach2.sim.hybrid.figures.tuning.MACHINES` (``--quick``: the 8-node
    ones); each replaces its machine's entry in ``docs/results/tuning.json``."""
    from peach2.sim.hybrid.figures.tuning import MACHINES
    for shape, subclusters, split, collective, extra in MACHINES:
        if quick and shape != "2x4":
            continue
        argv = [sys.executable, "-m", "peach2.sim.hybrid.sweep", "--shape", shape,
                "--subclusters", str(subclusters), "--per-subcluster", str(split),
                "--collective", collective, "--tune", *extra]
        argv += ["--conditions", conditions] if conditions else []
        subprocess.run(argv, check=True)


def hybrid(quick, conditions):
    """The hybrid section: ``python -m peach2.sim.hybrid.sweep --save`` in a child process per
    machine of :data:`peach2.sim.hybrid.figures.MACHINES` (``--quick``: the first, 8 nodes,
    only); each merges its rows, stamped, into ``docs/results/hybrid.json``
    (:mod:`peach2.sim.hybrid.saved`): the other machines' rows stay as they were measured."""
    from peach2.sim.hybrid import figures
    for shape, subclusters, split in figures.MACHINES[:1] if quick else figures.MACHINES:
        argv = [sys.executable, "-m", "peach2.sim.hybrid.sweep", "--shape", shape,
                "--subclusters", str(subclusters), "--per-subcluster", str(split), "--save"]
        argv += ["--conditions", conditions] if conditions else []
        subprocess.run(argv, check=True)


def collectives(quick, conditions):
    """The collectives section: ``tb/collectives/bench_collectives.py`` (it saves its own
    results); under ``mpiexec``, its ``main`` in this process, so that its simulations go to
    the worker ranks (a child process of a rank cannot join the MPI job)."""
    if PointPool("collectives").mpi:
        args = ["--quick"] if quick else []
        args += ["--conditions", conditions] if conditions else []
        status = in_script(TB / "collectives" / "bench_collectives.py", "main")(args)
        if status:
            raise SystemExit(status)
        return
    _run_script("collectives/bench_collectives.py", quick=quick, conditions=conditions)


def _value(text, low, high, kind):
    try:
        value = kind(cli_options.number(text) if kind is int else text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"must be a number {low}..{high}, got "
                                         f"{text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be {low}..{high}, got {text}")
    return value


def _bounded(low, high, kind=int):
    """Type of one number in ``low..high`` (integers: decimal, 0x hex or K/M suffixes)."""
    return lambda text: _value(text, low, high, kind)


def _ints(low, high):
    """Type of comma-separated integers, each in ``low..high``, at least one."""
    def parse(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"must be comma-separated numbers {low}..{high}, "
                                             f"got {text!r}")
        return [_value(x, low, high, int) for x in items]
    return parse


class _Parser(argparse.ArgumentParser):
    """Bad options: one line (``<prog>: error: --option: ...``) and exit status 2."""

    def error(self, message):
        message = message.replace("argument ", "", 1) if message.startswith("argument --") \
            else message
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _figures(text):
    out = [x for x in text.split(",") if x]
    bad = [x for x in out if x not in FIGURES]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"figures are {', '.join(FIGURES)}, not {text!r}")
    return out


def _epilog():
    studies = "\n".join(f"  {command}\n" + textwrap.fill(what, 78, initial_indent=" " * 6,
                                                         subsequent_indent=" " * 6)
                        for command, what in STUDIES)
    return ("one command per study (from the repository's root; the scripts take --help):\n"
            + studies + "\n\n" + textwrap.fill(
                "A run saves only the sections it measured and redraws only their plots "
                "(docs/img/); --doc-only rebuilds the document and draws only missing plots "
                "(--redraw: those of the sections it names as well).",
                78))


def parser(prog="python tb/bench/benchmarks.py"):
    p = _Parser(prog=prog, description="Measure benchmark sections, save them to "
                "docs/results/<section>.json and rebuild docs/benchmarks.md from every saved "
                "section.", epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sections", nargs="*", metavar="SECTION",
                   help=f"sections to measure, among {', '.join(SECTIONS)} (default: all, about "
                        "12 hours of one core, 10 of them the tuning's); the others keep their "
                        "saved results")
    p.add_argument("--quick", action="store_true",
                   help="fewer and shorter points (what is shortened is printed and saved)")
    p.add_argument("--doc-only", action="store_true",
                   help="measure nothing: rebuild docs/benchmarks.md from docs/results/")
    p.add_argument("--redraw", metavar="SECTION,...",
                   help="with --doc-only: redraw these sections' plots too (or 'all'; by "
                        "default only missing plots are drawn)")
    p.add_argument("--conditions", default=None,
                   help="what else ran on the machine, saved with the run")
    g = p.add_argument_group("dma section")
    g.add_argument("--chain", type=_bounded(1, MAX_CHAIN), default=None, metavar="N",
                   help=f"Figures 4 and 7: transfers per chain, 1..{MAX_CHAIN} (default "
                        f"{QUICK_CHAIN} with --quick, else {FULL_CHAIN})")
    g.add_argument("--max-total", type=_bounded(MIN_TOTAL, MAX_TOTAL), default=None,
                   metavar="BYTES",
                   help=f"Figures 4 and 7: bytes per point at most, {MIN_TOTAL // 1024}K.."
                        f"{MAX_TOTAL >> 20}M (default {QUICK_TOTAL // 1024}K with --quick, else "
                        f"{FULL_TOTAL // 1024}K)")
    g.add_argument("--read-latency", type=_bounded(0, MAX_READ_LATENCY, float), default=500,
                   metavar="NS", help=f"host memory read latency in ns, 0..{MAX_READ_LATENCY} "
                                      f"(default 500)")
    g.add_argument("--figures", type=_figures, default=None,
                   help="only these DMA figures (comma-separated: chain128, scattered, single, "
                        "chain4k, halo); printed, not saved")
    g.add_argument("--sizes", type=_ints(1, MAX_SIZE), default=None, metavar="BYTES,...",
                   help="only these transfer sizes for chain128, scattered and single, among "
                        f"the run's: 8 B..{MAX_SIZE // 1024}K by 2x, or with --quick by 4x and "
                        "4K; printed, not saved")
    g.add_argument("--chains", type=_ints(1, MAX_CHAIN), default=None, metavar="N,...",
                   help=f"only these chain lengths for chain4k, each 1..{MAX_CHAIN}; printed, "
                        "not saved")
    g.add_argument("--halo-n", type=_ints(MIN_HALO_N, MAX_HALO_N), default=None, metavar="N,...",
                   help=f"only these halo arrays N (N^3 doubles), each {MIN_HALO_N}.."
                        f"{MAX_HALO_N}; printed, not saved")
    g.add_argument("--jobs", type=_bounded(1, MAX_JOBS), default=None, metavar="N",
                   help=f"simulations run at a time, 1..{MAX_JOBS} (default: the CPU count, "
                        f"{os.cpu_count()}); under mpiexec with N+1 ranks, the N worker ranks "
                        "run one simulation each at a time and --jobs is refused")
    g.add_argument("--sim", choices=SIMULATORS, default=None,
                   help="simulator of the DMA run (default: PEACH2_SIM, else Verilator: the same "
                        "figures in a tenth of the time or less once built)")
    return p


def main(argv=None, prog="python tb/bench/benchmarks.py"):
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser(prog)
    args = p.parse_args(argv)
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        p.error(f"sections are {', '.join(SECTIONS)}, not {', '.join(bad)}")
    sections = [s for s in SECTIONS if s in args.sections] or list(SECTIONS)
    subset = {k: v for k, v in (("figures", args.figures),
                                ("sizes", args.sizes), ("chains", args.chains),
                                ("halo_n", args.halo_n)) if v}
    if subset and sections != ["dma"]:
        p.error("--figures, --sizes, --chains and --halo-n go with the dma section alone")
    run_sizes = sizes(args.quick)
    unknown = [s for s in args.sizes or () if s not in run_sizes]
    if unknown:         # the plan would measure nothing for them
        p.error(f"--sizes: {', '.join(map(str, unknown))} not among this run's sizes "
                f"({', '.join(map(str, run_sizes))})")
    if args.doc_only and args.sections:
        p.error("--doc-only measures nothing: name no section")
    if args.redraw is not None:
        if not args.doc_only:
            p.error("--redraw goes with --doc-only (a measured section's plots are redrawn)")
        named = [x for x in args.redraw.split(",") if x]
        bad = [x for x in named if x not in (*SECTIONS, "all")]
        if bad or not named:
            p.error(f"--redraw: sections are {', '.join(SECTIONS)} or all, not "
                    f"{', '.join(bad) or repr(args.redraw)}")
        args.redraw = list(SECTIONS) if "all" in named else named
    if args.jobs is not None and (ranks := mpi_size()) > 1:
        p.error(f"--jobs: under mpiexec the {ranks - 1} worker ranks are the simulations run at "
                f"a time (rank 0 hands out the points); for {args.jobs} at a time start "
                f"mpiexec -n {args.jobs + 1} without --jobs")
    if "machine" in sections and mpi_size() > 1:
        p.error("the machine section starts its own mpiexec runs (one process against ranks): "
                "run it without mpiexec")
    # Under mpiexec with several ranks, rank 0 runs the benchmark and the others its points.
    with PointPool.ranks() as master:
        if master:
            _run(args, argv, prog, sections, subset)


def _run(args, argv, prog, sections, subset):
    """Measure (or with ``--doc-only`` only rebuild) as ``args`` say."""
    if args.doc_only:
        rebuild(measured=args.redraw or ())
        return
    command = " ".join([prog, *argv])
    if subset:
        start = time.time()
        data, _ = dma(args.quick, args.read_latency, args.chain, args.max_total, subset,
                      args.jobs, args.sim)
        out = _scratch("bench-dma-subset")
        out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"DMA subset in {time.time() - start:.0f} s (not saved to docs/results; its data: "
              f"{out})")
        return
    print(f"measuring {', '.join(sections)}" + (" (quick)" if args.quick else ""), flush=True)
    less = {name: shortened(name, args.quick, args.chain, args.max_total) for name in sections}
    for name in sections:       # said before the run starts, and saved with its results
        shortened_note(name, less[name])
    for name in sections:
        start = started()
        if name == "cluster":
            cluster(args.quick, args.conditions, command)
            continue
        if name == "machine":         # peach2.sim.bench.machine.speed saves its own
            machine(args.quick, args.conditions)
            continue
        if name == "halo":            # python -m peach2.sim.hybrid.halo_bench saves its own
            halo(args.quick, args.conditions)
            continue
        if name == "tuning":          # python -m peach2.sim.hybrid.sweep --tune saves its own
            tuning(args.quick, args.conditions)
            continue
        if name == "hybrid":          # python -m peach2.sim.hybrid.sweep --save saves its own
            hybrid(args.quick, args.conditions)
            continue
        if name == "collectives":     # tb/collectives/bench_collectives.py saves its own
            collectives(args.quick, args.conditions)
            continue
        costs = None
        if name == "dma":
            data, costs = dma(args.quick, args.read_latency, args.chain, args.max_total,
                              jobs=args.jobs, simulator=args.sim)
        else:
            data = {"adapters": adapters, "router": router, "gpu": gpu,
                    "calibration": calibration}[name](args.quick)
        run = run_info(command, start, less[name], args.conditions)
        if costs:       # the parallel run: its CPU seconds and the idle machine's wall time
            run.update({k: costs[k] for k in ("simulator", "jobs", "workers")},
                       cpu_seconds=costs["cpu_s"], idle_seconds=costs["idle_s"])
            if costs["ranks"] > 1:
                run["mpi_ranks"] = costs["ranks"]
        save(name, {"run": run, **data})
        print(f"{name}: saved docs/results/{name}.json ({run['seconds']} s)", file=sys.stderr,
              flush=True)
    rebuild(measured=sections)


if __name__ == "__main__":
    main()
