"""The PEACH2 side of the calibration: ping-pongs between two neighbour nodes on Verilator.

    python tb/bench/benchmarks.py calibration [--quick]    (peach2 bench calibration)

``tb/bench/benchmarks.py`` runs this script in a child process (``--out FILE``: the measured
data as JSON), adds the MPI side (:mod:`peach2.sim.mpi.pingpong`) and saves the section; the
section's text is :mod:`peach2.sim.bench.calibration_doc`'s.  One simulation of ``pingpong_tb``
on the HDL sub-cluster ``line:2`` (default cable credits, calibrated hard-IP pipeline) measures
the PIO and DMA 8-byte rows and the GPU-to-GPU curve of 000 Figure 4 for each GPU read rate of
:data:`~peach2.sim.bench.calibration_doc.GPU_READS`.  A second simulation of the same build,
``tb/put/gpu_put_tb.py``, measures the 8-byte put a GPU kernel starts itself, directly and
through GMPI's host daemon (``gpu_put`` in the data).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from peach2.routes import Topology, cable_plan
from peach2.sim.bench.calibration_doc import PATH_SIZES, TOPOLOGY, tca_sizes
from peach2.sim.bench.results import follow
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.run import BUILD, pick_simulator, run_cocotb

HERE = Path(__file__).resolve().parent
#: Timed puts of each path from a GPU kernel (after a warm-up); the median is the figure.
GPU_PUT_ITERS = 5


def simulate(name, curves, topology=TOPOLOGY, cable=None, iters=1, seed=81, progress_file=None,
             test=("pingpong_tb", "pingpong", HERE), **params):
    """Run ``pingpong_tb`` once on Verilator; return its JSON result.

    ``curves``: ``[(name, GPU read bytes per second, sizes)]``, one GPU-to-GPU curve each
    (:func:`~peach2.sim.bench.calibration_doc.tca_sizes`); ``cable``: extra cable parameters
    (None: the cable model's default credits, as the other benchmarks); ``test``: the cocotb
    module, test and folder to run on that build instead."""
    module, testcase, folder = test
    cycles = pipeline_cycles(HARDIP_PIPELINE_NS)
    topo = Topology(1, {}) if topology == "single" else Topology.parse(topology)
    top = ClusterTop(topo.n_nodes, cable_plan(topo),
                     cable={"tx_pipeline": cycles, "rx_pipeline": cycles, **(cable or {})})
    with tempfile.TemporaryDirectory() as tmp:
        result_file = Path(tmp) / "pingpong.json"
        run_cocotb(component=top, toplevel="cluster", test_module=module, name=name,
                   test_dir=folder, testcase=testcase, seed=seed,
                   simulator=pick_simulator("verilator"),
                   params={"topology": topology, "pipeline_ns": HARDIP_PIPELINE_NS,
                           "curves": [[n, rate, list(s)] for n, rate, s in curves],
                           "iters": iters, "result_file": str(result_file),
                           "progress_file": progress_file, **params})
        return json.loads(result_file.read_text())


def measure(quick):
    """The full (or quick) run, its progress printed; returns the data."""
    curves = tca_sizes(quick)
    print("calibration: PIO and DMA 8-byte ping-pongs, then GPU-to-GPU ping-pongs on "
          f"{TOPOLOGY}: " + ", ".join(f"{len(s)} sizes up to {max(s)} B reading the GPU at "
                                     f"{rate / 1e6:.0f} MB/s ({name})"
                                     for name, rate, s in curves), flush=True)
    progress = BUILD / "bench" / "calibration.progress"
    data = follow(progress, simulate, "bench-calibration", curves,
                  progress_file=str(progress), path_sizes=PATH_SIZES)
    if not data.get("complete"):
        raise RuntimeError("the ping-pong simulation did not complete")
    print(f"calibration: {GPU_PUT_ITERS} 8-byte puts from a GPU kernel on {TOPOLOGY}, directly "
          "and through GMPI's host daemon", flush=True)
    data["gpu_put"] = simulate("bench-calibration-gpu-put", [], iters=GPU_PUT_ITERS, seed=43,
                               test=("gpu_put_tb", "gpu_puts", HERE.parent / "put"))
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description="PEACH2 ping-pongs of the calibration section "
                                                 "(docs/benchmarks.md, calibration)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes (see --help of "
                        "tb/bench/benchmarks.py)")
    parser.add_argument("--out", type=Path, required=True,
                        help="write the measured data here as JSON")
    args = parser.parse_args(argv)
    args.out.write_text(json.dumps(measure(args.quick), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
