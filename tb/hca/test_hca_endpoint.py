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


def test_endpoint_dma_leaves_what_the_cocotb_node_does_not_hold_to_the_fallback():
    """Outside its windows (or straddling one's end) EndpointDMA is the fallback, synchronous
    and with the fallback's times; inside, the synchronous calls are refused."""
    from peach2.sim.system import EndpointDMA
    from peach2.sim.verbs import HostMemory

    fallback, ref = HostMemory(), HostMemory()
    dma = EndpointDMA(None, None, 0, fallback, [(0x1000, 0x2000, 0x9_0000)])
    assert dma.bus(0x1800, 0x800) == 0x9_0800 and dma.bus(0x1ff0, 0x20) is None
    got = []
    dma.start_read(5, 0x3000, 64, lambda t, data: got.append((t, data)))
    assert got == [ref.read(5, 0x3000, 64)]
    assert dma.start_write(7, 0x1ff0, b"x" * 32, got.append) == ref.write(7, 0x1ff0, b"x" * 32)
    assert got[-1] == ref.write_time_ps(7, 32) and fallback.load(0x1ff0, 32) == b"x" * 32
    assert dma.reads == dma.writes == 0
    with pytest.raises(TypeError):
        dma.read(0, 0x1000, 8)
    with pytest.raises(TypeError):
        dma.write(0, 0x1000, b"12345678")
