"""Write protection on a ring of 4 (``protect_cluster_tb``, docs/errors.md): PIO and
DMA from the other nodes into node 0's windows.  Same HDL top and Verilator build as
``test_cluster.py::test_ring4_all_to_all``."""

from pathlib import Path

from peach2.routes import Topology, cable_plan
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.run import run_cocotb

HERE = Path(__file__).parent


def test_protection_ring4():
    from cluster_run import TEST_CABLE  # the cables of test_ring4_all_to_all (one build)
    topo = Topology.parse("ring:4")
    cycles = pipeline_cycles(HARDIP_PIPELINE_NS)
    cable = {"tx_pipeline": cycles, "rx_pipeline": cycles, **TEST_CABLE}
    top = ClusterTop(topo.n_nodes, cable_plan(topo), cable=cable, threads=1)
    run_cocotb(component=top, toplevel="cluster", test_module="protect_cluster_tb",
               name="cluster-ring4-protect", test_dir=HERE, testcase="protection_ring4",
               params={"topology": "ring:4", "pipeline_ns": HARDIP_PIPELINE_NS,
                       "idle": 0.1, "backpressure": 0.1},
               seed=65, simulator="verilator")
