"""The synthesis flow: Quartus project of the PEACH2 board, hard-IP wrapper, Yosys report.

No Quartus here: the tests read the project files the Amaranth Intel platform writes, simulate
the configuration-bus sampler, and run the Yosys flow on a small design (the full core's report
is a slow test).
"""

import contextlib
import fnmatch
import io
import re
from pathlib import Path

import pytest
from amaranth.build import Attrs
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from amaranth_boards.resources import UARTResource

from peach2.cli import main
from peach2.platform.board import PLACEHOLDER, board_resources
from peach2.platform.hardip import ConfigSampler
from peach2.synth.fingerprint import from_document
from peach2.synth.report import BEGIN, END, to_markdown, update_document
from peach2.synth.synthesis import LEVEL_BUDGET, block_paths, synthesize

PORTS = "news"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project as ``peach2 generate --platform peach2 --s-role ep`` writes it (one
    conversion of the whole chip for every test here): ``(s_role, folder, files, stdout,
    stderr)``.  W is a root port here, so both hard-IP variants are in the project.  The core
    with S a root port (the README's ``peach2 generate``) is the Verilog Icarus compiles in
    ``tb/router/test_router_icarus.py`` (the same conversion); ``tb/cli`` generates and
    compiles S as EP."""
    out = tmp_path_factory.mktemp("quartus") / "q"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main(["generate", "--platform", "peach2", "-o", str(out), "--s-role", "ep"]) == 0
    return "ep", out, sorted(out.iterdir()), stdout.getvalue(), stderr.getvalue()


def _module_body(verilog, name):
    match = re.search(rf"^module \\{re.escape(name)} \(.*?^endmodule", verilog, re.S | re.M)
    assert match, f"module {name} missing"
    return match.group(0)


def test_project_files(project):
    _, out, files, _, _ = project
    assert {f.name for f in files} >= {"peach2.qsf", "peach2.sdc", "peach2.v", "build_peach2.sh"}
    script = (out / "build_peach2.sh").read_text()
    for tool in ("QUARTUS_MAP", "QUARTUS_FIT", "QUARTUS_ASM", "QUARTUS_STA"):
        assert f'"${tool}" --rev=peach2 peach2' in script


def test_qsf_device_pins_and_variants(project):
    _, out, _, _, _ = project
    qsf = (out / "peach2.qsf").read_text()
    assert "set_global_assignment -name DEVICE EP4SGX530KH40C2" in qsf
    assert 'set_global_assignment -name FAMILY "Stratix IV"' in qsf
    assert "set_global_assignment -name TOP_LEVEL_ENTITY peach2" in qsf
    for variant in ("peach2_hip_ep", "peach2_hip_rp"):
        assert f"set_global_assignment -name QIP_FILE {variant}.qip" in qsf
    for index in range(4):
        assert re.search(rf'"pcie_{index}__refclk__io" -name IO_STANDARD "HCSL"', qsf)
        for lane in range(8):
            for kind in ("rx", "tx"):
                assert f'"pcie_{index}__{kind}__io\\[{lane}]" -name IO_STANDARD "1.4-V PCML"' \
                    in qsf
    # Unpublished pins are flagged, never assigned.
    active = [line for line in qsf.splitlines() if line.startswith("set_location_assignment")]
    assert not [line for line in active if PLACEHOLDER in line]
    flagged = [line for line in qsf.splitlines() if line.startswith("# PLACEHOLDER")]
    assert len(flagged) == 4 * (1 + 1 + 8 + 8) + 2          # pcie x4, clk100, rst
    assert all(f"PIN_{PLACEHOLDER}" in line for line in flagged)


def _sdc_commands(sdc):
    """The SDC's commands, one string each (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", sdc)
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_sdc_clocks_at_pins_and_derived(project):
    """Reference clocks at their pins, every other clock derived; no clock put on a net."""
    _, out, _, _, _ = project
    commands = _sdc_commands((out / "peach2.sdc").read_text())
    created = [c for c in commands if c.startswith("create_clock")]
    assert all("[get_ports " in c for c in created) and len(created) == 5
    assert re.search(r'create_clock -name "clk100_0__io" -period 10\.0', created[0])
    for index in range(4):
        assert any(re.search(rf'-name "pcie_{index}__refclk__io" -period 10\.0', c)
                   for c in created)
    derive = commands.index("derive_pll_clocks")
    assert commands[derive + 1] == "derive_clock_uncertainty"
    assert max(commands.index(c) for c in created) < derive
    # One asynchronous group per source: the free clock and each reference clock, each with
    # the clocks derived under the instance it feeds.
    groups = [c for c in commands if c.startswith("set_clock_groups")]
    assert len(groups) == 1 and "-asynchronous" in groups[0]
    members = re.findall(r"-group \[get_clocks \{([^}]*)\}\]", groups[0])
    assert [set(m.split()) for m in members] == [
        {"clk100_0__io", "reconfig_pll|*"},
        *({f"pcie_{i}__refclk__io", f"hip_{p}|*"} for i, p in enumerate(PORTS))]
    assert len(re.findall(r"set_multicycle_path -end -setup .*tl_cfg_ctl\[\*\]\}\] 3",
                          "\n".join(commands))) == 1
    assert len(re.findall(r"set_multicycle_path -end -setup .*tl_cfg_ctl_wr\}\] 2",
                          "\n".join(commands))) == 1
    assert "set_false_path -from [get_ports {pcie_*__perst__io rst_0__io}]" in commands


def test_sdc_names_only_what_the_project_has(project):
    """Every object the SDC names exists: ports of the top, clocks it creates or derives under
    an instance of the top, and vendor-internal keepers under a hard-IP variant the QSF lists
    (<variant>_core, <variant>_serdes: the vendor generator's own names)."""
    _, out, _, _, _ = project
    verilog = (out / "peach2.v").read_text()
    header = re.search(r"^module peach2\((.*?)\);", verilog, re.S | re.M).group(1)
    ports = {p.strip() for p in header.split(",")}
    top = re.search(r"^module peach2\(.*?^endmodule", verilog, re.S | re.M).group(0)
    instances = set(re.findall(r"^  \\peach2\.\w+\s+(\w+) \(", top, re.M))
    variants = re.findall(r"QIP_FILE (\w+)\.qip", (out / "peach2.qsf").read_text())
    assert {"hip_n", "hip_e", "hip_w", "hip_s", "reconfig_pll"} <= instances and variants
    commands = _sdc_commands((out / "peach2.sdc").read_text())
    clocks = {m for c in commands for m in re.findall(r'create_clock -name "([^"]+)"', c)}
    seen = set()
    for command in commands:
        for kind, names in re.findall(r"\[(get_\w+) (?:-\w+ )*(\{[^}]*\}|\"[^\"]*\"|\S+)\]",
                                      command):
            seen.add(kind)
            for name in names.strip('{}"').split():
                if kind == "get_ports":
                    assert fnmatch.filter(ports, name), name
                elif kind == "get_clocks" and "|" not in name:
                    assert fnmatch.filter(clocks, name), name
                elif kind == "get_clocks":
                    assert name.split("|")[0] in instances, name
                elif kind == "get_keepers":
                    entity = name.split("|")[0].split(":")[0]
                    assert any(fnmatch.fnmatch(f"{v}_{entity.split('_')[-1]}", entity)
                               for v in variants) and entity.startswith("*_"), name
                else:
                    raise AssertionError(f"{kind} {name}: a kind of object this test does not "
                                         f"check")
    assert seen == {"get_ports", "get_clocks", "get_keepers"}


def test_four_hard_ip_instances(project):
    s_role, out, _, _, _ = project
    verilog = (out / "peach2.v").read_text()
    roles = {"n": "ep", "e": "ep", "w": "rc", "s": s_role}
    module = {"ep": "peach2_hip_ep_plus", "rc": "peach2_hip_rp_plus"}
    for index, port in enumerate(PORTS):
        body = _module_body(verilog, f"peach2.hip_{port}")
        instances = re.findall(r"^  (peach2_hip_\w+) hip \(", body, re.M)
        assert instances == [module[roles[port]]], port
        assert f".refclk(pcie_{index}__refclk__io)" in body
        for lane in range(8):
            assert f".rx_in{lane}(pcie_{index}__rx__io[{lane}])" in body
            assert f".tx_out{lane}(pcie_{index}__tx__io[{lane}])" in body
        for pin in ("rx_st_data0", "rx_st_ready0", "tx_st_data0", "tx_st_ready0", "tx_cred0",
                    "ltssm", "tl_cfg_ctl", "pld_clk", "core_clk_out", "srstn", "test_in"):
            assert f".{pin}(" in body, (port, pin)
        assert (".app_msi_req(" in body) == (roles[port] == "ep")
    # core_clk_out of N clocks the core and pld_clk of all four; one PLL for the free clocks.
    top = re.search(r"^module peach2\(.*?^endmodule", verilog, re.S | re.M).group(0)
    hip_n = re.search(r"\\peach2\.hip_n\s+hip_n \((.*?)\);", top, re.S).group(1)
    clock = re.search(r"\.core_clk_out\(([^)]+)\)", hip_n).group(1)
    assert f"assign core_clk = {clock};" in top
    for port in "ews":
        inst = re.search(rf"\\peach2\.hip_{port}\s+hip_{port} \((.*?)\);", top, re.S).group(1)
        assert f".pld_clk({clock})" in inst
    assert "pld_clk(core_clk_out)" in _module_body(verilog, "peach2.hip_n")
    assert re.search(r"altpll #\(", verilog) and ".clk1_multiply_by(32'd5)" in verilog


def test_pin_file_locations_are_used():
    resources, placeholders = board_resources({"pcie_n": {"rx": ["AK1", "?", "AK3"]},
                                               "clk100": {"pins": ["AC35"]}})
    by_name = {(r.name, r.number): r for r in resources}
    assert by_name[("clk100", 0)].ios[0].names == ["AC35"]
    rx = next(s for s in by_name[("pcie", 0)].ios if s.name == "rx").ios[0].names
    assert rx[0] == "AK1" and rx[2] == "AK3" and rx[1].startswith(PLACEHOLDER)
    assert "AK1" not in placeholders and rx[1] in placeholders


def test_ordinary_resources_from_amaranth_boards():
    """RS-232C, DDR3 and its SPD bus are amaranth-boards' helpers with the pin file's pins."""
    resources, placeholders = board_resources({"uart": {"tx": ["AB12"]}})
    by_name = {(r.name, r.number): r for r in resources}
    expected = UARTResource(0, rx=f"{PLACEHOLDER}uart_rx", tx="AB12",
                            attrs=Attrs(IO_STANDARD="2.5 V"))
    assert repr(by_name[("uart", 0)]) == repr(expected)
    ddr3 = {s.name: s for s in by_name[("ddr3", 0)].ios}
    assert set(ddr3) >= {"clk", "clk_en", "cs", "dq", "dqs", "dm", "odt", "rst"}
    assert len(ddr3["dq"].ios[0].names) == 64 and len(ddr3["cs"].ios[0].names) == 2
    assert [s.name for s in by_name[("ddr3_spd", 0)].ios] == ["scl", "sda"]
    assert {"eth_rgmii", "lcd_hd44780"} <= {name for name, _ in by_name}
    assert "AB12" not in placeholders and f"{PLACEHOLDER}uart_rx" in placeholders
    assert f"{PLACEHOLDER}ddr3_dq63" in placeholders


def test_config_sampler():
    """Bus/device number taken from tl_cfg_add 0xF once the tl_cfg_ctl_wr toggle has passed
    three registers (vendor's altpcierd_tl_cfg_sample); other registers are ignored."""
    dut = ConfigSampler()
    sim = Simulator(dut)
    sim.add_clock(4e-9)
    seen = []

    async def testbench(ctx):
        async def present(add, ctl, cycles=8):
            ctx.set(dut.tl_cfg_add, add)
            ctx.set(dut.tl_cfg_ctl, ctl)
            ctx.set(dut.tl_cfg_ctl_wr, 1 - ctx.get(dut.tl_cfg_ctl_wr))
            for _ in range(cycles):
                await ctx.tick()
                seen.append(ctx.get(dut.pcie_id))
        await present(0x2, 0xFFFF_FFFF)
        assert ctx.get(dut.pcie_id) == 0
        bus, dev = 0x5A, 0x13
        await present(0xF, 0xFFFF_E000 | (bus << 5) | dev, cycles=2)
        assert ctx.get(dut.pcie_id) == 0            # not yet: the toggle is still in flight
        for _ in range(2):
            await ctx.tick()
        assert ctx.get(dut.busdev) == (bus << 5) | dev
        assert ctx.get(dut.pcie_id) == (bus << 8) | (dev << 3)
        await present(0x0, 0)                       # another register: ID kept
        assert ctx.get(dut.pcie_id) == (bus << 8) | (dev << 3)

    sim.add_testbench(testbench)
    sim.run()


def test_cli_generate_platform(project):
    _, out, _, stdout, text = project
    assert stdout == ""             # every message on standard error, nothing on standard output
    assert "EP4SGX530KH40C2" in text and "N EP, E EP, W RC, S EP" in text
    steps = [re.sub(r"^\[\s*[\d.]+ s\] ", "", line) for line in text.splitlines()
             if line.startswith("[")]
    assert [step.split(" ")[0] for step in steps] == ["elaborating", "converting", "writing"]
    assert "quartus_sh --flow compile peach2" in text and "sh build_peach2.sh" in text
    assert "hardip_variants.md" in text
    assert (out / "peach2.qsf").exists()
    assert not (out / "peach2_regs.h").exists()
    verilog = (out / "peach2.v").read_text()
    for port, variant in (("n", "ep"), ("e", "ep"), ("w", "rp"), ("s", "ep")):
        assert f"peach2_hip_{variant}_plus hip (" in _module_body(verilog, f"peach2.hip_{port}")


class _Adder(wiring.Component):
    """Registered 32-bit adder: a carry chain, one LUT level in the ALM mapping."""
    a: In(32)
    b: In(32)
    s: Out(32)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.s.eq(self.a + self.b)
        return m


class _Parity(wiring.Component):
    """Registered inputs, a combinational 64-input XOR out of the block, and a small memory."""
    i: In(64)
    o: Out(1)
    addr: In(4)
    data: Out(8)

    def elaborate(self, platform):
        m = Module()
        r = Signal(64)
        m.d.sync += r.eq(self.i)
        m.d.comb += self.o.eq(r.xor())
        m.submodules.mem = mem = Memory(shape=8, depth=16, init=[])
        write, read = mem.write_port(), mem.read_port()
        m.d.comb += [write.addr.eq(self.i[4:8]), write.data.eq(self.i[8:16]),
                     write.en.eq(self.i[16]), read.addr.eq(self.addr), self.data.eq(read.data)]
        return m


class _Toy(wiring.Component):
    """Two blocks and glue: the parity output crosses into a register in the top."""
    a: In(32)
    b: In(32)
    s: Out(32)
    i: In(128)
    o: Out(1)
    data: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.adder = adder = _Adder()
        m.submodules.parity = parity = _Parity()
        m.d.comb += [adder.a.eq(self.a), adder.b.eq(self.b), self.s.eq(adder.s),
                     parity.i.eq(self.i[:64] ^ self.i[64:]), parity.addr.eq(self.i[:4]),
                     self.data.eq(parity.data)]
        m.d.sync += self.o.eq(parity.o ^ self.i[0])
        return m


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory):
    lines = []
    report = synthesize(_Toy(), jobs=2, workdir=tmp_path_factory.mktemp("yosys"),
                        parameters={"toy": 1}, design={}, progress=lines.append)
    report.progress = lines
    return report


