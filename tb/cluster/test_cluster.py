"""Sub-clusters with cables and clock in HDL (``peach2.sim.cluster_top``), hosts in Python.

Verilator runs the multi-chip tests (one build per topology and cable options, shared by the
tests).  Icarus cannot: at 4 chips it runs a few tens of cycles per second and bringing up four
hosts takes tens of thousands of cycles, so with ``--sim icarus`` they are skipped, saying so;
the one-chip test runs on Icarus by default and on Verilator with ``--sim verilator``, so the
HDL top and its clock wrapper are checked on both.  Each test names its topology;
``cluster_tb`` has the tests.
"""

from pathlib import Path

import pytest

from peach2.sim.calibration import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.cluster import cable_plan
from peach2.sim.cluster_layout import Topology
from peach2.sim.cluster_top import ClusterTop
from peach2.sim.runner import pick_simulator, run_cocotb

HERE = Path(__file__).parent


#: The cables of the default suite: the receiving hard IPs advertise small credits (4 headers,
#: 512 bytes of posted data), so that backpressure crosses the cables often and the ring
#: deadlock appears within microseconds; one cable configuration keeps it to one Verilator
#: build per topology.  The benchmarks use the default credits (``Cable``).
TEST_CABLE = {"rx_credits": (4, 32, 4, 4), "cpl_buffer": (4, 32)}


def run(name, topology, testcase=None, seed=61, chip=None, cable=TEST_CABLE,
        pipeline_ns=HARDIP_PIPELINE_NS, any_simulator=False, threads=1,
        test_module="cluster_tb", force_simulator=None, **params):
    """Build the HDL cluster of ``topology`` and run ``test_module`` (default ``cluster_tb``;
    all its tests or one).

    ``pipeline_ns`` is every hard IP's RX and TX latency: the N models' and the cables'
    (default: the calibrated value).  ``any_simulator`` runs several chips on Icarus too
    (the benchmarks' idle figures) instead of skipping.  ``threads``: Verilator's
    (:class:`~peach2.sim.cluster_top.ClusterTop`; 1 for tests, which may run side by side).
    """
    topo = Topology(1, {}) if topology == "single" else Topology.parse(topology)
    simulator = force_simulator or pick_simulator("icarus" if topo.n_nodes == 1 else "verilator")
    if simulator == "icarus" and topo.n_nodes > 1 and not any_simulator:
        pytest.skip(f"{topology}: {topo.n_nodes} chips are too slow on Icarus (tens of cycles "
                    "per second); the sub-cluster tests run on Verilator")
    cycles = pipeline_cycles(pipeline_ns)
    cable = {"tx_pipeline": cycles, "rx_pipeline": cycles, **(cable or {})}
    params["pipeline_ns"] = pipeline_ns
    top = ClusterTop(topo.n_nodes, cable_plan(topo), chip=chip, cable=cable,
                     threads=threads if simulator == "verilator" else 1)
    return run_cocotb(component=top, toplevel="cluster", test_module=test_module, name=name,
                      test_dir=HERE, testcase=testcase, params={"topology": topology, **params},
                      seed=seed, simulator=simulator)


def test_single_node_all_to_all():
    """One chip in the HDL top (no cable): its host stores into its own node and its DMA writes
    there too, with host pauses."""
    run("cluster-single", "single", "all_to_all_pio", seed=60, stores=8, dma=True, idle=0.1,
        backpressure=0.1)


def test_ring4_all_to_all():
    """Ring of 4: every host stores into every node and every node's DMA writes to every node,
    random sizes up to 4 KiB, seeded host pauses."""
    run("cluster-ring4", "ring:4", "all_to_all_pio", stores=4, dma=True, idle=0.1,
        backpressure=0.1)


def test_double_ring_2x4_all_to_all():
    """2x4 double ring (8 nodes): all-to-all PIO and DMA, random sizes up to 4 KiB, host
    pauses."""
    run("cluster-2x4", "2x4", "all_to_all_pio", seed=62, stores=2, dma=True, idle=0.1,
        backpressure=0.1)


def test_double_ring_2x8_all_to_all():
    """2x8 double ring (16 nodes, the full sub-cluster): all to all, one store and one DMA
    descriptor of up to 1 KiB per pair, safe routes (7 table entries per chip)."""
    run("cluster-2x8", "2x8", "all_to_all_pio", seed=64, stores=1, max_size=1024, dma=True)


def test_calibrated_pio_latency():
    """With the calibrated hard-IP pipeline a 4-byte PIO store reaches the neighbour's memory
    within 15% of 002's 782 ns, and each further hop adds 0.3-0.4 us (000 section 5.4)."""
    run("cluster-ring4-latency", "ring:4", "pio_latency", samples=3, check_calibration=True)


def test_ring4_shortest_routes_deadlock():
    """Ring of 4, everyone streams two hops east: shortest-path routes (all east) make a cycle
    of channel dependencies and the ring stops; the stuck links are named."""
    run("cluster-ring4-deadlock", "ring:4", "farthest_one_way", seed=63, routes="shortest",
        expect="deadlock", bytes=64 * 1024)


def test_ring4_safe_routes_finish():
    """The same traffic on the deadlock-free routes of ``peach2 routes`` arrives byte-exact."""
    run("cluster-ring4-safe", "ring:4", "farthest_one_way", seed=63, routes="safe",
        expect="complete", bytes=64 * 1024)
