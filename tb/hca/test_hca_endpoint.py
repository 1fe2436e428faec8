"""The InfiniBand HCA as a PCIe endpoint (``peach2.sim.pcie.hca``): enumeration, DMA reads of
host memory and GPUs (on its socket and across QPI), writes, and refused reads.  The cocotb
tests are in ``hca_endpoint_tb``; they need no HDL, so a counter is the toplevel (Icarus)."""

from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from peach2.sim.pcie import HcaFunction
from peach2.sim.run import run_cocotb

HERE = Path(__file__).parent


class Idle(wiring.Component):
    count: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(~self.count)
        return m


def test_hca_endpoint():
    run_cocotb(component=Idle(), toplevel="hca_idle", test_module="hca_endpoint_tb",
               name="hca-endpoint", test_dir=HERE, simulator="icarus")


def test_hca_function_refuses_bad_parameters():
    with pytest.raises(ValueError):
        HcaFunction(1000)
    with pytest.raises(ValueError):
        HcaFunction(qpi_p2p_bytes_per_s=0)
    f = HcaFunction(qpi_p2p_bytes_per_s=290e6)
    with pytest.raises(ValueError):
        f.add_range(0x1000, 0x2000, "gpu")
    f.add_range(0x1000, 0x2000, "qpi-peer")
    assert f.target(0x1800, 16) == "qpi-peer" and f.target(0x1ff8, 16) == "memory"
    with pytest.raises(ValueError):
        HcaFunction().add_range(0, 0x1000, "qpi-peer")      # no rate given
