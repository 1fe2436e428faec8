"""A design compiled once by Verilator as a library and instantiated by other builds
(``peach2.sim.run.verilator.build_library``), as the sub-cluster tops use the chip.

An accumulator is the library; a top instantiates it twice with different inputs, and cocotb
checks both sums.  A second top reuses the library without building it again; a broken source
is refused with the log's name.
"""

from pathlib import Path

import pytest
from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from peach2.sim.run import SIM_BUILD, build_library, emit_verilog, run_cocotb

HERE = Path(__file__).parent


class Accumulator(wiring.Component):
    """``total`` grows by ``inc`` every cycle."""
    inc: In(8)
    total: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.total.eq(self.total + self.inc)
        return m


class Pair(wiring.Component):
    """Two accumulators, each an instance of module ``lib_acc``."""
    a: In(8)
    b: In(8)
    total_a: Out(16)
    total_b: Out(16)

    def __init__(self):
        super().__init__()
        self.libraries = []

    def elaborate(self, platform):
        m = Module()
        for name, inc, total in (("ua", self.a, self.total_a), ("ub", self.b, self.total_b)):
            m.submodules[name] = Instance("lib_acc", i_clk=ClockSignal(), i_rst=ResetSignal(),
                                          i_inc=inc, o_total=total)
        return m

    def extra_sources(self, build_dir, simulator, waves=False):
        netlist = emit_verilog(Accumulator(), "lib_acc", Path(build_dir) / "lib_acc.v",
                               simulator=simulator)
        if simulator != "verilator":
            return [netlist]
        wrapper, archive = build_library(source=netlist, module="lib_acc",
                                         root=SIM_BUILD / "_verilator")
        self.libraries.append(archive)
        return [wrapper, archive]


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_library_instances(simulator):
    """Both instances count their own input: the library holds state per instance."""
    top = Pair()
    run_cocotb(component=top, toplevel="lib_pair", test_module="library_tb",
               name=f"library-pair-{simulator}", test_dir=HERE, simulator=simulator)
    if simulator == "verilator":
        (archive,) = top.libraries
        assert archive.exists()


def test_library_built_once():
    """A second top finds the library built: its log is not written again."""
    first, second = Pair(), Pair()
    run_cocotb(component=first, toplevel="lib_pair", test_module="library_tb",
               name="library-pair-verilator", test_dir=HERE, simulator="verilator")
    log = first.libraries[0].parent / "build.log"
    stamp = log.stat().st_mtime_ns
    run_cocotb(component=second, toplevel="lib_pair2", test_module="library_tb",
               name="library-pair2-verilator", test_dir=HERE, simulator="verilator")
    assert second.libraries == first.libraries
    assert log.stat().st_mtime_ns == stamp
    # Verilator's runtime objects of the same flags come from the store, not compiled again.
    top2 = max(log.parents[1].glob("lib_pair2-*"), key=lambda d: d.stat().st_mtime)
    assert "verilated.cpp" not in (top2 / "build.log").read_text()
    assert (top2 / "verilated.o").exists()


def test_broken_library_source(tmp_path):
    """Verilator's error is reported with the build log's path, not swallowed."""
    source = tmp_path / "broken.v"
    source.write_text("module broken (input wire clk);\n  this is not verilog\nendmodule\n")
    with pytest.raises(RuntimeError, match=r"library build of broken failed: .*build\.log"):
        build_library(source=source, module="broken", root=tmp_path / "vl")
    log = next((tmp_path / "vl").glob("lib-broken-*/build.log"))
    assert "Error" in log.read_text()


def test_runtime_store_key(tmp_path, monkeypatch):
    """The runtime objects' store is chosen by what verilated.mk compiles them with: timing or
    tracing and ``OPT_GLOBAL`` give another store; the model's ``VM_PARALLEL_BUILDS`` and
    ``OPT_FAST`` (they never reach ``verilated.o``) do not."""
    from peach2.sim.run.verilator import runtime_key

    def key(parallel=1, timing=1, makeflags="OPT_FAST=-O2 OPT_GLOBAL=-O2"):
        folder = tmp_path / f"b{parallel}{timing}{len(makeflags)}"
        folder.mkdir(exist_ok=True)
        (folder / "Vtop_classes.mk").write_text(
            f"VM_TIMING = {timing}\nVM_PARALLEL_BUILDS = {parallel}\nVM_TRACE = 0\n"
            "VM_CLASSES_FAST += \\\n  Vtop \\\n\nVM_GLOBAL_FAST += \\\n  verilated \\\n")
        (folder / "Vtop.mk").write_text("VM_PROFC = 0\nVM_SC = 0\nVM_USER_CFLAGS = \\\n")
        monkeypatch.setenv("MAKEFLAGS", f"-j2 {makeflags}")
        return runtime_key(folder)

    base = key()
    assert key(parallel=0) == base
    assert key(makeflags="OPT_GLOBAL=-O2") == base
    assert key(timing=0) != base
    assert key(makeflags="OPT_FAST=-O2") != base          # runtime at make's -Os


def test_native_builds_are_keyed_by_the_processor(tmp_path, monkeypatch):
    """A build at FAST_O2 is compiled for this processor (``-march=native``), so its folder's
    key names the processor: another kind of processor gets a build of its own; a build
    without FAST_O2 runs anywhere and keeps one folder."""
    from peach2.sim.run import verilator
    monkeypatch.setattr(verilator, "_locked_build", lambda folder, work, make_vars=(): folder)
    src = tmp_path / "top.v"
    src.write_text("module top(input clk); endmodule\n")

    def folder(cpu, args):
        monkeypatch.setattr(verilator, "host_cpu", lambda: cpu)
        return verilator.build(sources=[src], toplevel="top", build_args=args, root=tmp_path)

    assert "-march=native" in " ".join(verilator._FAST_MAKE)
    assert folder("A", verilator.FAST_O2) != folder("B", verilator.FAST_O2)
    assert folder("A", verilator.FAST_O2) == folder("A", verilator.FAST_O2)
    assert folder("A", ()) == folder("B", ())
