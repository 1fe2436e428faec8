"""The ``peach2`` command: generate the top module, its header and configuration; errors."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from peach2 import cli, convert
from peach2 import cli_options as opt
from peach2.cli import IO_ERROR, MAX_JOBS, MAX_PATHS, main
from peach2.progress import Progress
from peach2.routes import MAX_NODES
from peach2.top import MAX_BUFFER_BEATS, MAX_ROUTES, MIN_BUFFER_BEATS, MIN_ROUTES, PEACH2, TX_DEPTH


def test_help(capsys):
    assert main([]) == 0
    assert "generate" in capsys.readouterr().out


def test_generate_writes_checked_top(tmp_path, capsys):
    assert main(["generate", "-o", str(tmp_path), "--routes", "12", "--s-role", "ep"]) == 0
    captured = capsys.readouterr()
    # One progress line per step, then what was written: every message on standard error.
    assert captured.out == ""
    lines = captured.err.splitlines()
    steps = [re.sub(r"^\[\s*[\d.]+ s\] ", "", line) for line in lines if line.startswith("[")]
    assert steps == ["elaborating peach2...", "converting to Verilog (RTLIL, then Yosys)...",
                     "compiling in Icarus Verilog..."]
    assert [line.split(" (")[0] for line in lines[3:]] == [
        f"wrote {tmp_path / name}" for name in ("peach2.v", "peach2_regs.h", "peach2_config.json")
    ] + ["checked: Icarus Verilog compiles peach2.v"]
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
     f"--routes: must be {MIN_ROUTES}..{MAX_ROUTES}, got {MAX_ROUTES + 1}"),
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
    assert f"entries of the chip's route table, {MIN_ROUTES}..{MAX_ROUTES}" in text
    assert f"{MIN_BUFFER_BEATS}..{MAX_BUFFER_BEATS}" in text
    assert f"1..{TX_DEPTH}" in text and "0 for store-and-forward" in text


@pytest.mark.parametrize("command", ["generate", "regmap", "synth-report", "routes"])
def test_routes_option_is_one_thing(capsys, command):
    """--routes is the chip's route-table size in every command: one range, one help text,
    the same bad-value line; and every command's help lists exit status 4."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"--routes N entries of the chip's route table, {MIN_ROUTES}..{MAX_ROUTES};" in text
    assert f"{IO_ERROR} an output cannot be written" in text or \
        f"{IO_ERROR} the output cannot be written" in text
    extra = ["--topology", "ring:4"] if command == "routes" else []
    err = _bad_option(capsys, [command, *extra, "--routes", str(MIN_ROUTES - 1)])
    assert err.endswith(f"--routes: must be {MIN_ROUTES}..{MAX_ROUTES}, got {MIN_ROUTES - 1}")


# -- outputs: checked before work, I/O failures one line with their own status ------------

def _io_error(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    assert code == IO_ERROR == 4, (code, out.err)
    assert out.err.count("\n") == 1 and "Traceback" not in out.err, out.err
    return out


@pytest.mark.parametrize("argv", [
    ["regmap", "-o", "{bad}/regs.h"],
    ["routes", "--topology", "2x4", "-o", "{bad}/routes.h"],
    ["generate", "--no-check", "-o", "{bad}/build"],
    ["generate", "--platform", "peach2", "-o", "{bad}/quartus"],
    ["synth-report", "-o", "{bad}/synthesis.md"],
    ["synth-report", "--keep", "{bad}/yosys"],
], ids=lambda a: " ".join(a[:2]))
def test_unwritable_output_refused_before_work(tmp_path, capsys, no_design, argv):
    """Under a plain file, and in /proc: one line naming the path, status 4, and the core is
    never built (``no_design``) because the check comes first."""
    plain = tmp_path / "plain"
    plain.write_text("keep")
    for bad in (str(plain), "/proc"):
        if bad == "/proc" and not Path("/proc/self").exists():
            continue
        args = [a.replace("{bad}", bad) for a in argv]
        out = _io_error(capsys, args)
        assert out.out == ""
        assert out.err.startswith(f"peach2 {argv[0]}: error: cannot write {bad}/"), out.err
    assert plain.read_text() == "keep"


def test_write_failure_after_the_check_is_one_line(tmp_path, capsys, monkeypatch):
    """The disk fills up while writing: the same one line and status 4, no traceback."""
    def full(self, text, *a, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_text", full)
    out = _io_error(capsys, ["regmap", "-o", str(tmp_path / "regs.md")])
    assert out.err == (f"peach2 regmap: error: cannot write {tmp_path / 'regs.md'}: No space "
                       f"left on device\n")


def test_messages_on_stderr_and_missing_folders_made(tmp_path, capsys):
    """regmap and routes alike: the data on standard output or in the file; ``made folder``
    and ``wrote`` on standard error."""
    for argv in (["regmap", "--format", "json"], ["routes", "--topology", "ring:4"]):
        target = tmp_path / argv[0] / "deeper" / "out.txt"
        assert main([*argv, "-o", str(target)]) == 0
        out = capsys.readouterr()
        assert out.out == "" and target.stat().st_size > 0
        assert out.err.splitlines()[:3] == [f"made folder {tmp_path / argv[0]}/",
                                            f"made folder {target.parent}/", f"wrote {target}"]


def test_check_writable_says_what_it_would_make(tmp_path):
    assert opt.check_writable(tmp_path / "x" / "y" / "f.h") == [tmp_path / "x", tmp_path / "x" / "y"]
    assert opt.check_writable(tmp_path / "d", folder=True) == [tmp_path / "d"]
    assert opt.check_writable(tmp_path / "f.h") == []
    assert not (tmp_path / "x").exists() and list(tmp_path.iterdir()) == []


def test_python_dash_m_peach2():
    """``python -m peach2`` is the ``peach2`` command."""
    run = subprocess.run([sys.executable, "-m", "peach2", "--version"], capture_output=True,
                         text=True)
    assert run.returncode == 0 and run.stdout.startswith("peach2 ")
    run = subprocess.run([sys.executable, "-m", "peach2", "regmap", "--format", "c"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "#define" in run.stdout and run.stderr == ""
    assert cli.main.__module__ == "peach2.cli"


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
