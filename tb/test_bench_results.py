"""Saved benchmark results and the document rebuilt from them (no simulation).

A run saves only the sections it measured; the rebuild renders every section that has a saved
file and keeps the text of the others, so no run removes figures it did not measure; a quick
run's stamp says what it shortened; ``peach2 bench`` answers bad input with one line.
"""

import json
from pathlib import Path

import benchmarks
import pytest

from peach2 import cli, cli_bench
from peach2.sim import bench_cluster_doc, bench_doc, bench_results

HERE = Path(__file__).resolve().parent

ROUTER = {"latency": [{"from": "E", "to": "W", "bytes": 4, "cycles": 12}],
          "all_ports_busy": [{"name": "N -> E", "tlps": 300, "gbps": 3.657,
                              "bound_gbps": 3.657, "fraction": 1.0}],
          "pio": {"pio_latency": []}}


@pytest.fixture
def results(tmp_path, monkeypatch):
    """An empty docs/results/ of our own, and a document path beside it."""
    monkeypatch.setattr(bench_results, "RESULTS", tmp_path / "results")
    return tmp_path / "benchmarks.md"


def test_rebuild_renders_saved_sections_and_keeps_the_others(results):
    results.write_text("# Benchmarks\n\nold head\n\n<!-- adapters:begin -->\nADAPTERS TEXT\n"
                       "<!-- adapters:end -->\n<!-- dma:begin -->\n## DMA\n\nDMA TEXT\n"
                       "<!-- dma:end -->\n")
    run = bench_results.run_info("python tb/benchmarks.py router --quick",
                                 bench_results.started(),
                                 ["all-ports-busy flows of 300 TLPs instead of 1000"])
    bench_results.save("router", {"run": run, **ROUTER})
    assert bench_doc.rebuild(results) == ["router"]
    text = results.read_text()
    assert "ADAPTERS TEXT" in text and "DMA TEXT" in text
    assert "old head" not in text
    assert "| N -> E | 300 | 3.657 | 3.657 | 100.0% |" in text
    assert "Measured by `python tb/benchmarks.py router --quick`" in text
    assert "Shortened against the full run: all-ports-busy flows of 300 TLPs instead of 1000." in text
    assert "Not measured yet: `peach2 bench cluster`" in text
    for name in bench_results.SECTIONS:     # every section between its markers, in order
        assert text.count(f"<!-- {name}:begin -->") == 1
    order = [text.index(f"<!-- {name}:begin -->") for name in bench_results.SECTIONS]
    assert order == sorted(order)
    bench_doc.rebuild(results)               # the rebuild is its own fixed point
    assert results.read_text() == text


def test_a_second_run_replaces_only_its_own_section(results):
    bench_results.save("router", {"run": bench_results.run_info("first", bench_results.started()), **ROUTER})
    bench_doc.rebuild(results)
    results.write_text(results.read_text().replace("<!-- dma:begin -->\n",
                                                   "<!-- dma:begin -->\nDMA KEPT\n"))
    again = {**ROUTER, "latency": [{"from": "N", "to": "E", "bytes": 256, "cycles": 11}]}
    bench_results.save("router", {"run": bench_results.run_info("second", bench_results.started()), **again})
    bench_doc.rebuild(results)
    text = results.read_text()
    assert "DMA KEPT" in text
    assert "| N -> E | 256 | 11 | 44 |" in text and "| E -> W | 4 | 12 | 48 |" not in text
    assert "`second`" in text and "`first`" not in text


def test_save_wants_a_known_section_and_a_run(results):
    with pytest.raises(ValueError):
        bench_results.save("routers", {"run": {}})
    with pytest.raises(ValueError):
        bench_results.save("router", dict(ROUTER))
    assert not (bench_results.RESULTS / "routers.json").exists()


def test_saved_file_names_its_run(results):
    start = {**bench_results.started(), "load": 0.5}
    start["time"] -= 3.2
    bench_results.save("router", {"run": bench_results.run_info("cmd", start, ["less"], "busy"),
                                  **ROUTER})
    run = json.loads((bench_results.RESULTS / "router.json").read_text())["run"]
    assert run["command"] == "cmd" and run["seconds"] == 3 and run["shortened"] == ["less"]
    assert run["load"][0] == 0.5 and len(run["load"]) == 2
    assert "load 0.5 at the start" in bench_doc.stamp(run)
    assert run["conditions"] == "busy" and run["commit"] and run["date"]


