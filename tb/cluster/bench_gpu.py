"""GPU read benchmark: a DMA whose source is the local GPU against one from host memory.

    python tb/benchmarks.py gpu [--quick]          (peach2 bench gpu)

On the HDL sub-cluster ``line:2`` (two chips, one cable with the default credits, calibrated
hard-IP pipeline; ``gpu_tb.gpu_read_rate``), node 0's DMA channel 0 runs a chain of ``DESCS``
descriptors of each size into node 1's host memory, once reading node 0's host memory (500 ns
read latency) and once reading its GPU 0 (``peach2.sim.gpu``: 870 MB/s read path after
500 ns).  Each rate (bytes / time from the DMA start to the last byte's arrival) is printed beside
the wire-format bound of the writes that arrived (Gen2 x8, 4-DW headers: 3.66 GB/s at 256-byte
payloads) and beside 002's measured GPU read ceiling (section 4.1.2: about 870 MB/s).  The
figures go to ``docs/results/gpu.json`` and the ``gpu`` section of ``docs/benchmarks.md``.
"""

import json

from test_cluster import run

from peach2.sim.gpu import GPU_READ_BANDWIDTH
from peach2.sim.runner import BUILD

DESCS = 16
FULL_SIZES = [256, 1024, 4096, 16384]
QUICK_SIZES = [1024, 16384]
TOPOLOGY = "line:2"


def quick_shortened():
    """What ``--quick`` leaves out."""
    return [f"descriptor sizes {QUICK_SIZES} instead of {FULL_SIZES}"]


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


def section(saved):
    """The section's (title, body) for ``bench_doc``."""
    points = saved["points"]
    sizes = sorted({p["size"] for p in points})
    rate = {(p["source"], p["size"]): p for p in points}
    lines = [
        "",
        f"A chained DMA of {points[0]['descs']} descriptors from node 0 to node 1's host memory "
        f"on the HDL sub-cluster `{saved.get('topology')}` (default cable credits, calibrated "
        f"hard-IP pipeline), reading node 0's host memory ({saved['host_read_latency_ns']:.0f} "
        "ns read latency) or its GPU "
        f"(`peach2.sim.gpu`: read path {saved['gpu_read_bandwidth'] / 1e6:.0f} MB/s after "
        f"{saved['gpu_read_latency_ns']:.0f} ns). Rate = bytes / time from the DMA start (the "
        "register write) to the last byte's arrival in host 1, descriptor fetches included. "
        "The model is described in [cluster](cluster.md), section GPUs.",
        "",
        "| descriptor size | from host memory, MB/s | from the GPU, MB/s | writes' wire bound, "
        "MB/s | 002 GPU read ceiling, MB/s |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in sizes:
        host, gpu = rate[("host", size)], rate[("gpu", size)]
        lines.append(f"| {size} | {host['mb_s']:.0f} | {gpu['mb_s']:.0f} | "
                     f"{host['bound_mb_s']:.0f} | ~870 |")
    lines += [
        "",
        "002 section 4.1.2 measured PEACH2's DMA reading K20 memory at about 870 MB/s at most, "
        "while writing into the GPU ran as fast as into host memory; the model's read path is "
        "set to that figure, so the GPU rows show the model's pipe behind the chip's DMA, not "
        "a new measurement. The host rows are the same DMA with the host's memory as the "
        "source, bounded by the wire format of the writes.",
    ]
    return "GPU memory as a DMA source (002 section 4.1.2)", "\n".join(lines)
