"""Hybrid collectives (``peach2.sim.hybrid``): the groups, the phases of every network, their
refusals, and runs on the co-simulated machine with every GPU's bytes checked.

The machine runs are 2 sub-clusters of 2x2 (8 nodes, two groups joined by InfiniBand), the
same HDL top as the machine's one-process test: Broadcast and Allgather over MPI alone and
hybrid, each node's GPU0 compared with the Python model by the runner.
"""

import pytest

from peach2.sim.hybrid import Groups, MpiPhase, TcaPhase, allgather, broadcast
from peach2.sim.hybrid.launch import main as launch_main
from peach2.sim.hybrid.launch import parse_run, run
from peach2.sim.hybrid.tuning import choose, load_table
from peach2.sim.run import pick_simulator
from peach2.sim.system import MachinePlan


def test_real_and_virtual_groups():
    real = Groups(MachinePlan("2x2", 2))
    assert (real.size, real.count) == (4, 2)
    assert real.members(1) == [4, 5, 6, 7] and real.local(1) == [0, 1, 2, 3]
    assert [real.of(g) for g in range(8)] == [0] * 4 + [1] * 4
    assert [real.subcluster(k) for k in range(2)] == [0, 1]
    virtual = Groups(MachinePlan("2x4", 1), per_subcluster=2)     # 000 Figure 11
    assert (virtual.size, virtual.count) == (4, 2)
    assert virtual.local(1) == [4, 5, 6, 7] and virtual.subcluster(1) == 0
    assert virtual.leader(0) == 0 and virtual.leader(1) == 4 and virtual.leader(1, root=6) == 6
    with pytest.raises(ValueError, match="must divide"):
        Groups(MachinePlan("2x2", 2), per_subcluster=3)


def test_phases_of_each_network():
    groups = Groups(MachinePlan("2x2", 2))
    kinds = {net: [type(p) for p in broadcast(groups, 8, bytes(8), network=net).phases]
             for net in ("mpi", "hybrid")}
    assert kinds == {"mpi": [MpiPhase], "hybrid": [MpiPhase, TcaPhase]}
    kinds = {net: [type(p) for p in allgather(groups, 4, [bytes(4)] * 8, network=net).phases]
             for net in ("mpi", "hybrid")}
    assert kinds == {"mpi": [MpiPhase], "hybrid": [TcaPhase, MpiPhase]}
    coll = allgather(groups, 2, [bytes([g, g]) for g in range(8)])
    assert coll.initial(3) == bytes(6) + b"\x03\x03" + bytes(8)
    assert coll.expected(5) == b"".join(bytes([g, g]) for g in range(8))
    assert coll.info["mpi_steps"] == 1


def test_refusals():
    groups = Groups(MachinePlan("2x2", 2))
    with pytest.raises(ValueError, match="TCA alone reaches only the nodes of one group"):
        broadcast(groups, 8, bytes(8), network="tca")
    with pytest.raises(ValueError, match="network must be one of"):
        allgather(groups, 4, [bytes(4)] * 8, network="ib")
    with pytest.raises(ValueError, match="size must be >= 1"):
        broadcast(groups, 0, b"")
    with pytest.raises(ValueError, match="root must be a node"):
        broadcast(groups, 1, b"x", root=8)
    with pytest.raises(ValueError, match="8 blocks"):
        allgather(groups, 4, [bytes(4)] * 7)
    with pytest.raises(ValueError, match="power-of-two"):
        allgather(Groups(MachinePlan("ring:3", 2)), 4, [bytes(4)] * 6)
    assert parse_run("allgather:mpi:16,1000") == {"collective": "allgather", "network": "mpi",
                                                   "sizes": [16, 1000]}
    for bad, why in (("bcast:mpi:8", "collective must be"), ("broadcast:ib:8", "network"),
                     ("broadcast:mpi:8,x", "integers"), ("broadcast:mpi:0", "at least 1"),
                     ("broadcast:mpi", "COLLECTIVE:NETWORK:SIZES")):
        with pytest.raises(ValueError, match=why):
            parse_run(bad)
    with pytest.raises(ValueError, match="needs 8388608 bytes of GPU window"):
        run("2x2", 2, [parse_run("allgather:hybrid:1048576")])
    for limits in ([5000], [5000, 0], [None, -1.0]):       # one per size, each positive
        with pytest.raises(ValueError, match="limits_ns: None or a positive time per size"):
            run("2x2", 2, [dict(parse_run("broadcast:mpi:8,16"), limits_ns=limits)])



@pytest.mark.parametrize("argv, why", [
    (["--gpu-read", "5"], "--gpu-read: bytes per second"),
    (["--window-cycles", "29"], "--window-cycles must be 1..28"),
    (["--run", "broadcast:ib:8"], "network")])
def test_launch_refuses_bad_options_before_building(argv, why, capsys):
    args = ["--run", "broadcast:hybrid:8"] if argv[0] != "--run" else []
    with pytest.raises(SystemExit) as exit_:
        launch_main(args + argv)
    assert exit_.value.code == 2 and why in capsys.readouterr().err