def test_synth_progress(toy_report):
    """A line per step, and one per Yosys run as it ends with how many are left."""
    lines = toy_report.progress
    assert lines[:3] == ["elaborating peach2...",
                         "converting to RTLIL...", "running Yosys on 3 netlists, 2 at once..."]
    finished = [line for line in lines if line.startswith("Yosys finished")]
    assert len(finished) == 3 and finished[-1].endswith("(0 of 3 left)")
    assert {re.match(r"Yosys finished (.*) \(", f).group(1) for f in finished} == {
        "adder", "parity", "the glue logic"}
    assert lines[-2:] == [f"measuring logic depth across the core ({flow} mapping)..."
                          for flow in ("generic", "alm")]


def test_synth_blocks_found_and_counted(toy_report):
    blocks = {b.name: b for b in toy_report.blocks}
    assert set(blocks) == {"adder", "parity", "(top)"}
    assert blocks["adder"].kind == "_Adder" and blocks["parity"].kind == "_Parity"
    assert blocks["adder"].generic["ff"] == 32 and blocks["parity"].generic["ff"] >= 64
    assert blocks["parity"].generic["mem_bits"] == 16 * 8
    assert blocks["adder"].alm["arith"] >= 32 and blocks["adder"].alm_estimate >= 16
    assert blocks["(top)"].generic["ff"] == 1


