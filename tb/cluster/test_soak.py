"""The scoreboard soak on a ring of 4 (``soak_tb``, docs/errors.md): every host
and every DMA channel busy with random traffic, every byte accounted for.  Same HDL top and
Verilator build as ``test_cluster.py::test_ring4_all_to_all``.

The long run (at least a million checked writes, figures in docs/errors.md)::

    python -m pytest -m slow tb/cluster/test_soak.py          # PEACH2_SOAK_TLPS=1000000
    PEACH2_SOAK_TLPS=2000000 PEACH2_SOAK_SEED=7 python -m pytest -m slow tb/cluster/test_soak.py

Its figures go to ``build/cluster-ring4-soak-long.json``, its log to
``build/sim/cluster-ring4-soak-long/sim.log``.
"""

import json
import os
from pathlib import Path

import pytest

from peach2.routes import Topology, cable_plan
from peach2.sim.harness.coverage import Coverage, reachable
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles
from peach2.sim.run import SIM_BUILD, run_cocotb

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

#: Checked writes of the long run, and its seed (environment variables override).
LONG_TLPS = 1_000_000
LONG_SEED = 71


def run_soak(name, tlps, seed, topology="ring:4", simulator="verilator", **params):
    """Run ``soak_tb`` on the cluster top of ``topology`` (the ring of 4 of the cluster tests
    by default); return its figures (a dict).  The coverage of the writes the hosts received
    goes to ``build/sim/<name>/coverage.json`` (``peach2.sim.harness.coverage``)."""
    from cluster_run import TEST_CABLE  # the cables of test_ring4_all_to_all (one build)
    topo = Topology(1, {}) if topology == "single" else Topology.parse(topology)
    cycles = pipeline_cycles(HARDIP_PIPELINE_NS)
    cable = {"tx_pipeline": cycles, "rx_pipeline": cycles, **TEST_CABLE}
    top = ClusterTop(topo.n_nodes, cable_plan(topo), cable=cable, threads=1)
    result = ROOT / "build" / f"{name}.json"
    result.parent.mkdir(exist_ok=True)
    result.unlink(missing_ok=True)
    coverage = SIM_BUILD / name / "coverage.json"
    coverage.unlink(missing_ok=True)
    params.setdefault("coverage", str(coverage))
    run_cocotb(component=top, toplevel="cluster", test_module="soak_tb", name=name,
               test_dir=HERE, testcase="soak",
               params={"topology": topology, "pipeline_ns": HARDIP_PIPELINE_NS, "tlps": tlps,
                       "idle": 0.1, "backpressure": 0.1, "result_file": str(result),
                       **params},
               seed=seed, simulator=simulator)
    return json.loads(result.read_text())


def test_soak_ring4():
    """Reduced soak: a few thousand checked writes, every source busy, pauses on every host."""
    r = run_soak("cluster-ring4-soak", 2500, seed=70)
    assert r["stores"] > 0 and r["dma_jobs"] > 0 and r["descriptors"] > r["dma_jobs"]
    # Its coverage (docs/verification.md): writes into the hosts from every port a ring of 4
    # uses, every size and alignment bin a host can receive, with and without backpressure.
    cov = Coverage.load(SIM_BUILD / "cluster-ring4-soak" / "coverage.json")
    goal = reachable()
    assert not cov.unreachable_hits(goal), cov.unreachable_hits(goal)[:5]
    sampled = sum(cov.hits.values())
    assert sum(r["received"]) / 2 < sampled <= sum(r["received"]), (sampled, r["received"])
    for i, want in ((0, {"MWr"}), (1, {"1", "2-15", "16", "17-63", "64"}),
                    (2, {"64B", "DW", "byte"}), (3, {"N", "E", "W"}), (4, {"N"}),
                    (5, {"none"}), (6, {"ready", "stalled"})):
        assert {t[i] for t in cov.hits} == want, (i, {t[i] for t in cov.hits})


@pytest.mark.slow
def test_soak_one_node_on_icarus():
    """A reduced soak on four-state Icarus (X-propagation, which two-state Verilator cannot
    show): one chip, its host's stores and its four DMA channels into its own memory.
    ``slow`` (100 s): by default the DMA runs on Icarus in ``tb/dma``'s prefetch race and the
    one-node top in ``test_linkloss.py``'s chip reset."""
    r = run_soak("cluster-single-soak-icarus", 300, seed=72, topology="single",
                 simulator="icarus")
    assert r["stores"] > 0 and r["dma_jobs"] > 0 and r["tlps"] >= 300


@pytest.mark.slow
def test_soak_ring4_long():
    """The long soak: ``PEACH2_SOAK_TLPS`` checked writes (default one million)."""
    tlps = int(os.environ.get("PEACH2_SOAK_TLPS", LONG_TLPS))
    seed = int(os.environ.get("PEACH2_SOAK_SEED", LONG_SEED))
    run_soak("cluster-ring4-soak-long", tlps, seed=seed)
