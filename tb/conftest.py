"""pytest glue: fail fast without Icarus Verilog, and ``--waves`` to record waveforms."""

import os

import pytest

from peach2.sim.runner import WAVES_ENV, require_iverilog


def pytest_addoption(parser):
    parser.addoption("--waves", action="store_true",
                     help="record FST waveforms and GTKWave save files under waves/")


def pytest_configure(config):
    if config.getoption("--waves"):
        os.environ[WAVES_ENV] = "1"


def pytest_sessionstart(session):
    try:
        require_iverilog()
    except RuntimeError as error:
        pytest.exit(str(error), returncode=3)
