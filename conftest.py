"""pytest glue: fail fast without the simulator, ``--waves`` to record waveforms, ``--sim`` to
run every test on one simulator (``icarus`` or ``verilator``; default: each test's own choice).

At the repository root, not in ``tb/``: pytest reads the options of a conftest under
``testpaths`` only when given a path, so ``python -m pytest --sim verilator`` failed
("unrecognized arguments") and the session-start check never ran without one."""

import os

import pytest

from peach2.sim.run import SIM_ENV, SIMULATORS, WAVES_ENV, require_iverilog


def pytest_addoption(parser):
    parser.addoption("--waves", action="store_true",
                     help="record FST waveforms and GTKWave save files under build/waves/")
    parser.addoption("--sim", choices=SIMULATORS, default=None,
                     help="run every simulation on this simulator (sets PEACH2_SIM; default: "
                          "each test runs where it is fastest)")


def pytest_configure(config):
    if config.getoption("--waves"):
        os.environ[WAVES_ENV] = "1"
    if config.getoption("--sim"):
        os.environ[SIM_ENV] = config.getoption("--sim")


def pytest_sessionstart(session):
    try:
        require_iverilog()
        if os.environ.get(SIM_ENV) == "verilator":
            from peach2.sim.run import require_verilator
            require_verilator()
    except RuntimeError as error:
        pytest.exit(str(error), returncode=3)