def test_synth_depth_across_blocks(toy_report):
    blocks = {b.name: b for b in toy_report.blocks}
    # The carry chain costs one level in the ALM mapping, several as generic LUTs.
    assert blocks["adder"].depth["alm"].levels <= 2 < blocks["adder"].depth["generic"].levels
    # 64-input XOR in parity, one more XOR in the top: a path from parity into the top.
    worst = toy_report.paths["generic"][0]
    path = blocks["(top)"].depth["generic"]
    assert path.blocks == ["parity", "(top)"] and path.levels >= 3
    assert worst.levels >= path.levels


def test_synth_only_some_blocks(tmp_path):
    """``synth-report --only``: one block's own paths, its ports taken as registers."""
    lines = []
    found = block_paths(_Toy(), ["parity"], jobs=1, workdir=tmp_path, name="toy",
                        progress=lines.append)
    assert set(found) == {"parity"}
    assert lines == ["elaborating toy...", "converting to RTLIL...",
                     "running Yosys on 1 netlist, 1 at once...",
                     "Yosys finished parity (0 of 1 left)"]
    worst = found["parity"][0]
    # The 64-input XOR from the input register to the output pin: three 6-input LUT levels.
    assert worst.levels >= 3 and worst.end == ("parity", "pin o")
    assert worst.nets[0].startswith("parity/") and len(worst.nets) == worst.levels + 1
    assert not (tmp_path / "adder_alm.json").exists()
    with pytest.raises(ValueError, match="no block nope"):
        block_paths(_Toy(), ["nope"], workdir=tmp_path, name="toy")


