"""The ``peach2`` command: generate the top module, its header and configuration; errors."""

import json
import re

import pytest

from peach2.cli import main


def test_help(capsys):
    assert main([]) == 0
    assert "generate" in capsys.readouterr().out


def test_generate_writes_checked_top(tmp_path, capsys):
    assert main(["generate", "-o", str(tmp_path), "--routes", "12", "--s-role", "ep"]) == 0
    out = capsys.readouterr().out
    assert "checked: Icarus Verilog compiles peach2.v" in out
    verilog = (tmp_path / "peach2.v").read_text()
    assert re.search(r"^module peach2\(", verilog, re.MULTILINE)
    config = json.loads((tmp_path / "peach2_config.json").read_text())
    assert config["parameters"]["routes"] == 12
    assert config["port_roles"] == {"n": "ep", "e": "ep", "w": "rc", "s": "ep"}
    pins = {p["name"]: p for p in config["pins"]}
    for port in "news":
        assert pins[f"{port}_rx_st_data"] == {"name": f"{port}_rx_st_data", "dir": "in",
                                              "width": 128}
        assert pins[f"{port}_tx_st_ready"]["dir"] == "in"
        assert re.search(rf"\binput \[127:0\] {port}_rx_st_data;", verilog)
    assert "PEACH2_ROUTE_COUNT 12u" in (tmp_path / "peach2_regs.h").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--routes", "4"], "at least 8"),
    (["--tx-start-level", "-1"], "start_level must be in 1.."),
])
def test_generate_rejects_bad_options(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "-o", str(tmp_path), "--no-check", *argv])
    assert exc.value.code != 0
    captured = capsys.readouterr()
    assert message in captured.err + str(exc.value.code)
