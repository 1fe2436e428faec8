"""PEACH2 router: registers, PIO, routing against the reference model, bad input (cocotb).

Every test runs on Verilator, which builds the chip once for all of them (docs/testing.md,
"Where each test runs, and why"; ``pytest --sim icarus`` runs them on Icarus).
"""

import json
from pathlib import Path

import pytest

from peach2.sim.harness.coverage import Coverage, reachable
from peach2.sim.run import SIM_BUILD, fresh_seed, run_cocotb
from peach2.top import PEACH2

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SIMULATOR = "verilator"


def coverage_file(name):
    """The coverage samples of run ``name`` (``peach2.sim.harness.coverage``), removed before
    the run so that they are this run's only."""
    path = SIM_BUILD / name / "coverage.json"
    path.unlink(missing_ok=True)
    return path


def run(name, testcase, seed=31, module="routing_tb", **params):
    """Run ``testcase`` (a name or a list) of cocotb module ``module`` (``routing_tb``,
    ``bad_input_tb``, ``coverage_tb``); the
    coverage of its checked traffic goes to ``build/sim/<name>/coverage.json``."""
    params.setdefault("coverage", str(coverage_file(name)))
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module=module, name=name,
               test_dir=HERE, testcase=testcase, params=params, seed=seed, simulator=SIMULATOR,
               library=True)


def test_routing_registers_and_four_ports():
    """``routing_tb``'s default cases in one simulation (each from its own reset; one start-up
    instead of three): registers and PIO, routing against the model (250 TLPs a port), all
    four ports at once."""
    run("router-routing", ["registers_and_pio", "routing_against_model", "four_ports_concurrent"],
        per_port=250)


@pytest.mark.slow
def test_routing_against_model_soak():
    run("router-routing-soak", "routing_against_model", seed=32, per_port=2500)


@pytest.mark.slow
def test_routing_and_bad_input_fresh_seeds():
    """New stimulus every run (the seeds are printed and kept in build/sim/fresh_seeds.log; a
    failure names its seed): the default suite replays fixed seeds forever."""
    run("router-routing-fresh", "routing_against_model", seed=fresh_seed("router-routing-fresh"),
        per_port=1000)
    run("router-bad_input-fresh", "bad_input", module="bad_input_tb",
        seed=fresh_seed("router-bad_input-fresh"))


def documented_latency(text):
    """``{(from, to, bytes): cycles}`` of docs/benchmarks.md's router latency table."""
    section = text[text.index("<!-- router:begin -->"):text.index("<!-- router:end -->")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and "->" in cells[0]:
            src, dst = (c.strip() for c in cells[0].split("->"))
            rows[(src, dst, int(cells[1]))] = int(cells[2])
    return rows


def test_latency_benchmark_runs():
    """The latency benchmark runs, every TLP gets through, and each path takes exactly the
    cycles docs/benchmarks.md states (at most 12 through a chip): a change to the router's
    pipeline fails here until the figures are measured again (``peach2 bench router``)."""
    result = SIM_BUILD / "router-bench-latency" / "latency.json"
    result.unlink(missing_ok=True)
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="bench_tb",
               name="router-bench-latency", test_dir=HERE, testcase="latency", seed=33,
               simulator=SIMULATOR, params={"result_file": str(result)}, library=True)
    measured = {(r["from"], r["to"], r["bytes"]): r["cycles"]
                for r in json.loads(result.read_text())}
    documented = documented_latency((ROOT / "docs" / "benchmarks.md").read_text())
    assert measured == documented, f"measured {measured}, docs/benchmarks.md {documented}"
    assert max(measured.values()) <= 12, measured


def test_all_ports_busy():
    """N->E, E->W, W->S, S->N at once: every TLP delivered, host memory byte-exact."""
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="bench_tb",
               name="router-bench-all_ports", test_dir=HERE, testcase="all_ports_busy",
               params={"count": 150}, seed=34, simulator=SIMULATOR, library=True)


def test_bad_input_late_errors_and_locked_read():
    """``bad_input_tb``'s default cases in one simulation (each from its own reset): malformed
    and unsupported requests among good ones, errors late in a packet, a locked read."""
    run("router-bad_input", ["bad_input", "late_errors", "locked_read"], module="bad_input_tb")


@pytest.mark.slow
@pytest.mark.parametrize("pauses", [True, False], ids=["random", "none"])
def test_bad_input_soak(pauses):
    run(f"router-bad_input-soak-{'random' if pauses else 'none'}", "bad_input", seed=35,
        module="bad_input_tb", times=4, good=80, pauses=pauses)


def test_coverage_closure():
    """Traffic drawn from the coverage holes (``coverage_tb``) hits every reachable bin of
    the router's cross, checked by the bad-input scoreboard (docs/verification.md)."""
    run("router-coverage", "coverage_closure", module="coverage_tb")
    cov = Coverage.load(SIM_BUILD / "router-coverage" / "coverage.json")
    goal = reachable()
    assert not cov.holes(goal), f"{len(cov.holes(goal))} holes: {cov.holes(goal)[:10]}"
    assert not cov.unreachable_hits(goal), cov.unreachable_hits(goal)[:10]


@pytest.mark.slow
@pytest.mark.parametrize("pauses", [True, False], ids=["random", "none"])
def test_four_ports_concurrent_soak(pauses):
    run(f"router-four_ports-soak-{'random' if pauses else 'none'}", "four_ports_concurrent",
        seed=36, per_flow=40, permutations=6, backlog=64, pauses=pauses)