def test_quick_says_what_it_shortens():
    dma = benchmarks.shortened("dma", quick=True)
    assert any("chains of 32 transfers instead of 128" in s for s in dma)
    assert any("128 KiB per point at most instead of 512 KiB" in s for s in dma)
    # The DMA run in docs/benchmarks.md: --quick with the full chain and bytes per point.
    kept = benchmarks.shortened("dma", quick=True, chain=128, max_total=1 << 19)
    assert not any("chain" in s for s in kept) and any("sizes" in s for s in kept)
    assert benchmarks.shortened("dma", quick=False) == []
    assert benchmarks.shortened("adapters", quick=True) == ["200 TLPs per point instead of 1000"]
    assert benchmarks.shortened("router", quick=False) == []


def test_progress_lines_count_down(capsys):
    progress = bench_results.Progress("demo", 3)
    for label in "abc":
        progress.point(label)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["demo: 3 points", "demo: point 1 of 3 done (a), 2 left",
                     "demo: point 2 of 3 done (b), 1 left", "demo: point 3 of 3 done (c), 0 left"]


def test_follow_prints_what_the_job_appends(tmp_path, capsys):
    log = tmp_path / "progress.log"

    def job(n):
        for k in range(n):
            with open(log, "a") as f:
                f.write(f"line {k}\n")
        return n
    assert bench_results.follow(log, job, 3, every=0.01) == 3
    assert capsys.readouterr().out.splitlines() == ["line 0", "line 1", "line 2"]


@pytest.mark.parametrize("argv, message", [
    (["bench", "routers"], "sections are adapters, router, dma, cluster, gpu, collectives, not routers"),
    (["bench", "router", "--figures", "halo"], "go with the dma section alone"),
    (["bench", "dma", "--figures", "chain"], "figures are chain128, single, chain4k, halo"),
    (["bench", "dma", "--chain", "0"], "--chain must be at least 1"),
    (["bench", "dma", "--read-latency", "-1"], "--read-latency must be 0 or more"),
    (["bench", "router", "--doc-only"], "--doc-only measures nothing"),
])
def test_bench_bad_input_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("peach2 bench: error:")


def test_bench_without_source_tree_says_how_to_get_it(monkeypatch, capsys):
    monkeypatch.setattr(cli_bench, "benchmarks_script", lambda: None)
    assert cli_bench.main(["router"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: peach2 bench runs the repository's benchmark code")
    assert 'pip install -e ".[test]"' in err
    monkeypatch.undo()
    assert cli_bench.benchmarks_script() == HERE / "benchmarks.py"


def test_cluster_parts_from_earlier_runs_are_named(results):
    first = bench_results.run_info("python tb/cluster/bench_cluster.py", bench_results.started())
    second = bench_results.run_info("python tb/cluster/bench_cluster.py --only build",
                                    bench_results.started())
    saved = {"run": second, "parts": {"latency": first, "build": second},
             "build": {"topology": "2x8", "emit_s": 2.0, "cold_s": 143.0, "cached_s": 0.1},
             "latency": {"topology": "2x8", "by_hops": {"1": 791.0}, "per_hop_ns": 385.0,
                         "pipeline_ns": 156.0}}
    title, body = bench_cluster_doc.section(saved)
    assert "Kept from an earlier run, latency: Measured by `python tb/cluster/bench_cluster.py`" \
        in body
    assert "earlier run, build" not in body
    assert bench_cluster_doc.shortened(bench_cluster_doc.quick_options()) == [
        "speed on chip counts 1, 4 instead of 1, 4, 8, 16 (Verilator)",
        "speed on chip counts 1 instead of 1, 4 (Icarus)"]


def test_cluster_section_runs_its_script_with_the_callers_command(monkeypatch):
    """``peach2 bench cluster`` runs ``tb/cluster/bench_cluster.py`` in a child process (it
    imports its own test folder), which records the caller's command; a failed run raises."""
    calls = []
    monkeypatch.setattr(benchmarks.subprocess, "run",
                        lambda args, check: calls.append((args, check)))
    benchmarks.cluster(True, "busy", "peach2 bench cluster --quick")
    benchmarks.cluster(False, None, "python tb/benchmarks.py")
    (quick, check), (full, _) = calls
    assert check and quick[1] == str(HERE / "cluster" / "bench_cluster.py")
    assert Path(quick[1]).is_file()
    assert quick[2:] == ["--command", "peach2 bench cluster --quick", "--quick",
                         "--conditions", "busy"]
    assert full[2:] == ["--command", "python tb/benchmarks.py"]
