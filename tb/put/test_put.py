"""The put engine in the chip (cocotb; docs/put.md), on Verilator: one chip sharing the router
tests' library build (``put_tb.py``), and two calibrated chips with a GPU each sharing the
calibration ping-pongs' build (``gpu_put_tb.py``)."""

import json
from pathlib import Path

import pytest

from peach2.routes import Topology, cable_plan
from peach2.sim.bench.calibration_doc import GPU_PUT_GOAL_NS
from peach2.sim.driver.device import GMPI_CALL_NS
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.run import SIM_BUILD, pick_simulator, run_cocotb
from peach2.top import PEACH2

HERE = Path(__file__).parent


@pytest.mark.parametrize("testcase", ["puts_against_model", "first_request_after_reset_is_a_put"])
def test_put_in_chip(testcase):
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="put_tb", name=f"put-{testcase}",
               test_dir=HERE, testcase=testcase, params={}, seed=41, simulator="verilator",
               library=True)


def gpu_puts(name="put-gpu", iters=2):
    """Run ``gpu_put_tb`` on the calibrated ``line:2`` top; return its figures."""
    if pick_simulator("verilator") == "icarus":
        pytest.skip("two chips are too slow on Icarus; the GPU puts run on Verilator")
    cycles = pipeline_cycles(HARDIP_PIPELINE_NS)
    top = ClusterTop(2, cable_plan(Topology.parse("line:2")),
                     cable={"tx_pipeline": cycles, "rx_pipeline": cycles})
    result = SIM_BUILD / name / "gpu_puts.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    run_cocotb(component=top, toplevel="cluster", test_module="gpu_put_tb", name=name,
               test_dir=HERE, testcase="gpu_puts", seed=43, simulator="verilator",
               params={"pipeline_ns": HARDIP_PIPELINE_NS, "iters": iters,
                       "result_file": str(result)})
    return json.loads(result.read_text())


def test_gpu_put_direct_and_through_gmpi():
    """A kernel's own put reaches the neighbour GPU's flag within the goal; through GMPI's
    daemon it pays 001's call overhead on top."""
    r = gpu_puts()
    direct, gmpi = r["direct"]["one_way_ns"], r["gmpi"]["one_way_ns"]
    assert direct <= GPU_PUT_GOAL_NS, direct
    assert gmpi >= direct + GMPI_CALL_NS, (gmpi, direct)
