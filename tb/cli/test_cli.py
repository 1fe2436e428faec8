"""The ``peach2`` command: generate the top module, its header and configuration; errors."""

import json
import re

import pytest

from peach2 import convert
from peach2.cli import MAX_JOBS, MAX_PATHS, main
from peach2.progress import Progress
from peach2.routes import MAX_NODES
from peach2.top import MAX_BUFFER_BEATS, MAX_ROUTES, MIN_BUFFER_BEATS, MIN_ROUTES, PEACH2, TX_DEPTH


def test_help(capsys):
    assert main([]) == 0
    assert "generate" in capsys.readouterr().out


def test_generate_writes_checked_top(tmp_path, capsys):
    assert main(["generate", "-o", str(tmp_path), "--routes", "12", "--s-role", "ep"]) == 0
    captured = capsys.readouterr()
    assert "checked: Icarus Verilog compiles peach2.v" in captured.out
    # One progress line per step on standard error; only results on standard output.
    steps = [re.sub(r"^\[\s*[\d.]+ s\] ", "", line) for line in captured.err.splitlines()]
    assert steps == ["elaborating peach2...", "converting to Verilog (RTLIL, then Yosys)...",
                     "compiling in Icarus Verilog..."]
    assert "[" not in captured.out
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


def test_progress_lines():
    times = iter([10.0, 10.0, 12.25, 75.5])
    lines = []

    class Stream:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    progress = Progress(Stream(), clock=lambda: next(times))
    progress("elaborating...")
    progress("converting...")
    assert progress.elapsed == 65.5
    assert "".join(lines) == "[   0.0 s] elaborating...\n[   2.2 s] converting...\n"


@pytest.fixture
def no_design(monkeypatch):
    """Fail the test if anything builds the core: option errors must come before any work."""
    def refuse(self, **kwargs):
        raise AssertionError("the core was built before the options were checked")
    monkeypatch.setattr(PEACH2, "__init__", refuse)


DESIGN_LIMITS = [
    # option, too small, too large, one-line message part
    ("--routes", str(MIN_ROUTES - 1), str(MAX_ROUTES + 1), f"{MIN_ROUTES}..{MAX_ROUTES}"),
    ("--buffer-beats", str(MIN_BUFFER_BEATS - 1), "1000000000",
     f"{MIN_BUFFER_BEATS}..{MAX_BUFFER_BEATS}"),
    ("--tx-start-level", "-1", str(TX_DEPTH + 1), f"0..{TX_DEPTH}"),
]
COMMANDS = [["generate", "--no-check"], ["regmap"], ["synth-report"]]


def _bad_option(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("option, low, high, limits", DESIGN_LIMITS, ids=lambda v: str(v))
def test_design_option_limits(tmp_path, capsys, no_design, command, option, low, high, limits):
    out = tmp_path / "out"
    for value, shown in ((low, low), (high, high), ("abc", "'abc'"), ("1.5", "'1.5'")):
        argv = [*command, *(["-o", str(out)] if command[0] == "generate" else []),
                option, value]
        err = _bad_option(capsys, argv)
        assert err.startswith(f"peach2 {command[0]}: error: {option}: must be ")
        assert limits in err and err.endswith(f"got {shown}"), err
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["synth-report", "-j", "0"], f"--jobs: must be 1..{MAX_JOBS}, got 0"),
    (["synth-report", "-j", str(MAX_JOBS + 1)], f"--jobs: must be 1..{MAX_JOBS}, got "
                                                 f"{MAX_JOBS + 1}"),
    (["synth-report", "--paths", "0"], f"--paths: must be 1..{MAX_PATHS}, got 0"),
    (["synth-report", "--paths", "x"], f"--paths: must be a whole number 1..{MAX_PATHS}, "
                                      f"got 'x'"),
    (["synth-report", "--only", "dma,,n ingress"], "--only: must be comma-separated"),
    (["generate", "--s-role", "xx"], "--s-role: invalid choice: 'xx'"),
    (["generate", "--platform", "de4"], "--platform: invalid choice: 'de4'"),
    (["regmap", "--format", "pdf"], "--format: invalid choice: 'pdf'"),
    (["routes", "--topology", "ring:4", "--node", str(MAX_NODES)],
     f"--node: must be 0..{MAX_NODES - 1}, got {MAX_NODES}"),
    (["routes", "--topology", "ring:4", "--routes", str(MAX_ROUTES + 1)],
     f"--routes: must be 1..{MAX_ROUTES}, got {MAX_ROUTES + 1}"),
    (["routes", "--topology", "ring:4", "--node-size", "12k"], "must be a power of two"),
    (["routes", "--topology", "ring:99"], "--topology: "),
])
def test_other_option_limits(capsys, no_design, argv, message):
    assert message in _bad_option(capsys, argv)


def test_output_paths_checked(tmp_path, capsys, no_design):
    a_file = tmp_path / "f.txt"
    a_file.write_text("keep")
    err = _bad_option(capsys, ["generate", "-o", str(a_file)])
    assert "--output: " in err and "is not a folder" in err
    err = _bad_option(capsys, ["regmap", "-o", str(tmp_path)])
    assert "--output: " in err and "is a folder" in err
    assert a_file.read_text() == "keep"


def test_help_shows_limits(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"routing table entries, {MIN_ROUTES}..{MAX_ROUTES}" in text
    assert f"{MIN_BUFFER_BEATS}..{MAX_BUFFER_BEATS}" in text
    assert f"1..{TX_DEPTH}" in text and "0 for store-and-forward" in text


def test_failed_generate_leaves_no_output(tmp_path, capsys, monkeypatch):
    """Icarus rejects the Verilog: nothing is written, an existing folder keeps its files."""
    monkeypatch.setattr(convert, "to_verilog", lambda top, name, progress: "module peach2(;\n")
    fresh = tmp_path / "fresh"
    with pytest.raises(SystemExit) as exc:
        main(["generate", "-o", str(fresh)])
    assert "iverilog rejected peach2.v" in str(exc.value.code)
    assert not fresh.exists()
    old = tmp_path / "old"
    old.mkdir()
    (old / "peach2.v").write_text("// the previous run\n")
    with pytest.raises(SystemExit):
        main(["generate", "-o", str(old)])
    assert [p.name for p in old.iterdir()] == ["peach2.v"]
    assert (old / "peach2.v").read_text() == "// the previous run\n"
