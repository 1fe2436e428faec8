"""The links' utilisation trace on the co-simulated machine and its heatmap
(``peach2.sim.hybrid.heatmap``, ``peach2.sim.system.link_trace``): every link's bytes add up
to what its cable counter or the fabric's deliveries say, no bin is above the link's rate,
recording changes no simulated time, and a small run draws."""

import pytest

from peach2.sim.hybrid import Groups
from peach2.sim.hybrid.heatmap import draw, heat_entry, heat_run, rows, utilisation
from peach2.sim.hybrid.launch import parse_run, run
from peach2.sim.run import pick_simulator
from peach2.sim.system import MachinePlan

GPU_READ = 2.8e9


def _needs_verilator():
    if pick_simulator("verilator") == "icarus":
        pytest.skip("the machine's sub-clusters run on Verilator")


def _check_trace(got):
    trace = got["links"]
    assert trace["bin_ps"] % trace["window_ps"] == 0 and trace["bins"] <= 2 * 120
    for link in trace["links"]:
        assert len(link["bytes"]) == trace["bins"]
        assert sum(link["bytes"]) == link["total"], link["name"]       # exact, every link
        assert max(utilisation(trace, link)) <= 1 + 1e-9, link["name"]
    ib = [link for link in trace["links"] if link["kind"] == "ib"]
    assert sum(x["total"] for x in ib if x["dir"] == "up") == \
        sum(x["total"] for x in ib if x["dir"] == "down")
    return {link["name"]: link["total"] for link in trace["links"]}


def test_trace_and_heatmap_of_a_small_hybrid_broadcast(tmp_path):
    """2 x 2x2, hybrid Broadcast of 64 bytes three times (the second traced) and a traced
    Allgather: the traced Broadcast takes the same time as the untraced one after it (the
    first run warms the machine up); its InfiniBand bytes are the leaders' (0 -> 4), its TCA
    bytes the binomial tree's cables; the picture draws."""
    _needs_verilator()
    bcast = parse_run("broadcast:hybrid:64")
    runs = [bcast, {**bcast, "trace": True}, bcast,
            {**parse_run("allgather:hybrid:32"), "trace": True}]
    result = run("2x2", 2, runs, gpu_read=GPU_READ, out=tmp_path / "r.json")
    first, traced, after, gather = result["runs"]
    assert "links" in traced and "links" not in after and "links" in gather
    for key in ("time_ns", "done_ns"):
        assert traced[key] == after[key]
    totals = _check_trace(traced)
    assert totals["HCA 0 -> switch"] >= 64 and totals["switch -> HCA 4"] >= 64
    assert all(totals[f"HCA {g} -> switch"] < 64 for g in range(1, 8))    # acknowledgements
    for cable in ("0.S->2.S", "0.E->1.W", "2.E->3.W", "4.S->6.S", "4.E->5.W", "6.E->7.W"):
        assert totals[cable] >= 64, cable          # the tree: 0 -> 2, then 0 -> 1, 2 -> 3
    assert totals["1.W->0.E"] < 64 and totals["2.S->0.S"] < 64     # back: flags at most
    assert traced["phase_kinds"] == ["mpi", "tca"]
    totals = _check_trace(gather)
    assert all(totals[f"HCA {g} -> switch"] >= 4 * 32 for g in range(8))
    assert gather["phase_kinds"] == ["tca", "mpi"]

    plan = MachinePlan("2x2", 2)
    heat = heat_entry(traced, plan, Groups(plan))
    order = rows(heat)
    assert [g for g, _ in order][:12] == ["sub-cluster 0, group 0"] * 12
    assert [g for g, _ in order][-16:] == ["InfiniBand"] * 16 and len(order) == 40
    png = draw(heat, tmp_path / "heat.png")
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_trace_changes_no_time_on_a_fresh_machine(tmp_path):
    """The strongest form: a fresh machine's first run, traced and untraced (two machines),
    hybrid Allgather of 4 KiB blocks; every node's end identical to the picosecond."""
    _needs_verilator()
    heat = heat_run("2x2", 2, 1, "allgather:hybrid:4096")
    plain = run("2x2", 2, [parse_run("allgather:hybrid:4096")], gpu_read=heat["gpu_read"],
                out=tmp_path / "r.json")["runs"][0]
    assert heat["time_ns"] == plain["time_ns"] and heat["done_ns"] == plain["done_ns"]
    used = {link["name"] for link in heat["links"]["links"]
            if sum(link["bytes"]) and link["kind"] == "tca"}
    # both E-W cables of a pair carry one direction each (E port to W port), S both ways
    assert used == {name for s in (0, 4) for name in (
        f"{s}.E->{s + 1}.W", f"{s + 1}.E->{s}.W", f"{s + 2}.E->{s + 3}.W", f"{s + 3}.E->{s + 2}.W",
        f"{s}.S->{s + 2}.S", f"{s + 2}.S->{s}.S", f"{s + 1}.S->{s + 3}.S", f"{s + 3}.S->{s + 1}.S")}