def test_broadcast_and_allgather_on_8_nodes_in_2_subclusters(tmp_path):
    """Hybrid and MPI-only Broadcast and Allgather on 2 x 2x2, byte-exact in every GPU0, and
    the hybrid with its options (ring TCA part, MPI steps staged through host memory); the
    hybrid Broadcast's TCA phase starts after its MPI phase (and no more than a window late),
    and at 8 bytes hybrid beats MPI alone (000 sections 6.2-6.3: TCA's latency) and its staged
    form (two cudaMemcpy)."""
    if pick_simulator("verilator") == "icarus":
        pytest.skip("the machine's sub-clusters run on Verilator")
    result = run("2x2", 2, [parse_run("broadcast:hybrid:8,1027"),
                            parse_run("broadcast:mpi:8"),
                            parse_run("allgather:hybrid:16"),
                            parse_run("allgather:mpi:16"),
                            # the staged MPI step copies blocks TCA has just written into
                            # the GPU: the copy must see the last of them
                            parse_run("allgather:hybrid+ring+staged:4096"),
                            parse_run("broadcast:hybrid+staged:8"),
                            # the saved tuning table's choice for 8 nodes in 2 groups
                            parse_run("broadcast:tuned:64"),
                            # cut short after 30 us (a tuning sweep's --cutoff), its
                            # messages still on their way: the machine is left mid-run, so the
                            # run after it is not run
                            dict(parse_run("broadcast:hybrid:65536,8"),
                                 limits_ns=[30000, None])], out=tmp_path / "r.json")
    *result["runs"], cut = result["runs"]
    assert (cut["network"], cut["size"], cut["cut"], cut["over_ns"]) == (
        "hybrid", 65536, True, 30000.0) and "time_ns" not in cut
    assert result["stopped"] == [{"collective": "broadcast", "network": "hybrid", "size": 8}]
    runs = {(r["name"], r["network"], r["size"]): r for r in result["runs"]}
    assert len(runs) == 8 and all(r["checked"] and not r["cut"] for r in runs.values())
    tuned = [r for r in result["runs"] if r["asked"] == "tuned"]
    assert [r["network"] for r in tuned] == [choose(load_table(), "broadcast", 8, 2, 64)]
    for r in runs.values():
        assert r["nodes"] == 8 and r["groups"] == 2 and r["time_ns"] > 0
        assert 0 <= r["handoff_ns"] <= result["window_ps"] / 1000
    bcast = runs[("broadcast", "hybrid", 8)]
    # the leaders' MPI step comes first: node 4 (group 1's leader) is done before its group
    assert bcast["done_ns"]["4"] < max(bcast["done_ns"][str(g)] for g in (5, 6, 7))
    assert runs[("broadcast", "hybrid", 8)]["time_ns"] < runs[("broadcast", "mpi", 8)]["time_ns"]
    assert runs[("allgather", "hybrid", 16)]["time_ns"] < runs[("allgather", "mpi", 16)]["time_ns"]
    assert runs[("broadcast", "hybrid", 1027)]["time_ns"] > bcast["time_ns"]
    assert runs[("broadcast", "hybrid+staged", 8)]["time_ns"] > bcast["time_ns"] + 10_000


def _run_and_check(shape, subclusters, per_subcluster, specs, tmp_path, **kw):
    """Run ``specs`` on the machine; every run byte-checked, the figures per (name, network,
    size)."""
    if pick_simulator("verilator") == "icarus":
        pytest.skip("the machine's sub-clusters run on Verilator")
    result = run(shape, subclusters, [parse_run(x) for x in specs],
                 per_subcluster=per_subcluster, out=tmp_path / "r.json", gpu_read=2.8e9, **kw)
    runs = {(r["name"], r["network"], r["size"]): r for r in result["runs"]}
    assert all(r["checked"] for r in runs.values())
    return runs


@pytest.mark.slow
def test_16_nodes_one_2x8_split(tmp_path):
    """16 nodes, one 2x8 split in two rings of 8 (000 Figure 11 on the whole sub-cluster): the
    hybrid Broadcast and Allgather with every option, MPI alone, byte-exact; the ring's TCA part
    beats recursive doubling's at 4 KiB blocks (no shared cables)."""
    runs = _run_and_check("2x8", 1, 2, [
        "broadcast:hybrid:8,4096", "broadcast:hybrid+staged+hops2:8192", "broadcast:mpi:8",
        "allgather:hybrid:16,4096", "allgather:hybrid+ring:4096",
        "allgather:hybrid+staged+hops2:1024", "allgather:mpi:16"], tmp_path)
    assert runs[("allgather", "hybrid+ring", 4096)]["time_ns"] < \
        runs[("allgather", "hybrid", 4096)]["time_ns"]
    assert runs[("broadcast", "hybrid", 8)]["time_ns"] < runs[("broadcast", "mpi", 8)]["time_ns"]
    assert runs[("allgather", "hybrid+staged+hops2", 1024)]["groups"] == 4


@pytest.mark.slow
def test_32_nodes_two_subclusters(tmp_path):
    """32 nodes, 2 sub-clusters of 2x8 joined only by InfiniBand (the real machine's half): the
    hybrid Broadcast and Allgather, plain and with options, byte-exact in every GPU0."""
    runs = _run_and_check("2x8", 2, 1, [
        "broadcast:hybrid:8", "broadcast:hybrid+staged:4096", "allgather:hybrid:16",
        "allgather:hybrid+ring+staged:512", "allgather:mpi:16"], tmp_path)
    assert {r["nodes"] for r in runs.values()} == {32}


def test_sweep_table_says_what_the_paper_states():
    from peach2.sim.hybrid.sweep import SIZES, table
    rows = [{"size": 8, "mpi_ns": 19_000, "hybrid_ns": 10_000, "ratio": 1.9},
            {"size": 524288, "mpi_ns": 1_000_000, "hybrid_ns": 1_250_000, "ratio": 0.8}]
    text = table(rows, 8, "broadcast")
    assert "| 8 B | 19.0 | 10.0 | 1.90 |" in text and "| 512 KiB | 1000.0 | 1250.0 | 0.80 |" in text
    assert "up to 21% faster" in text
    assert "not measured" in table(rows, 32, "allgather")
    assert all(s == sorted(s) for s in SIZES.values())
