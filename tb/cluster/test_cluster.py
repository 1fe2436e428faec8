"""Sub-clusters with cables and clock in HDL (``peach2.sim.cluster_top``), hosts in Python.

Verilator runs these (one build per topology and options, shared by the tests); ``--sim icarus``
runs them on Icarus, much slower.  Each test names its topology; ``cluster_tb`` has the tests.
"""

from pathlib import Path

import pytest

from peach2.sim.cluster import cable_plan
from peach2.sim.cluster_top import ClusterTop
from peach2.sim.runner import run_cocotb

HERE = Path(__file__).parent


def topology_of(text):
    from cluster_tb import parse_topology    # noqa: the cocotb module's own parser
    return parse_topology(text)


def run(name, topology, testcase=None, seed=61, chip=None, cable=None, **params):
    """Build the HDL cluster of ``topology`` and run ``cluster_tb`` (all tests or one)."""
    import sys
    sys.path.insert(0, str(HERE))
    topo = topology_of(topology)
    top = ClusterTop(topo.n_nodes, cable_plan(topo), chip=chip, cable=cable)
    return run_cocotb(component=top, toplevel="cluster", test_module="cluster_tb", name=name,
                      test_dir=HERE, testcase=testcase, params={"topology": topology, **params},
                      seed=seed, simulator="verilator")


def test_ring4_all_to_all():
    """Ring of 4: every host stores into every node, random sizes up to 4 KiB, host pauses."""
    run("cluster-ring4", "ring:4", "all_to_all_pio", stores=4)


def test_double_ring_2x4_all_to_all():
    """2x4 double ring (8 nodes): all to all, random sizes up to 4 KiB, no host pauses."""
    run("cluster-2x4", "2x4", "all_to_all_pio", seed=62, stores=2)
