"""Sub-clusters with cables and clock in HDL (``peach2.sim.hdl.cluster_top``), hosts in Python.

Verilator runs the multi-chip tests (one build per topology and cable options, shared by the
tests).  Icarus cannot: at 4 chips it runs a few tens of cycles per second and bringing up four
hosts takes tens of thousands of cycles, so with ``--sim icarus`` they are skipped, saying so;
the one-chip test (``slow``) runs on Icarus by default and on Verilator with ``--sim
verilator``; the one-node soak and chip reset check the HDL top and its clock wrapper on Icarus
by default.  Each test names its topology;
``cluster_tb`` has the tests.
"""

import pytest
from cluster_run import run


@pytest.mark.slow
def test_single_node_all_to_all():
    """One chip in the HDL top (no cable): its host stores into its own node and its DMA writes
    there too, with host pauses.  ``slow``: a top of its own for one test; the one-chip paths
    run by default in tb/dma and in the one-node soak."""
    run("cluster-single", "single", "all_to_all_pio", seed=60, stores=8, dma=True, idle=0.1,
        backpressure=0.1)


def test_ring4_all_to_all():
    """Ring of 4: every host stores into every node and every node's DMA writes to every node,
    random sizes up to 4 KiB, seeded host pauses."""
    run("cluster-ring4", "ring:4", "all_to_all_pio", stores=4, dma=True, idle=0.1,
        backpressure=0.1)


@pytest.mark.slow
def test_double_ring_2x4_all_to_all():
    """2x4 double ring (8 nodes): all-to-all PIO and DMA, random sizes up to 4 KiB, host
    pauses.  ``slow``: the default suite runs the 2x8's all-to-all and the 2x4's collectives."""
    run("cluster-2x4", "2x4", "all_to_all_pio", seed=62, stores=2, dma=True, idle=0.1,
        backpressure=0.1)


def test_double_ring_2x8_all_to_all():
    """2x8 double ring (16 nodes, the full sub-cluster): all to all, one store and one DMA
    descriptor of up to 256 bytes per pair, safe routes (7 table entries per chip).  Larger
    transfers cross the same paths in the ring of 4 and the 2x8's collectives."""
    run("cluster-2x8", "2x8", "all_to_all_pio", seed=64, stores=1, max_size=256, dma=True)


#: Bytes each node of the ring of 4 streams two hops east in the deadlock tests: enough to
#: fill every link's credits on the cycle (it stops within the first 4 KiB chunks).
RING_STREAM = 24 * 1024


def test_calibrated_pio_latency():
    """With the calibrated hard-IP pipeline a 4-byte PIO store reaches the neighbour's memory in
    002's 782 ns (within 3%: the one figure fitted), and each further hop adds 0.3-0.4 us (000
    section 5.4: a validation, nothing was fitted to it)."""
    run("cluster-ring4-latency", "ring:4", "pio_latency", samples=3, check_calibration=True)


def test_ring4_shortest_routes_deadlock():
    """Ring of 4, everyone streams two hops east: shortest-path routes (all east) make a cycle
    of channel dependencies and the ring stops; the links stuck waiting for credits must be
    exactly that cycle as `peach2 routes` finds it (RouteSet.cycle_names)."""
    run("cluster-ring4-deadlock", "ring:4", "farthest_one_way", seed=63, routes="shortest",
        expect="deadlock", bytes=RING_STREAM)


def test_ring4_safe_routes_finish():
    """The same traffic on the deadlock-free routes of ``peach2 routes`` arrives byte-exact."""
    run("cluster-ring4-safe", "ring:4", "farthest_one_way", seed=63, routes="safe",
        expect="complete", bytes=RING_STREAM)
