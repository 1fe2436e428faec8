"""The simulation platform fails when it should (issue 33's "a suite that fails when it should").

- ``run_cocotb(testcase=...)`` fails unless exactly the requested cocotb tests ran: cocotb 2.1
  turns the names into a pattern and only warns when one matches nothing, so a renamed test
  would silently drop out of a run (and a prefix would pull in others);
- the waits of the hard-IP model and ``Driver.dma_wait`` end in simulated time, naming what is
  stuck, instead of hanging until the wall-clock limit;
- two runs of one name take turns on their folder instead of mixing their logs and results;
- every simulation's Python runs with the collector's thresholds of ``gc_policy``.
"""

from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from peach2.sim.run import FRESH_SEEDS_ENV, SIM_BUILD, run_cocotb
from peach2.sim.run.gc_policy import THRESHOLDS

HERE = Path(__file__).parent


class Totals(wiring.Component):
    """What ``library_tb`` expects: two running sums."""
    a: In(8)
    b: In(8)
    total_a: Out(16)
    total_b: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [self.total_a.eq(self.total_a + self.a), self.total_b.eq(self.total_b + self.b)]
        return m


def run(testcase):
    return run_cocotb(component=Totals(), toplevel="totals", test_module="library_tb",
                      name="run-guards", test_dir=HERE, testcase=testcase,
                      simulator="icarus")


def test_exact_name_runs():
    run("two_instances")
    run(["two_instances"])


@pytest.mark.parametrize("testcase", ["renamed_away", "two_instance", ["two_instances", "gone"]])
def test_missing_test_fails(testcase):
    with pytest.raises(AssertionError, match="not the requested|no cocotb test ran"):
        run(testcase)


def test_bounded_waits():
    """The platform's waits (hard-IP queues, ``dma_wait``) end in simulated time."""
    run_cocotb(component=Totals(), toplevel="totals", test_module="bounds_tb",
               name="bounded-waits", test_dir=HERE, simulator="icarus",
               params={"thresholds": list(THRESHOLDS)})


def test_gc_policy():
    """Every simulation imports the collector's thresholds first, without cocotb's warning of a
    module with no tests."""
    run_cocotb(component=Totals(), toplevel="totals", test_module="bounds_tb",
               name="gc-policy", test_dir=HERE, testcase="collector_thresholds",
               simulator="icarus", params={"thresholds": list(THRESHOLDS)})
    log = (SIM_BUILD / "gc-policy" / "sim.log").read_text()
    assert "No tests were discovered" not in log


def test_several_modules():
    """A list of test modules runs each one's tests in one simulation, behind the policy."""
    run_cocotb(component=Totals(), toplevel="totals", test_module=["library_tb", "bounds_tb"],
               name="several-modules", test_dir=HERE, simulator="icarus",
               testcase=["two_instances", "collector_thresholds"],
               params={"thresholds": list(THRESHOLDS)})


def test_fresh_seeds(monkeypatch):
    """``--fresh-seeds`` (``PEACH2_FRESH_SEEDS``): each run draws a new seed and logs it."""
    monkeypatch.setenv(FRESH_SEEDS_ENV, "1")
    log = SIM_BUILD / "fresh_seeds.log"
    before = log.read_text().splitlines() if log.exists() else []
    run("two_instances")
    run("two_instances")
    new = [line for line in log.read_text().splitlines()[len(before):] if " run-guards " in line]
    seeds = [int(line.rsplit("seed=", 1)[1]) for line in new]
    assert len(seeds) == 2 and seeds[0] != seeds[1], new


def test_a_second_run_of_the_same_name_waits(monkeypatch, tmp_path, capsys):
    """Two runs of one name (two launches of the same machine, two threads of a benchmark) take
    turns on ``build/sim/<name>`` instead of writing its log and results at once."""
    import threading
    import time

    from peach2.sim.run import runner
    monkeypatch.setattr(runner, "SIM_BUILD", tmp_path)
    events = []

    def run(tag, hold_s):
        with runner.exclusive_run_folder("same") as folder:
            events.append((tag, "in", folder))
            time.sleep(hold_s)
            events.append((tag, "out", folder))

    first = threading.Thread(target=run, args=("first", 0.3))
    first.start()
    while not events:
        time.sleep(0.01)
    second = threading.Thread(target=run, args=("second", 0))
    second.start()
    first.join()
    second.join()
    assert [e[:2] for e in events] == [("first", "in"), ("first", "out"),
                                       ("second", "in"), ("second", "out")]
    assert {e[2] for e in events} == {tmp_path / "same"}
    assert "same: waiting for another run of same to finish" in capsys.readouterr().out
    with runner.exclusive_run_folder("other"):      # other names never wait
        with runner.exclusive_run_folder("same"):
            pass
