"""Stratix IV hard-IP adapters: round trips, pauses, bad input (cocotb).

The loopback top's tests run on Verilator, which builds it once for all of them; the
cut-through top (a design of its own, two short tests) on Icarus (docs/testing.md, "Where each
test runs, and why"; ``pytest --sim`` overrides).  Each test has its own ``build/sim/`` folder, so
``pytest -n auto`` is safe.  Seeds are fixed per test and logged by the cocotb side for replay.
"""

from pathlib import Path

import pytest

from peach2.sim.hdl import Loopback
from peach2.sim.run import run_cocotb

HERE = Path(__file__).parent

FAST_LENGTHS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1023, 1024]


def run(name, testcase, seed, component=None, simulator="verilator", **params):
    run_cocotb(component=component or Loopback(), toplevel="loopback",
               test_module="adapters_tb", name=name, test_dir=HERE, testcase=testcase,
               params=params, seed=seed, simulator=simulator)


@pytest.mark.parametrize("pauses", ["none", "fixed", "random"])
def test_round_trip(pauses):
    run(f"adapters-round_trip-{pauses}", "round_trip", seed=11, pauses=pauses,
        lengths=FAST_LENGTHS)


@pytest.mark.slow
@pytest.mark.parametrize("pauses", ["none", "random"])
def test_round_trip_every_length(pauses):
    run(f"adapters-every_length-{pauses}", "round_trip", seed=12, pauses=pauses,
        lengths=list(range(1, 1025)))


@pytest.mark.parametrize("pauses", ["none", "random"])
def test_bad_input(pauses):
    run(f"adapters-bad_input-{pauses}", "bad_input_dropped_and_counted", seed=13, pauses=pauses)


@pytest.mark.parametrize("gaps_inside", [False, True], ids=["clean", "gappy"])
def test_cut_through(gaps_inside):
    """TX cut-through (start_level=4): exact without gaps in packets, counted underruns with."""
    run(f"adapters-cut_through-{'gappy' if gaps_inside else 'clean'}", "cut_through", seed=14,
        component=Loopback(tx_start_level=4), simulator="icarus", gaps_inside=gaps_inside)


def run_host(name, testcase, seed=21, component=None, simulator="verilator", **params):
    run_cocotb(component=component or Loopback(), toplevel="loopback",
               test_module="host_loopback_tb", name=name, test_dir=HERE, testcase=testcase,
               params=params, seed=seed, simulator=simulator)


def test_host_enumerate_and_bar_access():
    run_host("host-bar_access", "enumerate_and_bar_access")


@pytest.mark.parametrize("above_4g", [True, False], ids=["4dw", "3dw"])
def test_host_write_stream_throughput(above_4g):
    """256-byte writes looped into host memory: byte exact, >= 99% of the wire bound, never above."""
    run_host(f"host-write_stream-{'4dw' if above_4g else '3dw'}", "write_stream",
             count=1000, payload=256, above_4g=above_4g, min_fraction=0.99)


@pytest.mark.parametrize("pipeline", [0.0, 156.0])
def test_host_cut_through_timing(pipeline):
    """The model's transmitter is cut-through: a write leaves on the link from its SOP beat."""
    run_host(f"host-cut_through-{int(pipeline)}", "cut_through_timing", tx_pipeline_ns=pipeline)


def test_host_cut_through_nullified():
    """A write nullified on tx_st (the TX adapter cut through, then its err beat came): nothing of
    it reaches the host, the writes around it land on time."""
    run_host("host-cut_through_nullified", "cut_through_nullified",
             component=Loopback(tx_start_level=4), simulator="icarus", tx_pipeline_ns=156.0)
