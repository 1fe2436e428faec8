"""pytest glue: fail fast without the simulator, ``--waves`` to record waveforms, ``--sim`` to
run every test on one simulator (``icarus`` or ``verilator``; default: each test's own choice),
``--fresh-seeds`` to draw new seeds instead of the fixed ones.

At the repository root, not in ``tb/``: pytest reads the options of a conftest under
``testpaths`` only when given a path, so ``python -m pytest --sim verilator`` failed
("unrecognized arguments") and the session-start check never ran without one.

Every test has a wall-clock cap (pytest-timeout, pinned in the ``test`` extras): a hung
simulator fails that test in minutes instead of holding the run until CI's limit.  The default
cap, :data:`TEST_TIMEOUT` seconds, is ``timeout`` in pyproject.toml's pytest options; the
longest default tests take about 6 minutes on two busy cores.  Tests marked ``slow`` get
:data:`SLOW_TIMEOUT` (the million-write cluster soak takes about 90 minutes) unless they carry
their own ``@pytest.mark.timeout(seconds)``.  ``--timeout SECONDS`` or ``PYTEST_TIMEOUT``
sets one cap for every test instead (``0``: none, e.g. for a longer soak).  On timeout the
test fails with the stacks of its threads, and the simulator it was waiting for is killed
(``signal`` method: it interrupts the main thread, which works under pytest-xdist)."""

import os

import pytest

from peach2.sim.run import FRESH_SEEDS_ENV, SIM_ENV, SIMULATORS, WAVES_ENV, require_iverilog


def pytest_addoption(parser):
    parser.addoption("--waves", action="store_true",
                     help="record FST waveforms and GTKWave save files under build/waves/")
    parser.addoption("--sim", choices=SIMULATORS, default=None,
                     help="run every simulation on this simulator (sets PEACH2_SIM; default: "
                          "each test runs where it is fastest)")
    parser.addoption("--fresh-seeds", action="store_true",
                     help="every cocotb run draws a new seed instead of its fixed one (printed "
                          "and logged in build/sim/fresh_seeds.log; a failure names it)")


def pytest_configure(config):
    if config.getoption("--waves"):
        os.environ[WAVES_ENV] = "1"
    if config.getoption("--sim"):
        os.environ[SIM_ENV] = config.getoption("--sim")
    if config.getoption("--fresh-seeds"):
        os.environ[FRESH_SEEDS_ENV] = "1"


#: Default cap of one test in seconds; pyproject.toml's ``timeout`` says the same (checked by
#: tb/util/test_timeouts.py).
TEST_TIMEOUT = 1200
#: Cap of a ``slow`` test in seconds (four hours).
SLOW_TIMEOUT = 4 * 3600


def pytest_collection_modifyitems(config, items):
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT"):
        return      # one cap for every test, as asked
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))


def pytest_sessionstart(session):
    try:
        require_iverilog()
        if os.environ.get(SIM_ENV) == "verilator":
            from peach2.sim.run import require_verilator
            require_verilator()
    except RuntimeError as error:
        pytest.exit(str(error), returncode=3)
