"""What a ``RisingEdge`` callback sees, per simulator and clock source, against
``peach2.sim.hardip.model.edge_shows_update`` (``HardIPModel(hdl_clock=...)`` counts its ready latencies
by it).

Icarus shows the registers before the edge's update, and so does Verilator when a cocotb
``Clock`` drives the clock; Verilator with the clock made in the HDL shows them after it
(docs/sim/run.md, "What a RisingEdge callback sees").  A free-running counter, its clock from cocotb or from a
Verilog wrapper, on both simulators (``pytest --sim`` runs all four on one).
"""

from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from peach2.sim.run import run_cocotb

HERE = Path(__file__).parent


class Counter(wiring.Component):
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(self.count + 1)
        return m


class WrappedCounter(Counter):
    """The counter inside a wrapper that makes the clock (``always #2``)."""
    sim_toplevel = "edges_wrap"
    verilator_args = ("--timing",)

    def extra_sources(self, build_dir, simulator, waves=False):
        path = Path(build_dir) / "edges_wrap.v"
        path.write_text("`timescale 1ns/1ps\n"
                        "module edges_wrap (input wire rst, output wire [7:0] count);\n"
                        "    reg clk = 1'b0;\n"
                        "    always #2 clk = ~clk;\n"
                        "    edges u (.clk(clk), .rst(rst), .count(count));\n"
                        "endmodule\n")
        return [path]


@pytest.mark.parametrize("clock", ["cocotb", "hdl"])
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_edge_shows_update(simulator, clock):
    run_cocotb(component=Counter() if clock == "cocotb" else WrappedCounter(), toplevel="edges",
               test_module="edges_tb", name=f"edges-{simulator}-{clock}", test_dir=HERE,
               params={"clock": clock}, simulator=simulator)
