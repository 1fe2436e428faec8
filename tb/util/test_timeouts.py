"""Every test has a wall-clock cap (pytest-timeout; see conftest.py): the default one from
pyproject.toml, four hours for ``slow`` tests, and a timed-out test kills the simulator it waits
for."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_timeout import _get_item_settings

import conftest  # the repository's root conftest (pytest puts its folder on sys.path)

ROOT = Path(__file__).resolve().parents[2]

_OVERRIDDEN = "--timeout given or PYTEST_TIMEOUT set: one cap for every test"


def _pytest(*args, env=None):
    """Run pytest on this file in a subprocess; return its output."""
    env = {k: v for k, v in (env or os.environ).items()
           if k not in ("PYTEST_TIMEOUT", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                             "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    return result.returncode, result.stdout + result.stderr


def test_default_cap(request):
    if request.config.getoption("timeout") is not None or os.environ.get("PYTEST_TIMEOUT"):
        pytest.skip(_OVERRIDDEN)
    settings = _get_item_settings(request.node)
    assert settings.timeout == conftest.TEST_TIMEOUT == 1200
    assert settings.method == "signal"


@pytest.mark.slow
def test_slow_cap_here(request):
    """Run by ``test_slow_tests_get_the_slow_cap`` (and by ``pytest -m slow``)."""
    if request.config.getoption("timeout") is not None or os.environ.get("PYTEST_TIMEOUT"):
        pytest.skip(_OVERRIDDEN)
    print(f"\ncap={_get_item_settings(request.node).timeout}")


def test_slow_tests_get_the_slow_cap():
    code, out = _pytest("-m", "slow", f"{__file__}::test_slow_cap_here")
    assert code == 0, out
    assert f"cap={conftest.SLOW_TIMEOUT}" in out, out
    assert conftest.SLOW_TIMEOUT == 4 * 3600


def test_command_line_cap_wins_for_slow_tests():
    code, out = _pytest("-m", "slow", "--timeout", "30", "-rs",
                        f"{__file__}::test_slow_cap_here")
    assert code == 0 and "one cap for every test" in out, out


HANG = """
import os
import subprocess

def test_hangs():
    subprocess.run(["sh", "-c", f"echo $$ > {os.environ['HANG_PID']}; exec sleep 600"])
"""


def test_hung_child_fails_the_test_and_is_killed(tmp_path):
    """A test waiting on a simulator that never ends fails at its cap, under pytest-xdist too,
    and the child process is killed (no ``sleep 600`` left behind)."""
    (tmp_path / "test_hang.py").write_text(HANG)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 2\ntimeout_method = signal\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["HANG_PID"] = str(tmp_path / "pid")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                             "-n", "1", str(tmp_path)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "Timeout (>2.0s)" in out and "1 failed" in out, out
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists(), f"the child {pid} is still running"
