"""The Python API's defaults are the realistic, deadlock-free configuration (as the CLI's)."""

import inspect

from peach2.sim.driver import Driver
from peach2.sim.harness import Cluster
from peach2.sim.pcie import HARDIP_PIPELINE_NS


def test_cluster_defaults():
    params = inspect.signature(Cluster).parameters
    assert params["routes"].default == "safe"
    assert params["hardip_pipeline_ns"].default == HARDIP_PIPELINE_NS > 0
    assert params["hdl_cables"].default is None      # read from the top


def test_driver_program_default():
    assert inspect.signature(Driver.program).parameters["routes"].default == "safe"


class _Top:
    """Stands for a cocotb top: only the pins the check looks at."""

    def __init__(self, hdl):
        if hdl:
            self.c0_rst_out = object()


def test_hdl_cables_must_match_the_top():
    from peach2.routes import Topology, default_address_map
    for hdl in (False, True):
        try:
            Cluster(_Top(hdl), Topology.ring(2), default_address_map(2), hdl_cables=not hdl)
        except ValueError as err:
            assert "hdl_cables" in str(err)
        else:
            raise AssertionError("a contradicting hdl_cables was accepted")
