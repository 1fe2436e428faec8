"""cocotb on Icarus: the register block's outputs are defined from reset, and a read works.

Icarus (``-g2012``) leaves a Verilog ``always @*`` output X until one of its inputs changes; a
stream source that sees ``ready`` = X can send a beat twice.  This test catches such outputs.
"""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.csr.regmap import REGS
from peach2.sim.reference import tlp_to_beats
from peach2.tlp.stream import TLPBeat

INPUTS = ("i_req__valid", "i_req__payload", "o_cpl__ready", "completer_id", "port_status",
          "pcie_id", "count_inc")
OUTPUTS = ("i_req__ready", "o_cpl__valid", "o_cpl__payload", "bad_req", "node", "control",
           "offset_lo", "offset_hi", "node_offset", "pio_enable", "route_enable", "route",
           "route_target", "msi_req", "msi_num")


@cocotb.test()
async def outputs_defined_and_read(dut):
    Clock(dut.clk, 4, unit="ns").start()
    for name in INPUTS:
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    await ReadOnly()
    undefined = [n for n in OUTPUTS if not getattr(dut, n).value.is_resolvable]
    assert not undefined, f"outputs X/Z after reset: {undefined}"
    assert int(dut.i_req__ready.value) == 1

    await RisingEdge(dut.clk)
    req = Tlp()
    req.fmt_type = TlpType.MEM_READ
    req.requester_id = PcieId(1, 0, 0)
    req.tag = 5
    req.set_addr_be(REGS["ID"].offset, 4)
    beat = tlp_to_beats(req)[0]
    fields = {"hdr": beat.hdr, "data": 0, "dw_en": 0, "first": 1, "last": 1, "err": 0, "bar": 1}
    layout = TLPBeat.as_shape()
    dut.i_req__payload.value = sum(v << layout[k].offset for k, v in fields.items())
    dut.i_req__valid.value = 1
    taken = 0
    cpls = []
    dut.o_cpl__ready.value = 1
    for _ in range(40):
        await RisingEdge(dut.clk)               # values read here are those of the edge
        if dut.i_req__valid.value == 1 and dut.i_req__ready.value == 1:
            taken += 1
            dut.i_req__valid.value = 0
        if dut.o_cpl__valid.value == 1:
            cpls.append(int(dut.o_cpl__payload.value))
    assert taken == 1, f"request taken {taken} times"
    assert len(cpls) == 1, f"{len(cpls)} completions"
    assert cpls[0] >> layout["data"].offset & 0xffffffff == REGS["ID"].value
