"""Text of the ``gpu`` section of ``docs/benchmarks.md`` and its options.

The measurement is ``tb/cluster/bench_gpu.py`` (run by ``peach2 bench gpu`` in a
child process, since it imports its test folder's ``test_cluster``); this module holds what the
package's document builder (:mod:`peach2.sim.bench.doc`) and ``tb/bench/benchmarks.py`` need of
it.
"""

__all__ = ["DESCS", "FULL_SIZES", "QUICK_SIZES", "TOPOLOGY", "quick_shortened", "section"]

DESCS = 16
FULL_SIZES = [256, 1024, 4096, 16384]
QUICK_SIZES = [1024, 16384]
TOPOLOGY = "line:2"


def quick_shortened():
    """What ``--quick`` leaves out."""
    return [f"descriptor sizes {QUICK_SIZES} instead of {FULL_SIZES}"]


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
        f"(`peach2.sim.pcie.gpu`: read path {saved['gpu_read_bandwidth'] / 1e6:.0f} MB/s after "
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
