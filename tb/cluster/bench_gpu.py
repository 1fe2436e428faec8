"""GPU read benchmark: a DMA whose source is the local GPU against one from host memory.

    python tb/bench/benchmarks.py gpu [--quick]    (peach2 bench gpu)

``tb/bench/benchmarks.py`` runs this script in a child process (``--out FILE``: the section's data
as JSON) and saves the section; the section's text is :mod:`peach2.sim.bench.gpu_doc`'s.

On the HDL sub-cluster ``line:2`` (two chips, one cable with the default credits, calibrated
hard-IP pipeline; ``gpu_tb.gpu_read_rate``), node 0's DMA channel 0 runs a chain of ``DESCS``
descriptors of each size into node 1's host memory, once reading node 0's host memory (500 ns
read latency) and once reading its GPU 0 (``peach2.sim.pcie.gpu``: 870 MB/s read path after
500 ns).  Each rate (bytes / time from the DMA start to the last byte's arrival) is printed beside
the wire-format bound of the writes that arrived (Gen2 x8, 4-DW headers: 3.66 GB/s at 256-byte
payloads) and beside 002's measured GPU read ceiling (section 4.1.2: about 870 MB/s).  The
figures go to ``docs/results/gpu.json`` and the ``gpu`` section of ``docs/benchmarks.md``.
"""

import argparse
import json
from pathlib import Path

from cluster_run import run

from peach2.sim.bench.gpu_doc import DESCS, FULL_SIZES, QUICK_SIZES, TOPOLOGY
from peach2.sim.pcie import GPU_READ_BANDWIDTH
from peach2.sim.run import BUILD


def measure(quick):
    """Run the points; print them; return the section's data (without its ``run`` entry)."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    result_file = BUILD / "bench" / "gpu_read_rate.json"
    result_file.parent.mkdir(parents=True, exist_ok=True)
    print(f"gpu: {DESCS} descriptors of {sizes} bytes, host memory and GPU as the source, on "
          f"{TOPOLOGY}", flush=True)
    run("bench-gpu-read", TOPOLOGY, "gpu_read_rate", seed=66, cable=None,
        test_module="gpu_tb", descs=DESCS, sizes=sizes, gpus=1,
        result_file=str(result_file))
    data = json.loads(result_file.read_text())
    for p in data["points"]:
        print(f"  {p['descs']} x {p['size']:>6} B from {p['source']:<4}: {p['mb_s']:7.0f} MB/s "
              f"(writes' wire bound {p['bound_mb_s']:.0f} MB/s; 002 GPU read ceiling "
              f"{GPU_READ_BANDWIDTH / 1e6:.0f} MB/s)", flush=True)
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description="GPU read benchmark (docs/benchmarks.md, gpu)")
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES} only")
    parser.add_argument("--out", type=Path, required=True,
                        help="write the section's data here as JSON")
    args = parser.parse_args(argv)
    args.out.write_text(json.dumps(measure(args.quick), indent=1))


if __name__ == "__main__":
    main()
