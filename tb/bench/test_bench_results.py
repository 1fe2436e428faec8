"""Saved benchmark results and the document rebuilt from them (no simulation).

A run saves only the sections it measured; the rebuild renders every section that has a saved
file and keeps the text of the others, so no run removes figures it did not measure; a quick
run's stamp says what it shortened; ``peach2 bench`` answers bad input with one line.
"""

import importlib.util
import json
from pathlib import Path

import benchmarks
import pytest

from peach2 import cli, cli_bench
from peach2.sim.bench import cluster_doc as bench_cluster_doc
from peach2.sim.bench import dma_doc as bench_dma_doc
from peach2.sim.bench import dma_plan as dma_plan
from peach2.sim.bench import dma_run as dma_run
from peach2.sim.bench import doc as bench_doc
from peach2.sim.bench import results as bench_results

HERE = Path(__file__).resolve().parent
TB = HERE.parent

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
    run = bench_results.run_info("python tb/bench/benchmarks.py router --quick",
                                 bench_results.started(),
                                 ["all-ports-busy flows of 300 TLPs instead of 1000"])
    bench_results.save("router", {"run": run, **ROUTER})
    assert bench_doc.rebuild(results) == ["router"]
    text = results.read_text()
    assert "ADAPTERS TEXT" in text and "DMA TEXT" in text
    assert "old head" not in text
    assert "| N -> E | 300 | 3.657 | 3.657 | 100.0% |" in text
    assert "Measured by `python tb/bench/benchmarks.py router --quick`" in text
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
    progress = bench_results.PointProgress("demo", 3)
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
    (["bench", "routers"], "sections are adapters, router, dma, cluster, gpu, collectives, "
                           "calibration, machine, hybrid, halo, tuning, not routers"),
    (["bench", "router", "--figures", "halo"], "go with the dma section alone"),
    (["bench", "dma", "--figures", "chain"],
     "figures are chain128, scattered, single, chain4k, halo"),
    (["bench", "dma", "--jobs", "0"], "--jobs: must be 1..64, got 0"),
    (["bench", "dma", "--chain", "0"], "--chain: must be 1..128, got 0"),
    (["bench", "dma", "--chain", "129"], "--chain: must be 1..128, got 129"),
    (["bench", "dma", "--max-total", "1K"], "--max-total: must be 4096..2097152, got 1K"),
    (["bench", "dma", "--read-latency", "-1"], "--read-latency: must be 0..100000, got -1"),
    (["bench", "dma", "--read-latency", "soon"], "--read-latency: must be a number 0..100000"),
    (["bench", "dma", "--halo-n", "16,128"], "--halo-n: must be 4..64, got 128"),
    (["bench", "dma", "--chains", ","], "--chains: must be comma-separated numbers 1..128"),
    (["bench", "dma", "--sizes", "8,100"], "--sizes: 100 not among this run's sizes (8, 16,"),
    (["bench", "dma", "--quick", "--sizes", "16"], "--sizes: 16 not among this run's sizes "
                                                   "(8, 32, 128, 512, 2048, 4096, 8192,"),
    (["bench", "router", "--doc-only"], "--doc-only measures nothing"),
    (["bench", "--redraw", "dma"], "--redraw goes with --doc-only"),
    (["bench", "--doc-only", "--redraw", "dma,plots"], "--redraw: sections are adapters,"),
    (["bench", "--doc-only", "--redraw", ","], "--redraw: sections are adapters,"),
])
def test_bench_bad_input_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("peach2 bench: error:")