def test_synth_markdown(toy_report):
    text = to_markdown(toy_report)
    assert text.startswith(BEGIN) and text.rstrip().endswith(END)
    assert "| `adder` | _Adder |" in text and "EP4SGX530" in text
    assert f"budget {LEVEL_BUDGET}" in text
    # What it was made from (design {}: _Toy()), for tb/synth/test_synthesis_fingerprint.py.
    fp = from_document(text)
    assert fp == toy_report.fingerprint and set(fp["blocks"]) == {"adder", "parity"}
    assert f"RTLIL SHA-256 `{fp['rtlil'][:16]}`" in text
    doc = update_document("# Title\n\nflow text\n", text)
    again = update_document(doc.replace("| `adder`", "| `old`"), text)
    assert again == doc and doc.startswith("# Title")


@pytest.mark.slow
def test_synth_report_of_the_core(tmp_path, capsys):
    """The whole core synthesised again gives docs/synthesis.md's report, figure for figure
    (all but the run time), with the same Yosys: the document is the design's."""
    out = tmp_path / "synthesis.md"
    assert main(["synth-report", "-o", str(out)]) == 0
    text = out.read_text()
    for block in ("csr", "xbar", "ur", "n_rx", "n_tx", "n_ingress", "n_buffer"):
        assert f"| `{block}` |" in text
    assert "Total against the EP4SGX530" in text

    def section(doc):
        part = doc[doc.index(BEGIN):doc.index(END)]
        return re.sub(r"Run time: \d+ s\.", "Run time: - s.", part)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "synthesis.md").read_text()
    tool = re.search(r"Tool: (.*?)\. ", section(doc)).group(1)
    if tool not in section(text):
        pytest.skip(f"docs/synthesis.md was made with {tool}, another Yosys")
    assert section(text) == section(doc), \
        "docs/synthesis.md differs from a fresh report: run `peach2 synth-report -o docs/synthesis.md`"
