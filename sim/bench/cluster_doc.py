"""The sub-cluster benchmark's options and its section of ``docs/benchmarks.md``.

The measurement itself runs the HDL sub-cluster (``tb/cluster/bench_cluster.py``, which
``peach2 bench cluster`` starts); what it measures by default and with ``--quick``
(:func:`defaults`, :func:`quick_options`, :func:`shortened`) and how its saved results read
(:func:`section`, for :mod:`peach2.sim.bench.doc`) live here, so that the document and the
benchmark runner need no testbench code.
"""

from peach2.sim.pcie import PER_HOP_NS, PIO_NEIGHBOUR_NS

from .results import stamp

__all__ = ["TOPOLOGY", "PARTS", "QUICK_NODES", "QUICK_ICARUS", "defaults", "quick_options",
           "shortened", "quick_shortened", "section"]

#: The topology measured for each chip count.
TOPOLOGY = {1: "single", 4: "ring:4", 8: "2x4", 16: "2x8"}
#: The parts of the section, each measured on its own (``--only``).
PARTS = ("speed", "build", "latency")
QUICK_NODES, QUICK_ICARUS = [1, 4], [1]


def defaults():
    """The full run's options (``bench_cluster.measure``)."""
    return {"only": list(PARTS), "nodes": list(TOPOLOGY), "icarus_nodes": [1, 4],
            "threads": 2}


def quick_options():
    """``--quick``: the speed points on fewer chips (the build and latency are one point each)."""
    return {**defaults(), "nodes": QUICK_NODES, "icarus_nodes": QUICK_ICARUS}


def shortened(options):
    """What ``options`` measure less of than the full run (speed points on fewer chips)."""
    full = defaults()
    out = []
    for key, simulator in (("nodes", "Verilator"), ("icarus_nodes", "Icarus")):
        if "speed" in options["only"] and set(options[key]) < set(full[key]):
            out.append(f"speed on chip counts {', '.join(map(str, options[key])) or 'none'} "
                       f"instead of {', '.join(map(str, full[key]))} ({simulator})")
    return out


def quick_shortened():
    return shortened(quick_options())


def section(results):
    """The section's (title, body) for :mod:`peach2.sim.bench.doc` (which adds the last run's stamp; parts
    kept from earlier runs are named here)."""
    lines = ["", "The HDL sub-cluster of `peach2.sim.hdl.cluster_top`: chips and cables in HDL, a "
             "Python host (root complex + N hard-IP model) per node. See [cluster](cluster.md).",
             ""]
    this = _same_run(results.get("run"))
    older = {part: run for part, run in results.get("parts", {}).items()
             if _same_run(run) != this}
    for part, run in sorted(older.items()):
        lines += [f"Kept from an earlier run, {part}: {stamp(run)}", ""]
    if results.get("speed"):
        lines += ["| simulator | threads | chips | topology | idle cycles/s | "
                  "all-to-all cycles/s | measured |",
                  "| --- | ---: | ---: | --- | ---: | ---: | --- |"]
        for r in sorted(results["speed"], key=lambda r: (r["simulator"] != "verilator",
                                                          r["nodes"])):
            busy = ("not measured" if r["busy_cycles_per_s"] is None
                    else f"{r['busy_cycles_per_s']:.0f}")
            lines.append(f"| {r['simulator']} | {r.get('threads', 1)} | {r['nodes']} | "
                         f"{r['topology']} | "
                         f"{r['idle_cycles_per_s']:.0f} | {busy} | {_row_run(r)} |")
        lines += ["", "Idle: reset, then the clock alone (no host enumerated). All-to-all: every "
                  "host stores into every node at once (1 B .. 1 KiB stores), from the first "
                  "store to the last arrival, byte-exact. On Icarus, enumerating and "
                  "programming four hosts alone takes tens of thousands of cycles, so its "
                  "traffic figure is for one chip only.", ""]
    if results.get("build"):
        b = results["build"]
        lines += [f"Build of the 16-chip (2x8) top on Verilator: {b['cold_s']:.0f} s cold "
                  f"(chip netlist from the cache; {b['emit_s']:.0f} s to write the Verilog), "
                  f"{b['cached_s']:.1f} s cached.", ""]
    if results.get("latency"):
        lat = results["latency"]
        lines += [f"4-byte PIO store from host 0 to each node of the 2x8, calibrated hard-IP "
                  f"pipeline {lat['pipeline_ns']:.0f} ns per crossing "
                  f"(`peach2.sim.pcie.calibration`):", "",
                  "| hops | latency (ns) | paper |", "| ---: | ---: | --- |"]
        for h, ns in sorted(lat["by_hops"].items(), key=lambda kv: int(kv[0])):
            paper = f"{PIO_NEIGHBOUR_NS:.0f} ns (002 section 4.2)" if int(h) == 1 else ""
            lines.append(f"| {h} | {ns:.0f} | {paper} |")
        lines += ["", f"Time per extra hop: {lat['per_hop_ns']:.0f} ns (least squares over the "
                  f"hop counts); 000 section 5.4: {PER_HOP_NS[0]:.0f}-{PER_HOP_NS[1]:.0f} ns."]
    return "Sub-cluster: simulation speed, build time, PIO latency per hop", "\n".join(lines)


def _same_run(run):
    """What names a run (its command, commit and date), to tell the parts it measured."""
    return run and (run.get("command"), run.get("commit"), run.get("date"))


def _row_run(row):
    """Where a speed row comes from (rows of one table may come from different runs)."""
    run = row.get("run") or {}
    text = f"{run.get('commit', '?')}, {run.get('date', '?')}"
    return f"{text}, {run['conditions']}" if run.get("conditions") else text
