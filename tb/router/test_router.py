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
