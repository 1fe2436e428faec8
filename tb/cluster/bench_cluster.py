"""Sub-cluster figures: simulation speed, build time, calibrated PIO latency per hop.

    python tb/cluster/bench_cluster.py [--only speed,build,latency] [--nodes 1,4,8,16]
                                       [--icarus-nodes 1,4] [--threads 2]

Measures on the HDL sub-cluster (``peach2.sim.hdl.cluster_top``, hosts in Python):

- ``speed``: cycles per wall second for 1, 4, 8 and 16 chips (single, ring:4, 2x4, 2x8), idle
  (no host enumerated, nothing but the HDL) and under all-to-all PIO traffic, on Verilator and
  on Icarus (Icarus only for ``--icarus-nodes``: at 16 chips it runs ~13 cycles/s).  Verilator
  builds with ``--threads`` (default 2: the machine's two cores; measure on an otherwise idle
  machine, since Verilator's threads spin and collapse when cores are shared);
- ``build``: build time of the 16-chip (2x8) top on Verilator, cold (build folder removed, chip
  netlist cached) and cached;
- ``latency``: 4-byte PIO store latency from host 0 to every node of the 2x8 with the
  calibrated hard-IP pipeline (``peach2.sim.pcie.calibration``), by hop count, and the time per
  extra hop, beside 002's 782 ns and 000's 0.3-0.4 us.

Results go to ``docs/results/cluster.json`` (:mod:`peach2.sim.bench.results`: with the command,
commit, date, seconds, load) and ``docs/benchmarks.md`` is rebuilt from every section's saved
results (:mod:`peach2.sim.bench.doc`; the section's text and the options' defaults are
:mod:`peach2.sim.bench.cluster_doc`'s); ``--doc-only`` only rebuilds it.  ``--quick`` measures
1 and 4 chips on Verilator and 1 on Icarus (printed and saved as what it shortened).  A progress
line prints before each point.  ``peach2 bench cluster`` runs this script in a child process.
"""

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from cluster_run import run

from peach2.sim.bench.cluster_doc import (
    PARTS,
    QUICK_ICARUS,
    QUICK_NODES,
    TOPOLOGY,
    defaults,
    quick_options,
    shortened,
)
from peach2.sim.bench.doc import rebuild
from peach2.sim.bench.results import load, run_info, save, started


def _nodes(text):
    out = [int(x) for x in text.split(",") if x]
    bad = [n for n in out if n not in TOPOLOGY]
    if bad:
        raise argparse.ArgumentTypeError(f"node counts must be among {sorted(TOPOLOGY)}, "
                                         f"not {bad}")
    return out


