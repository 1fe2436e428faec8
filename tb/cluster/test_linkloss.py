"""Link loss and chip reset under traffic on a ring of 4 (``linkloss_tb``, docs/errors.md
"Reset and link loss").  Same HDL top and Verilator build as
``test_cluster.py::test_ring4_all_to_all``.  And a register read right after a chip reset, on
the one-chip HDL top (the smallest the cluster harness builds; Icarus by default, as
``test_cluster.py::test_single_node_all_to_all``)."""

from pathlib import Path

import pytest

from peach2.routes import Topology, cable_plan
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.run import run_cocotb

HERE = Path(__file__).parent


@pytest.mark.parametrize("testcase", ["cable_down_ring4", "chip_reset_ring4"])
def test_linkloss_ring4(testcase):
    from cluster_run import TEST_CABLE  # the cables of test_ring4_all_to_all (one build)
    topo = Topology.parse("ring:4")
    cycles = pipeline_cycles(HARDIP_PIPELINE_NS)
    cable = {"tx_pipeline": cycles, "rx_pipeline": cycles, **TEST_CABLE}
    top = ClusterTop(topo.n_nodes, cable_plan(topo), cable=cable, threads=1)
    run_cocotb(component=top, toplevel="cluster", test_module="linkloss_tb",
               name=f"cluster-ring4-{testcase}", test_dir=HERE, testcase=testcase,
               params={"topology": "ring:4", "pipeline_ns": HARDIP_PIPELINE_NS,
                       "idle": 0.1, "backpressure": 0.1},
               seed=19, simulator="verilator")


def test_read_after_chip_reset():
    """Chip 0 reset through ``c0_reset``, a register read at once: answered; then programmed
    again and used."""
    from cluster_run import run
    run("cluster-single-read-after-reset", "single", "read_after_chip_reset",
        test_module="linkloss_tb", seed=65)
