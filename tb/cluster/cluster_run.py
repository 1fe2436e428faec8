"""Build the HDL sub-cluster of a topology and run one of this folder's cocotb modules on it.

Shared by the tests (``test_cluster.py``) and the GPU benchmark (``bench_gpu.py``).
"""

from pathlib import Path

import pytest

from peach2.routes import Topology, cable_plan
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.run import pick_simulator, run_cocotb

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
    (:class:`~peach2.sim.hdl.cluster_top.ClusterTop`; 1 for tests, which may run side by side).
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