def _threads(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 8:
        raise argparse.ArgumentTypeError(f"threads must be 1..8, not {text!r}")
    return value


def _sections(text):
    out = [x for x in text.split(",") if x]
    bad = [x for x in out if x not in PARTS]
    if bad:
        raise argparse.ArgumentTypeError(f"sections are {', '.join(PARTS)}, not {bad}")
    return out


def _run(name, topology, testcase, simulator, threads=1, **params):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    t0 = time.perf_counter()
    import os

    from peach2.sim.run import SIM_ENV
    os.environ[SIM_ENV] = simulator
    try:
        run(name, topology, testcase, result_file=str(out), cable=None, any_simulator=True,
            threads=threads, **params)
    finally:
        os.environ.pop(SIM_ENV, None)
    result = json.loads(out.read_text())
    result["total_s"] = time.perf_counter() - t0
    out.unlink()
    return result


def speed(nodes, icarus_nodes, threads, results):
    rows = results.setdefault("speed", [])
    points = [("verilator", n) for n in nodes] + [("icarus", n) for n in icarus_nodes]
    for k, (simulator, n) in enumerate(points):
        print(f"cluster speed: {simulator} {n} chips, point {k + 1} of {len(points)} "
              f"({len(points) - k - 1} left after it)", flush=True)
        topo = TOPOLOGY[n]
        th = threads if simulator == "verilator" else 1
        idle = _run(f"bench-speed-{simulator}-{n}", topo, "idle_speed", simulator, th,
                    cycles=20_000 if simulator == "verilator" else 2_000)
        # On Icarus enumerating and programming 4 hosts alone takes ~30k cycles: traffic
        # is measured on one chip only there.
        busy = None if simulator == "icarus" and n > 1 else _run(
            f"bench-speed-{simulator}-{n}", topo, "all_to_all_pio", simulator, th,
            stores=2 if n > 4 else 4, max_size=1024)
        row = {"simulator": simulator, "threads": th, "nodes": n, "topology": topo,
               "idle_cycles_per_s": idle["cycles_per_s"],
               "busy_cycles_per_s": busy and busy["cycles_per_s"],
               "busy_tlps": busy and busy["tlps"],
               "busy_cpu_s": busy and busy["cpu_s"], "busy_wall_s": busy and busy["wall_s"],
               "run": None}
        rows[:] = [r for r in rows if (r["simulator"], r["nodes"]) != (simulator, n)]
        rows.append(row)
        busy_text = "not measured" if busy is None else f"{busy['cycles_per_s']:8.0f}"
        print(f"speed {simulator} {n:2d} chips: idle {row['idle_cycles_per_s']:8.0f}, "
              f"all-to-all {busy_text} cycles/s", flush=True)


def build(results):
    from peach2.routes import Topology, cable_plan
    from peach2.sim.hdl import ClusterTop
    from peach2.sim.pcie import pipeline_cycles
    from peach2.sim.run import BUILD, emit_verilog
    from peach2.sim.run import build as verilator_build
    topo = Topology.parse("2x8")
    cycles = pipeline_cycles()
    top = ClusterTop(16, cable_plan(topo), cable={"tx_pipeline": cycles, "rx_pipeline": cycles})
    folder = BUILD / "bench" / "build-2x8"
    root = BUILD / "bench" / "build-cache"
    shutil.rmtree(root, ignore_errors=True)
    top.library_root = root
    t0 = time.perf_counter()
    sources = [emit_verilog(top, "cluster", folder / "cluster-vl.v", simulator="verilator")]
    emit_s = time.perf_counter() - t0
    times = []
    for _ in range(2):                  # cold (the chip and cable libraries too), then cached
        t0 = time.perf_counter()
        verilator_build(sources=[*sources, *top.extra_sources(folder, "verilator")],
                        toplevel=top.sim_toplevel, build_args=top.verilator_args, root=root)
        times.append(time.perf_counter() - t0)
    results["build"] = {"topology": "2x8", "emit_s": emit_s, "cold_s": times[0],
                        "cached_s": times[1]}
    print(f"build 2x8: Verilog {emit_s:.1f} s, Verilator cold {times[0]:.0f} s, cached "
          f"{times[1]:.2f} s", flush=True)


def latency(results):
    res = _run("bench-latency-2x8", "2x8", "pio_latency", "verilator", samples=3)
    results["latency"] = {"topology": "2x8", "by_hops": res["by_hops"],
                          "per_hop_ns": res["per_hop_ns"], "pipeline_ns": res["pipeline_ns"]}
    print(f"latency 2x8: {res['by_hops']} ns by hops, {res['per_hop_ns']:.0f} ns per extra hop",
          flush=True)


def measure(options, conditions=None, command="python tb/cluster/bench_cluster.py"):
    """Measure ``options["only"]`` (keeping the saved figures of the others) and save each
    part to ``docs/results/cluster.json`` as it finishes."""
    results = load("cluster") or {}
    start = started()
    for name in options["only"]:
        {"speed": lambda: speed(options["nodes"], options["icarus_nodes"], options["threads"],
                                results),
         "build": lambda: build(results), "latency": lambda: latency(results)}[name]()
        results["run"] = run_info(command, start, shortened(options), conditions)
        results.setdefault("parts", {})[name] = results["run"]
        for row in results.get("speed", []) if name == "speed" else ():
            if row.get("run", {}) is None:      # measured by this run
                row["run"] = {k: results["run"].get(k) for k in ("commit", "date", "conditions")}
        save("cluster", results)
    return results


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=_sections, default=list(PARTS),
                        help=f"comma-separated sections to measure ({', '.join(PARTS)}); "
                             "the others keep their saved results")
    parser.add_argument("--nodes", type=_nodes, default=None,
                        help="chip counts (1, 4, 8, 16) to measure on Verilator (default all)")
    parser.add_argument("--threads", type=_threads, default=2,
                        help="Verilator --threads of the speed builds, 1..8 (default 2)")
    parser.add_argument("--icarus-nodes", type=_nodes, default=None,
                        help="chip counts (1, 4, 8, 16) to measure idle on Icarus too "
                             "(default 1,4; traffic on one chip only)")
    parser.add_argument("--quick", action="store_true",
                        help=f"speed on {QUICK_NODES} chips (Verilator) and {QUICK_ICARUS} "
                             "(Icarus) only")
    parser.add_argument("--doc-only", action="store_true",
                        help="rebuild docs/benchmarks.md from the saved results")
    parser.add_argument("--conditions", default=None,
                        help="what else ran on the machine, recorded with the run (with "
                             "--doc-only: added to the saved run)")
    parser.add_argument("--command", default=None, help=argparse.SUPPRESS)  # peach2 bench's
    args = parser.parse_args(argv)
    results = load("cluster")
    if args.doc_only:
        if results is None:
            parser.error("no saved results in docs/results/cluster.json: run a measurement "
                         "first")
        if args.conditions:
            results.setdefault("run", {})["conditions"] = args.conditions
            save("cluster", results)
        rebuild()
        return
    options = quick_options() if args.quick else defaults()
    options.update(only=args.only, threads=args.threads,
                   **{k: v for k, v in (("nodes", args.nodes),
                                        ("icarus_nodes", args.icarus_nodes)) if v is not None})
    if shortened(options):
        print("cluster: shortened: " + "; ".join(shortened(options)), flush=True)
    measure(options, args.conditions,
            args.command or shlex.join(["python", "tb/cluster/bench_cluster.py", *argv]))
    rebuild()


if __name__ == "__main__":
    main()
