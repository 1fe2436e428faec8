"""Collectives on the HDL sub-cluster (``collectives_tb``), on Verilator.

The tops are exactly those of ``tb/cluster/cluster_run.py`` (same topology, cable credits
``TEST_CABLE`` and calibrated pipeline), so the Verilator builds in ``build/sim/_verilator`` are
shared with those tests; each topology runs all its collectives in one simulation.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from peach2.routes import Topology, cable_plan
from peach2.sim.collectives import INLINE_MAX
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.run import pick_simulator, run_cocotb

HERE = Path(__file__).parent


def _test_cable():
    """``TEST_CABLE`` of tb/cluster/cluster_run.py (read from there, so the builds match)."""
    spec = importlib.util.spec_from_file_location("_cluster_run",
                                                  HERE.parent / "cluster" / "cluster_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TEST_CABLE


def cluster_top(topology, cable="test", pipeline_ns=HARDIP_PIPELINE_NS, threads=1):
    """The ClusterTop of ``topology`` with the calibrated pipeline and ``cable`` credits:
    ``"test"`` (tb/cluster's small credits) or ``None`` (the cable model's defaults, as the
    benchmarks use)."""
    cycles = pipeline_cycles(pipeline_ns)
    extra = _test_cable() if cable == "test" else (cable or {})
    topo = Topology.parse(topology)
    return ClusterTop(topo.n_nodes, cable_plan(topo),
                      cable={"tx_pipeline": cycles, "rx_pipeline": cycles, **extra},
                      threads=threads)


def run(name, topology, testcase, seed=71, cable="test", threads=1, test_dir=HERE,
        simulator="verilator", **params):
    """Run ``collectives_tb``'s ``testcase`` on the cluster top of ``topology`` (Verilator;
    ``simulator="icarus"`` for a reduced case that must run there)."""
    wanted = simulator
    simulator = pick_simulator(simulator)
    if simulator == "icarus" and wanted != "icarus":
        pytest.skip(f"{topology}: multi-chip tops are too slow on Icarus (tens of cycles per "
                    "second); the collectives run on Verilator")
    params.setdefault("pipeline_ns", HARDIP_PIPELINE_NS)
    top = cluster_top(topology, cable, params["pipeline_ns"], threads)
    return run_cocotb(component=top, toplevel="cluster", test_module="collectives_tb",
                      name=name, test_dir=test_dir, testcase=testcase,
                      params={"topology": topology, **params}, seed=seed, simulator=simulator)


def test_ring4_collectives():
    """Ring of 4: Broadcast (1 B, 13 B, 4 KiB + 5 from roots 0 and 3), Allgather (blocks of
    1, 3, 16 and 300 B; ring Allgather of 5 and 300 B), halo exchange of N = 8 on 2x2 (pairwise
    and naive order), two senders into one receiver, the small-message cases
    (:data:`SMALL_CASES`); every host window byte-exact after each; a put from unmapped memory
    ends in the channel's DmaFault, puts to an unrouted node in PutFault."""
    run("coll-ring4", "ring:4", "collectives_check", bcast=[1, 13, 4101], roots=[0, 3],
        allgather=[1, 3, 16, 300], ring_allgather=[5, 300], halo=[[8, 2, 2]], collision=8192,
        fault=True, small=SMALL_CASES)


#: The small-message collectives by every path (``run(paths="auto")`` picks by size,
#: ``peach2.sim.collectives.paths``): 8 bytes (CPU stores where a step is one store, inline puts
#: above), 45-byte blocks (inline puts, two each, the second 13 bytes), blocks just over
#: INLINE_MAX (register mode: at most four transfers a step on 4 nodes), and 8 bytes as
#: chained DMAs.
SMALL_CASES = [[kind, size, paths] for kind in ("bcast", "direct_bcast", "allgather",
                                                "direct_allgather")
               for size, paths in ((8, "auto"), (45, "auto"), (INLINE_MAX + 76, "auto"),
                                   (8, "dma"))]


@pytest.mark.slow
def test_ring2_collectives_on_icarus():
    """A reduced case on four-state Icarus (X-propagation, which two-state Verilator cannot
    show): Broadcast of 13 B and Allgather of 3-byte blocks on a ring of 2, byte-exact.
    ``slow`` (110 s): the default suite's Icarus cases hold the DMA, PIO and link ports."""
    run("coll-ring2-icarus", "ring:2", "collectives_check", simulator="icarus", bcast=[13],
        allgather=[3])


@pytest.mark.slow
def test_double_ring_2x4_collectives():
    """2x4 (8 nodes): Broadcast (5 B, 2 KiB + 3), Allgather (1 B, 24 B), halo exchange of
    N = 16 on a 2x4 process grid (block and block-stride planes), the collision case.
    ``slow``: the default suite runs the same on the 2x4 in GPU memory (below)."""
    run("coll-2x4", "2x4", "collectives_check", seed=72, bcast=[5, 2051],
        allgather=[1, 24], halo=[[16, 2, 4]], collision=4096)


def test_ring4_collectives_in_gpu_memory():
    """Ring of 4 with one GPU per node, the data in GPU memory (DMAs read the local GPU's
    870 MB/s read path and write remote GPUs): Broadcast (13 B, 4 KiB + 5), Allgather (3 and
    300 B blocks), halo exchange of N = 8 on 2x2, the collision case; every host window and
    GPU memory byte-exact after each."""
    run("coll-ring4-gpu", "ring:4", "collectives_check", seed=74, gpu=True, bcast=[13, 4101],
        allgather=[3, 300], halo=[[8, 2, 2]], collision=4096)


def test_double_ring_2x4_collectives_in_gpu_memory():
    """2x4 (8 nodes) with one GPU per node, the data in GPU memory: Broadcast (5 B, 2 KiB + 3),
    Allgather (1 B and 24 B blocks), halo exchange of N = 16 on a 2x4 process grid (block and
    block-stride planes), the collision case."""
    run("coll-2x4-gpu", "2x4", "collectives_check", seed=75, gpu=True, bcast=[5, 2051],
        allgather=[1, 24], halo=[[16, 2, 4]], collision=4096)


def test_double_ring_2x8_collectives():
    """2x8 (16 nodes, the full sub-cluster): Broadcast of 100 B, Allgather of 7-byte blocks by
    recursive doubling and along the two rings then S."""
    run("coll-2x8", "2x8", "collectives_check", seed=73, bcast=[100], allgather=[7],
        ring_allgather=[7])


@pytest.mark.slow
def test_2x8_allgather_with_sleeping_models(tmp_path):
    """The run that found the sleeping hard-IP models' lost SOP (docs/collectives.md): a
    16-node Allgather of 8, 64, 512 and 4096-byte blocks with the default cable credits and
    sleeping N models, every result checked; it used to stop at 78654 ns with a
    tx-outside-packet violation."""
    out = tmp_path / "allgather.json"
    run("coll-2x8-sleeping", "2x8", "collectives_bench", cable=None, result_file=str(out),
        allgather_sizes=[8, 64, 512, 4096], host_size=1 << 21, buffer=(1 << 21) - (1 << 16))
    assert json.loads(out.read_text())["complete"]
