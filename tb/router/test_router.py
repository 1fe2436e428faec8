"""PEACH2 router: registers, PIO, routing against the reference model, bad input (cocotb)."""

from pathlib import Path

import pytest

from peach2.sim.runner import run_cocotb
from peach2.top import PEACH2

HERE = Path(__file__).parent


def run(name, testcase, seed=31, **params):
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="peach2_tb", name=name,
               test_dir=HERE, testcase=testcase, params=params, seed=seed)


def test_registers_and_pio():
    run("router-registers_and_pio", "registers_and_pio")


def test_routing_against_model():
    run("router-routing", "routing_against_model", per_port=250)


@pytest.mark.slow
def test_routing_against_model_soak():
    run("router-routing-soak", "routing_against_model", seed=32, per_port=2500)


def test_latency_benchmark_runs():
    """The latency benchmark (figures in docs/benchmarks.md) runs and every TLP gets through."""
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="bench_tb",
               name="router-bench-latency", test_dir=HERE, testcase="latency", seed=33)


def test_all_ports_busy():
    """N->E, E->W, W->S, S->N at once: every TLP delivered, host memory byte-exact."""
    run_cocotb(component=PEACH2(), toplevel="peach2", test_module="bench_tb",
               name="router-bench-all_ports", test_dir=HERE, testcase="all_ports_busy",
               params={"count": 150}, seed=34)