def test_bench_help_shows_ranges_and_one_command_per_study(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("transfers per chain, 1..128", "bytes per point at most, 4K..2M",
                  "latency in ns, 0..100000", "at a time, 1..64", "each 1..128", "each 4..64",
                  "8 B..128K by 2x"):
        assert shown in text, shown
    for command, what in benchmarks.STUDIES:
        assert f"{command} {' '.join(what.split())}" in text
    assert "peach2 bench cluster" in text and "16-node" in text
    # every section has its study line (the hybrid section had none)
    assert {c.split()[2] for c, _ in benchmarks.STUDIES if c.startswith("peach2 bench ")} == \
        set(bench_results.SECTIONS)


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
    benchmarks.cluster(False, None, "python tb/bench/benchmarks.py")
    (quick, check), (full, _) = calls
    assert check and quick[1] == str(TB / "cluster" / "bench_cluster.py")
    assert Path(quick[1]).is_file()
    assert quick[2:] == ["--command", "peach2 bench cluster --quick", "--quick",
                         "--conditions", "busy"]
    assert full[2:] == ["--command", "python tb/bench/benchmarks.py"]


# -- the DMA run in parallel simulations (peach2.sim.bench.dma_plan, bench_dma_run) -----------

def _fake_result(point):
    """What a simulation of ``point`` might measure: figures that depend on the point only."""
    size = point.get("size", point.get("n", 1))
    gbps = round(size / (size + 300 + 7 * len(point["figure"])), 6)
    extra = {"burst": 8} if point["figure"] == "halo" else {}
    return {"figure": point["figure"], "read_latency_ns": 500,
            **{k: v for k, v in point.items() if k != "figure"}, **extra,
            "bytes": size, "ns": size / gbps, "gbps": gbps, "port": "E",
            "port_bound_gbps": 3.657, "port_gbps": gbps, "tlps": 1, "desc_done": 1}


def _fake_simulation(calls):
    """Stands in for ``run_cocotb`` of ``dma_perf_tb.py``: writes the result file and the
    progress lines the testbench writes, for the points it is given."""
    def run_cocotb(*, name, params, simulator, **_):
        calls.append((name, [dma_plan.label(p) for p in params["points"]], simulator))
        out, costs = [], [{"what": "setup", "cpu_s": 10.0, "wall_s": 10.0}]
        with open(params["progress_file"], "a") as f:
            f.write(json.dumps({"event": "setup", **costs[0]}) + "\n")
            for k, point in enumerate(params["points"]):
                out.append(_fake_result(point))
                costs.append({"what": dma_plan.label(point), "cpu_s": 2.0, "wall_s": 2.0})
                f.write(json.dumps({"event": "point", "k": k, "gbps": out[-1]["gbps"],
                                    **costs[-1]}) + "\n")
        Path(params["result_file"]).write_text(json.dumps(
            {"points": out, "paper_bound_gbps": 3.657, "read_latency_ns": 500,
             "costs": costs}))
    return run_cocotb


@pytest.fixture
def fake_dma(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(dma_run, "SCRATCH", tmp_path / "bench")
    monkeypatch.setattr(dma_run, "run_cocotb", _fake_simulation(calls))
    monkeypatch.setattr(dma_run, "_build", lambda *a: calls.append(("build", a[1])))
    return calls


def test_plan_has_the_scattered_rows_and_split_covers_every_point():
    points = dma_plan.plan(quick=True, chain=128, max_total=1 << 19)
    scattered = [p for p in points if p["figure"] == "scattered"]
    assert [p["size"] for p in scattered] == [8, 128, 512, 4096]
    assert all(p["where"] == "neighbour" and p["count"] == 128 for p in scattered)
    for jobs in (1, 2, 3, 7):
        groups = dma_plan.split(points, jobs)
        assert len(groups) == jobs
        assert sorted(i for g in groups for i in g) == list(range(len(points)))
        assert all(g == sorted(g) for g in groups)
        loads = [sum(dma_plan.weight(points[i]) for i in g) for g in groups]
        heaviest = max(dma_plan.weight(p) for p in points)
        assert max(loads) - min(loads) <= heaviest      # greedy: within one point
    assert len(dma_plan.split(points[:2], 5)) == 2      # no empty jobs
    subset = dma_plan.plan(quick=True, figures=["scattered", "halo"], only_sizes=[8, 32],
                           halo_n=[16])
    assert [dma_plan.label(p) for p in subset[:3]] == [
        "start where=local size=8 count=1", "start where=neighbour size=8 count=1",
        "scattered where=neighbour size=8 count=32"]
    assert len(subset) == 2 + 1 + 6
    assert not any(p["figure"] == "start" for p in dma_plan.plan(quick=True, figures=["halo"]))


def test_merge_puts_results_back_in_plan_order_and_checks_them():
    points = dma_plan.plan(quick=True, figures=["chain128", "chain4k"], only_sizes=[8, 4096],
                           chains=[1, 4])
    groups = dma_plan.split(points, 2)
    results = [[_fake_result(points[i]) for i in g] for g in groups]
    assert dma_plan.merge(points, groups, results) == [_fake_result(p) for p in points]
    swapped = [list(reversed(results[0])), results[1]]
    with pytest.raises(ValueError, match="is not point"):
        dma_plan.merge(points, groups, swapped)
    with pytest.raises(ValueError, match="measured"):
        dma_plan.merge(points, groups, [results[0][:-1], results[1]])


def test_parallel_run_equals_one_simulation(fake_dma, capsys):
    points = dma_plan.plan(quick=True, figures=["chain128", "scattered", "halo"],
                           only_sizes=[8, 4096], halo_n=[16])
    assert len(points) == 14
    one, cost1 = dma_run.run(points, workers=1, jobs=1, test_dir=TB / "dma", name="seq")
    assert [c[0] for c in fake_dma] == ["build", "seq-0"]     # built once, before the jobs
    fake_dma.clear()
    two, cost2 = dma_run.run(points, workers=2, test_dir=TB / "dma", name="par",
                             simulator="icarus")
    assert one == two and one["points"] == [_fake_result(p) for p in points]
    assert fake_dma.pop(0) == ("build", "icarus")
    # one simulation per point, heaviest first
    assert sorted(n for n, _, _ in fake_dma) == sorted(f"par-{k}" for k in range(14))
    first = {n: labels for n, labels, _ in fake_dma}
    assert first["par-0"] == ["chain128 where=local size=4096 count=32"]
    assert first["par-11"][0].startswith("halo ")
    assert first["par-13"][0].startswith("start ")
    assert {s for _, _, s in fake_dma} == {"icarus"}
    assert sorted(x for _, labels, _ in fake_dma for x in labels) == sorted(
        dma_plan.label(p) for p in points)
    three, _ = dma_run.run(points, workers=2, jobs=3, test_dir=TB / "dma", name="grp")
    assert three == one
    out = capsys.readouterr().out.splitlines()
    done = [line for line in out if line.startswith("dma: point ")]
    assert len(done) == 3 * len(points)
    assert done[-1].startswith("dma: point 14 of 14 done (simulation ")
    assert "its point" in done[-1] and "about 0 s left" in done[-1] and "elapsed" in done[-1]
    assert "its point" not in done[14]
    assert "dma: 14 points in 14 simulations (icarus), 2 at a time" in out
    assert cost2["jobs"] == 14 and cost2["workers"] == 2
    assert cost2["per_point"] == [2.0] * len(points)


def test_time_bound_is_the_start_plus_the_wire_time_beyond_it():
    """docs/dma.md, "What the links allow": a chain's lower bound is the 8-byte ``start`` point
    of its path plus the wire time (4 GB/s) of what it sends beyond that point on its busiest
    link direction; a run without start points has no bound."""
    from peach2.sim.bench.dma_doc import bound_ns
    start = {"figure": "start", "where": "neighbour", "size": 8, "count": 1, "ns": 1800.0,
             "rx_wire_after": 28, "tx_wire_after": 40}
    chain = {"figure": "chain128", "where": "neighbour", "size": 128, "count": 128,
             "ns": 8000.0, "rx_wire_after": 28 + 4000 * 4, "tx_wire_after": 40 + 3000 * 4}
    assert bound_ns({"points": [start, chain]}, chain) == 1800 + 4000
    chain["tx_wire_after"] = 40 + 5000 * 4           # the writes on E bind instead
    assert bound_ns({"points": [start, chain]}, chain) == 1800 + 5000
    local = {**chain, "where": "local"}
    assert bound_ns({"points": [start, local]}, local) is None
    assert bound_ns({"points": [start, {**start, "where": "local"}]}, {**local, "figure":
                                                                        "chain4k"}) == 6800
    # the DLLPs each direction carried count beside the TLPs, beyond the start point's
    dllps = {**chain, "rx_dllp_after": 8 * 100, "tx_dllp_after": 8 * 50}
    assert bound_ns({"points": [{**start, "tx_dllp_after": 16}, dllps]}, dllps) == 1800 + 5096


def test_time_bound_takes_off_the_idle_wait_that_descriptor_blocks_can_fill():
    """Descriptor blocks after the first can arrive while the start point's receive side waits
    for its data (``rx_window_ns``): the bound takes that time off N's completions, but never
    goes below the data completions alone; runs without the window keep the old bound."""
    from peach2.sim.bench.dma_doc import bound_ns
    start = {"figure": "start", "where": "local", "size": 8, "count": 1, "ns": 1500.0,
             "rx_wire_after": 28, "tx_wire_after": 40, "rx_desc_after": 0,
             "rx_window_ns": 600.0}
    # 3000 ns of completions after the first block, 1000 of them descriptor blocks
    chain = {"figure": "chain128", "where": "local", "size": 8, "count": 128, "ns": 4000.0,
             "rx_wire_after": 28 + 3000 * 4, "tx_wire_after": 40, "rx_desc_after": 1000 * 4}
    assert bound_ns({"points": [start, chain]}, chain) == 1500 + 3000 - 600
    # blocks smaller than the idle time: the data completions alone
    few = {**chain, "rx_desc_after": 400 * 4}
    assert bound_ns({"points": [start, few]}, few) == 1500 + 3000 - 400
    # no window measured (older runs): all completions after the first block
    old = {**start}
    del old["rx_window_ns"]
    assert bound_ns({"points": [old, chain]}, chain) == 1500 + 3000


def test_a_failed_job_fails_the_run(fake_dma, monkeypatch):
    def broken(**kwargs):
        raise AssertionError("cocotb run bench-dma-1 failed")
    monkeypatch.setattr(dma_run, "run_cocotb", broken)
    with pytest.raises(RuntimeError, match=r"dma: point \d+ of \d+ \(simulation \d+: halo .*\) "
                       "failed: AssertionError: cocotb run bench-dma-1 failed") as raised:
        dma_run.run(dma_plan.plan(quick=True, figures=["halo"]), workers=2,
                    test_dir=TB / "dma")
    assert isinstance(raised.value.__cause__, AssertionError)


def test_idle_estimate_replays_the_pool():
    assert dma_run.idle_estimate([10, 10, 10, 10], 2) == 20
    assert dma_run.idle_estimate([30, 10, 10, 10], 2) == 30
    assert dma_run.idle_estimate([5, 5], 1) == 10


def test_scattered_rows_in_the_document(tmp_path):
    points = dma_plan.plan(quick=True, chain=128, max_total=1 << 19)
    result = {"points": [_fake_result(p) for p in points], "paper_bound_gbps": 3.657,
              "read_latency_ns": 500}
    adjacent = {p["size"]: p for p in result["points"]
                if p["figure"] == "chain128" and p["where"] == "neighbour"}
    for p in result["points"]:           # scattered: half the adjacent chain's figure
        if p["figure"] == "scattered":
            p["gbps"] = adjacent[p["size"]]["gbps"] / 2
    title, body = bench_dma_doc.dma_markdown(result, tmp_path)
    assert "no two are adjacent" in body and "one host round trip each" in body
    adj = next(p for p in result["points"] if p["figure"] == "chain128"
               and p["where"] == "neighbour" and p["size"] == 512)
    assert (f"| 512 B | 128 | {adj['gbps']:.3f} | {adj['gbps'] / 2:.3f} | -50% | "
            f"{100 * adj['gbps'] / 2 / 3.657:.1f}% |") in body
    assert body.count(" | -50% | ") == 4
    lines = []
    bench_dma_doc.print_dma(result, out=lambda *a: lines.append(" ".join(a)))
    assert sum(line.startswith("scattered where=neighbour") for line in lines) == 4
    assert lines[-5].startswith("| size | chain | adjacent GB/s | scattered GB/s")
    old = {**result, "points": [p for p in result["points"] if p["figure"] != "scattered"]}
    assert "scattered" not in bench_dma_doc.dma_markdown(old, tmp_path)[1].lower()


def test_stamp_of_a_parallel_run_names_simulator_and_cpu():
    run = {**bench_results.run_info("peach2 bench dma", bench_results.started()),
           "simulator": "verilator", "jobs": 4, "workers": 2, "cpu_seconds": 700,
           "idle_seconds": 420}
    assert ("Verilator, 4 simulations 2 at a time: 700 s of CPU, about 420 s on an idle "
            "machine.") in bench_doc.stamp(run)
    assert "CPU" not in bench_doc.stamp(bench_results.run_info("x", bench_results.started()))


# -- plots: a run redraws its own section's only, byte-stable ----------------------------------

def _dma_saved():
    points = dma_plan.plan(quick=True, chain=128, max_total=1 << 19)
    return {"run": bench_results.run_info("peach2 bench dma", bench_results.started()),
            "points": [_fake_result(p) for p in points], "paper_bound_gbps": 3.657,
            "read_latency_ns": 500}


def test_a_run_redraws_only_its_own_plots(results, tmp_path, monkeypatch):
    """A cluster-only run (``peach2 bench cluster``: it rebuilds the document too) leaves the
    DMA plots alone; a missing plot is drawn again, byte for byte the same."""
    img = tmp_path / "img"
    monkeypatch.setattr(bench_doc, "IMG", img)
    bench_results.save("dma", _dma_saved())
    bench_results.save("cluster", {
        "run": bench_results.run_info("peach2 bench cluster", bench_results.started()),
        "latency": {"topology": "2x8", "by_hops": {"1": 791.0, "2": 1170.0},
                    "per_hop_ns": 380.0, "pipeline_ns": 156.0}})
    bench_doc.rebuild(results, measured=["dma"])
    files = [img / name for name in bench_doc.IMAGES["dma"]]
    drawn = {f: f.read_bytes() for f in files}
    assert [f.name for f in files] == ["dma_chain128.png", "dma_single_chain4k.png"]
    for data in drawn.values():             # PNG without the library's version in it
        assert data.startswith(b"\x89PNG") and b"Software" not in data
        assert b"atplotlib" not in data
    for f in files:
        f.write_bytes(b"as committed")
    bench_doc.rebuild(results, measured=["cluster"])
    assert all(f.read_bytes() == b"as committed" for f in files)
    assert "Time per extra hop: 380 ns" in results.read_text()
    assert "](img/dma_single_chain4k.png)" in results.read_text()
    files[1].unlink()
    bench_doc.rebuild(results)              # --doc-only: only what is missing is drawn
    assert files[0].read_bytes() == b"as committed"
    assert files[1].read_bytes() == drawn[files[1]]
    assert sorted(p.name for p in img.iterdir()) == sorted(f.name for f in files)


def test_benchmarks_rebuild_names_the_sections_measured(monkeypatch, capsys):
    """``peach2 bench cluster`` rebuilds the document with ``measured=["cluster"]``; the saved
    line and the document's ``wrote`` line go to standard error."""
    calls = []
    monkeypatch.setattr(benchmarks, "cluster", lambda *a: calls.append(("cluster", a)))
    monkeypatch.setattr(benchmarks, "rebuild", lambda **kw: calls.append(("rebuild", kw)))
    benchmarks.main(["cluster", "--quick"], prog="peach2 bench")
    assert calls[-1] == ("rebuild", {"measured": ["cluster"]})
    assert calls[0][0] == "cluster" and calls[0][1][2] == "peach2 bench cluster --quick"
    calls.clear()
    benchmarks.main(["--doc-only"], prog="peach2 bench")
    benchmarks.main(["--doc-only", "--redraw", "hybrid,dma"], prog="peach2 bench")
    benchmarks.main(["--doc-only", "--redraw", "all"], prog="peach2 bench")
    assert calls == [("rebuild", {"measured": ()}), ("rebuild", {"measured": ["hybrid", "dma"]}),
                     ("rebuild", {"measured": list(benchmarks.SECTIONS)})]


# -- tb/collectives/bench_collectives.py: --part with --quick, what it prints as measured ------

def _bench_collectives():
    path = TB / "collectives" / "bench_collectives.py"
    spec = importlib.util.spec_from_file_location("bench_collectives_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _coll_rows(kind, nodes):
    return [{"bytes": size, "ns": 1000.0 * (k + 1)} for k, size in enumerate([8, 512])] \
        if kind in ("bcast", "allgather", "ring") else [{"hops": h, "ns": 800.0 + 380 * h}
                                                 for h in (1, 2, 3)]


@pytest.fixture
def bench_coll(results, monkeypatch):
    """The script with its simulations and the document stubbed: ``calls`` lists
    the simulations asked for and the rebuilds."""
    module = _bench_collectives()
    calls = []

    def measure(nodes, part, params, progress):
        calls.append(("measure", nodes, part, sorted(params)))
        kinds = {k.split("_")[0] for k in params if k.split("_")[0] in module.KINDS} \
            & {"bcast", "allgather", "ring", "hops"}       # (the rows faked here)
        return {"nodes": nodes, "topology": module.TOPOLOGY[nodes], "complete": True,
                **{k: _coll_rows(k, nodes) for k in kinds}, "wall_s": {part: 1.0}}
    monkeypatch.setattr(module, "measure", measure)
    monkeypatch.setattr(module, "tb_module", lambda *a: None)
    monkeypatch.setattr(module.bench_doc, "rebuild", lambda **kw: calls.append(("rebuild", kw)))
    module.calls = calls
    return module


def test_collectives_quick_part_measures_that_part(bench_coll, capsys):
    """``--quick --nodes 16 --part bcast`` measures the Broadcast and the hops at the quick
    sizes (it measured nothing before); the printout is what it measured, the saved rows of
    other runs are named as kept, not shown as measured."""
    old = {"run": bench_results.run_info("older", bench_results.started()),
           "8": {"nodes": 8, "topology": "2x4", "complete": True,
                 "allgather": [{"bytes": 64, "ns": 99_000.0}]}}
    bench_results.save("collectives", old)
    assert bench_coll.main(["--quick", "--nodes", "16", "--part", "bcast"]) == 0
    measured = [c for c in bench_coll.calls if c[0] == "measure"]
    assert measured == [("measure", 16, "bcast", ["awake", "bcast_sizes", "buffer", "hops",
                                                  "host_size"])]
    assert bench_coll.calls[-1] == ("rebuild", {"measured": ["collectives"]})
    out = capsys.readouterr().out
    assert "collectives, measured by this run:" in out and "16 nodes bcast: 8 B 1.00 us" in out
    assert "99.00 us" not in out and "8 nodes allgather:" not in out
    assert "kept from earlier runs, not measured now: 8 nodes allgather" in out
    saved = bench_results.load("collectives")
    assert saved["8"]["allgather"] == old["8"]["allgather"] and saved["16"]["bcast"]
    assert set(saved["parts"]) == {"16 nodes, bcast", "16 nodes, hops"}


def test_collectives_one_node_count_keeps_the_other_stamp(bench_coll):
    """``--quick --nodes 16`` (every part, one node count) replaces the 16-node rows and stamps
    them in ``parts``; the section's stamp and the 8-node rows stay the earlier run's."""
    old = {"run": bench_results.run_info("older", bench_results.started()),
           "8": {"nodes": 8, "topology": "2x4", "complete": True,
                 "allgather": [{"bytes": 64, "ns": 99_000.0}]}}
    bench_results.save("collectives", old)
    assert bench_coll.main(["--quick", "--nodes", "16"]) == 0
    saved = bench_results.load("collectives")
    assert saved["run"]["command"] == "older"
    assert saved["8"]["allgather"] == old["8"]["allgather"] and saved["16"]["bcast"]
    assert saved["parts"] and all(k.startswith("16 nodes") for k in saved["parts"])
    # Then the other node count: every row now has a stamp of this session, so the section's
    # becomes the last run's and the 16-node rows keep theirs.
    assert bench_coll.main(["--quick", "--nodes", "8"]) == 0
    saved = bench_results.load("collectives")
    assert saved["run"]["command"].endswith("--quick --nodes 8")
    assert saved["parts"] and all(k.startswith("16 nodes") for k in saved["parts"])
    assert bench_coll.main(["--quick"]) == 0        # both node counts: the section's stamp
    saved = bench_results.load("collectives")
    assert saved["run"]["command"].endswith("bench_collectives.py --quick")
    assert saved["parts"] == {}


def test_collectives_quick_sizes_per_part(bench_coll):
    """With --quick, each part holds the quick sizes; without --part, one simulation."""
    quick = dict(bench_coll.jobs(8, True, split=True))
    assert quick["bcast"]["bcast_sizes"] == bench_coll.QUICK_SIZES
    assert quick["rest"]["halo_ns"] == bench_coll.QUICK_HALO_NS
    assert [part for part, _ in bench_coll.jobs(8, True)] == ["all"]
    assert [part for part, _ in bench_coll.jobs(8, False)] == ["bcast", "rest"]


@pytest.mark.parametrize("argv, message", [
    (["--nodes", "8", "--part", "bcast", "--kinds", "hops"], "nothing to measure"),
    (["--kinds", "halo"], "--kinds goes with --part"),
    (["--part", "rest", "--kinds", "everything"], "--kinds takes bcast, allgather"),
    (["--nodes", "12"], "--nodes takes 8 and/or 16"),
    (["--part", "all"], "--part: invalid choice"),
    (["--doc-only", "--part", "bcast"], "--doc-only measures nothing"),
])
def test_collectives_refuses_what_measures_nothing(bench_coll, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        bench_coll.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert bench_coll.calls == []


def test_collectives_from_raw_says_so(bench_coll, tmp_path, monkeypatch, capsys):
    raw = {("16", "bcast"): tmp_path / "raw.json"}
    raw[("16", "bcast")].write_text(json.dumps({"nodes": 16, "topology": "2x8",
                                                "bcast": _coll_rows("bcast", 16)}))
    monkeypatch.setattr(bench_coll, "raw_path", lambda n, part: raw[(str(n), part)])
    assert bench_coll.main(["--quick", "--nodes", "16", "--part", "bcast", "--kinds", "bcast",
                            "--from-raw"]) == 0
    out = capsys.readouterr().out
    assert "from the raw results of an earlier run (build/bench/), not measured now:" in out
    assert "measured by this run" not in out
    assert not [c for c in bench_coll.calls if c[0] == "measure"]


def test_collectives_ring_columns_and_where_the_ring_wins():
    """The ring Allgather's rows go beside recursive doubling's (time and the ratio), and the
    text says from which block size the ring is ahead, from the saved rows."""
    from peach2.sim.bench import collectives_doc
    saved = {"16": {"nodes": 16, "topology": "2x8", "pipeline_ns": 156.0,
                    "allgather": [{"bytes": 8, "ns": 9000.0}, {"bytes": 4096, "ns": 44000.0},
                                  {"bytes": 65536, "ns": 600000.0}],
                    "ring": [{"bytes": 8, "ns": 12000.0}, {"bytes": 4096, "ns": 30000.0},
                             {"bytes": 65536, "ns": 300000.0}]}}
    _, body = collectives_doc.section(saved, draw=False)
    assert "| time / model | ring (us) | time / ring |" in body
    assert "| 64 KiB | 1 MiB | 600.00 | - | - | 300.00 | 2.00 |" in body
    assert "on 16 nodes (2x8) it is ahead from 4 KiB blocks on, 2.00 times faster at 64 KiB" \
        in body
    del saved["16"]["ring"]
    _, body = collectives_doc.section(saved, draw=False)
    assert "ring" not in body.split("### Allgather")[1].split("\n")[2]


def test_collectives_parts_of_one_run_share_a_line():
    """The section names each other run once, with the parts it measured (a node count's run
    stamps every kind of its rows), and says "another run", not which came first."""
    from peach2.sim.bench import collectives_doc
    one = {"command": "python tb/collectives/bench_collectives.py --nodes 8", "commit": "abc1234",
           "date": "2026-11-30", "seconds": 5}
    two = dict(one, command="python tb/collectives/bench_collectives.py --part bcast")
    saved = {"run": dict(one, command="x"), "parts": {"8 nodes, allgather": one,
                                                     "8 nodes, bcast": one, "16 nodes, hops": two}}
    _, body = collectives_doc.section(saved, draw=False)
    lines = [line for line in body.splitlines() if line.startswith("Rows of")]
    assert len(lines) == 2
    assert any(line.startswith("Rows of 8 nodes (allgather, bcast) from another run than the "
                               "section's: Measured by `python tb/collectives/bench_collectives.py "
                               "--nodes 8`") for line in lines)
    assert any(line.startswith("Rows of 16 nodes (hops) from another run") for line in lines)
