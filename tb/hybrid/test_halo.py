"""Himeno's halo exchange (``peach2.sim.hybrid.halo``): the Python model (planes, pack slots,
the grid's mapping onto groups), the descriptors of the TCA parts, refusals, the ``mpi``
network's programs on the MPI model alone, and runs on the co-simulated machine with every
GPU's bytes checked.

Machine runs (Verilator): one 2x4 sub-cluster (8 nodes) runs a small array over all three
networks, the hybrid splitting it in two groups (000 Figure 11); the 16-node (2, 8, 1) and
(4, 4, 1) runs on one 2x8 are ``slow``.  Himeno's sizes run in ``halo_bench``.
"""

import random
from array import array

import pytest

from peach2.routes import default_address_map
from peach2.sim.collectives import HaloGrid, Memories, halo_local
from peach2.sim.hybrid import (
    MpiPhase,
    Overlap,
    PackKernel,
    TcaPhase,
    halo,
    halo_grid,
    halo_groups,
    himeno_array,
)
from peach2.sim.hybrid.halo import plane_bytes, put_plane
from peach2.sim.hybrid.launch import parse_halo, parse_run, run
from peach2.sim.mpi import preset
from peach2.sim.run import pick_simulator
from peach2.sim.system import MachinePlan

HOST = 1 << 20


def test_planes_of_a_local_array():
    """A jk plane is one run of nj * nk elements; an ik plane ni runs of nk elements one local
    row apart; put_plane is plane_bytes' inverse."""
    grid = HaloGrid.box((4, 6, 3), 2, 2, elem=4)          # local (2+2) x (3+2) x 3
    local = bytearray(range(grid.local_bytes))
    row = 3 * 4

    def at(i, j):
        return bytes(local[grid.offset(i, j):grid.offset(i, j) + row])
    assert plane_bytes(grid, local, 0, 2) == at(2, 1) + at(2, 2) + at(2, 3)
    assert plane_bytes(grid, local, 1, 3) == at(1, 3) + at(2, 3)
    assert grid.plane(1, 3)[1:] == (row, 2, 5 * row - row)
    other = bytearray(len(local))
    put_plane(grid, other, 1, 0, plane_bytes(grid, local, 1, 3))
    assert bytes(other[grid.offset(1, 0):grid.offset(1, 0) + row]) == at(1, 3)
    assert bytes(other[grid.offset(2, 0):grid.offset(2, 0) + row]) == at(2, 3)
    with pytest.raises(ValueError, match="a plane of 2 x 12 bytes, not 5"):
        put_plane(grid, other, 1, 0, b"12345")


def test_himeno_array_is_float32_in_c_order():
    whole = himeno_array((2, 3, 4), seed=5)
    values = array("f", whole)
    assert len(values) == 24 and all(0 <= v < 1 for v in values)
    assert len(set(values)) == 24 and whole == himeno_array((2, 3, 4), seed=5)
    assert whole != himeno_array((2, 3, 4), seed=6)


def test_groups_follow_the_grid():
    """j neighbours share a group, i neighbours never; the 8-node machines of the test and
    the 16-node ones of 000 section 6.1."""
    grid = halo_grid({"dims": (64, 64, 128), "grid": (2, 4)})
    real = halo_groups(MachinePlan("2x2", 2), grid, "hybrid")
    virtual = halo_groups(MachinePlan("2x4", 1), grid, "hybrid")
    for groups in (real, virtual):
        assert (groups.count, groups.size) == (2, 4)
        for g in range(8):
            for step in (-1, 1):
                j, i = grid.neighbour(g, 1, step), grid.neighbour(g, 0, step)
                assert j is None or groups.of(j) == groups.of(g)
                assert i is None or groups.of(i) != groups.of(g)
    assert halo_groups(MachinePlan("2x4", 1), grid, "tca").count == 1
    sixteen = {(2, 8): (2, 8), (4, 4): (4, 4)}
    for (pi, pj), want in sixteen.items():
        g = halo_grid({"dims": (128, 128, 256), "grid": (pi, pj)})
        groups = halo_groups(MachinePlan("2x8", 1), g, "hybrid")
        assert (groups.count, groups.size) == want


class _Ctx:
    """What a TCA phase's build reads of a run's context: Memories, the buffer's place."""

    def __init__(self, n):
        self.n_nodes = n
        self.address_map = default_address_map(n, host_size=HOST)
        self.mem_ = [bytearray(HOST) for _ in range(n)]
        self.offset, self.window = HOST // 2, "host"
        self._mem = Memories(self)

    def memory(self, node):                  # the cluster side of Memories
        return (node + 1) << 36, self.mem_[node]

    def mem(self, k):
        return self._mem


def _transfers(coll):
    return {prog.node: [t for s in prog.steps for t in s.transfers] for prog in coll.programs}


def test_descriptors_of_each_network():
    """tca: i planes one burst, j planes one block-stride descriptor (ni runs of nk floats,
    the gap the rest of a local row); hybrid: only the j descriptors, inside each group;
    mpi: no descriptor, pack slots after the local array."""
    grid = HaloGrid.box((8, 8, 16), 2, 4, elem=4)     # ni 4, nj 2, nk 16
    whole = himeno_array(grid.dims, 1)
    plan = MachinePlan("2x4", 1)
    row, gap = 16 * 4, (2 + 2) * 16 * 4 - 16 * 4
    tca = halo(halo_groups(plan, grid, "tca"), grid, whole, network="tca")
    coll = tca.phases[0].build(_Ctx(8), 0)
    shapes = sorted({(t.length, t.count, t.src_gap, t.dst_gap) for ts in _transfers(coll).values()
                     for t in ts})
    assert shapes == [(row, 4, gap, gap), (2 * row, None, 0, 0)]
    assert coll.info["descriptors"] == 2 * 4 + 2 * 2 * 3    # 4 i pairs, 3 j pairs per row
    hybrid = halo(halo_groups(plan, grid, "hybrid"), grid, whole, network="hybrid")
    (phase,) = hybrid.phases
    assert isinstance(phase, Overlap)
    assert isinstance(phase.part(MpiPhase), MpiPhase) and isinstance(phase.part(TcaPhase),
                                                                     TcaPhase)
    for k in (0, 1):
        coll = phase.part(TcaPhase).build(_Ctx(8), k)
        sent = _transfers(coll)
        assert sorted(sent) == list(range(4 * k, 4 * k + 4))
        assert all((t.length, t.count) == (row, 4) for ts in sent.values() for t in ts)
        assert sorted(len(ts) for ts in sent.values()) == [1, 1, 2, 2]
    mpi = halo(halo_groups(plan, grid, "mpi"), grid, whole, network="mpi")
    assert [type(p) for p in mpi.phases] == [MpiPhase]
    assert mpi.nbytes == grid.local_bytes + 4 * 4 * row
    assert hybrid.info["block_stride_share"] == pytest.approx(12 * 4 * row / (12 * 4 * row
                                                                               + 8 * 2 * row))


def test_refusals():
    grid = halo_grid({"dims": (64, 64, 128), "grid": (2, 4)})
    whole = bytes(64 * 64 * 128 * 4)
    with pytest.raises(ValueError, match="does not divide into 3 x 4 blocks"):
        halo_grid({"dims": (64, 64, 128), "grid": (3, 4)})
    with pytest.raises(ValueError, match="a 4 x 4 grid needs 16 nodes; the machine has 8"):
        halo_groups(MachinePlan("2x2", 2), halo_grid({"dims": (64, 64, 128), "grid": (4, 4)}),
                    "mpi")
    with pytest.raises(ValueError, match="TCA alone reaches one sub-cluster"):
        halo_groups(MachinePlan("2x2", 2), grid, "tca")
    with pytest.raises(ValueError, match="3 does not divide the sub-cluster's 4 nodes"):
        halo_groups(MachinePlan("2x2", 2), halo_grid({"dims": (6, 6, 4), "grid": (2, 3)}),
                    "hybrid")
    with pytest.raises(ValueError, match="network must be one of"):
        halo_groups(MachinePlan("2x2", 2), grid, "ib")
    groups = halo_groups(MachinePlan("2x2", 2), grid, "mpi")
    with pytest.raises(ValueError, match="each group must be one row of the grid"):
        halo(halo_groups(MachinePlan("2x4", 1), grid, "tca"), grid, whole, network="hybrid")
    with pytest.raises(ValueError, match="must have 2097152 bytes, not 7"):
        halo(groups, grid, b"1234567", network="mpi")
    with pytest.raises(ValueError, match="launch_ps"):
        PackKernel(launch_ps=-1)
    with pytest.raises(ValueError, match="bytes_per_s"):
        PackKernel(bytes_per_s=0)
    assert parse_halo("small/2x4") == {"dims": [64, 64, 128], "grid": [2, 4], "elem": 4}
    assert parse_run("halo:mpi:8x8x16/2x4/8,middle/4x4")["sizes"][1]["dims"] == [128, 128, 256]
    for bad in ("small", "64x64/2x4", "small/2x4x1", "small/2xa"):
        with pytest.raises(ValueError, match="a halo size is"):
            parse_halo(bad)
    with pytest.raises(ValueError, match="does not divide"):
        parse_halo("small/3x4")


def test_pack_kernel_time():
    """One launch per plane, each byte read and written once at the kernel's rate."""
    pack = PackKernel(launch_ps=1_000_000, bytes_per_s=100e9)
    assert pack.time_ps([]) == 0
    assert pack.time_ps([50_000]) == 1_000_000 + 1_000_000
    assert pack.time_ps([50_000, 50_000]) == 2 * pack.time_ps([50_000])


def test_mpi_network_on_the_mpi_model_alone():
    """The ``mpi`` network's rank programs on MVAPICH2-GDR's model (no TCA, no simulator):
    every node's array and pack slots equal the model; packing costs its kernel time."""
    grid = HaloGrid.box((8, 8, 16), 2, 4, elem=4)
    whole = himeno_array(grid.dims, 2)
    plan = MachinePlan("2x4", 1)
    coll = halo(halo_groups(plan, grid, "mpi"), grid, whole, network="mpi", seed=3)

    def times(pack):
        coll = halo(halo_groups(plan, grid, "mpi"), grid, whole, network="mpi", pack=pack)
        world = preset("MV2GDR-QPI-Tuned").world(8)
        bufs = {r.rank: r.alloc(coll.nbytes, "gpu0") for r in world.ranks}
        for g, b in bufs.items():
            b.write(coll.initial(g))

        class Ctx:
            def buffer(self, g):
                return bufs[g]
        world.run(lambda rank: coll.phases[0].program(Ctx(), rank))
        for g, b in bufs.items():
            assert b.read() == coll.expected(g), f"node {g}"
        return world.now
    assert coll.initial(0)[:grid.local_bytes] == halo_local(
        grid, whole, 0, random.Random("halo-fill:3:0").randbytes(grid.local_bytes))
    slow = times(PackKernel(launch_ps=20_000_000))
    fast = times(PackKernel())
    assert slow - fast >= 2 * (20_000_000 - 3_200_000)      # a pack and an unpack on the path


def _machine(tmp_path, shape, subclusters, runs, gpu_size=1 << 20):
    if pick_simulator("verilator") == "icarus":
        pytest.skip("the machine's sub-clusters run on Verilator")
    result = run(shape, subclusters, [parse_run(r) for r in runs], gpu_size=gpu_size,
                 out=tmp_path / "r.json")
    got = {(r["network"], tuple(r["size"]["grid"])): r for r in result["runs"]}
    assert all(r["checked"] and r["time_ns"] > 0 for r in got.values())
    return got


def test_halo_on_8_nodes(tmp_path):
    """A 16 x 16 x 32 float array over (2, 4) on one 2x4 sub-cluster split in two groups
    (000 Figure 11): tca, mpi and hybrid byte-exact in every GPU0; the hybrid's j planes go
    by TCA (its groups are the grid's rows) and it beats MPI with pack/unpack."""
    got = _machine(tmp_path, "2x4", 1, ["halo:tca:16x16x32/2x4", "halo:mpi:16x16x32/2x4",
                                        "halo:hybrid:16x16x32/2x4"])
    assert {r["groups"] for r in got.values()} == {1, 2}
    hybrid, mpi = got[("hybrid", (2, 4))], got[("mpi", (2, 4))]
    assert hybrid["groups"] == 2 and hybrid["phases"] == ["i over MPI with j over TCA"]
    assert hybrid["time_ns"] < mpi["time_ns"]
    assert got[("tca", (2, 4))]["time_ns"] < mpi["time_ns"]


@pytest.mark.slow
def test_halo_on_16_nodes(tmp_path):
    """(2, 8, 1) and (4, 4, 1) on one 2x8 sub-cluster, groups of one grid row, every GPU0
    checked (an array small enough for a test; halo_bench runs Himeno's sizes)."""
    got = _machine(tmp_path, "2x8", 1, ["halo:hybrid:16x32x32/2x8,16x16x32/4x4",
                                        "halo:mpi:16x32x32/2x8,16x16x32/4x4"])
    for grid in ((2, 8), (4, 4)):
        assert got[("hybrid", grid)]["groups"] == grid[0]
        assert got[("hybrid", grid)]["time_ns"] < got[("mpi", grid)]["time_ns"]


def test_bench_tables_say_what_the_paper_states():
    from peach2.sim.hybrid.halo_bench import GRIDS, tables
    rows = [{"figure": "9", "nodes": 8, "size": "small", "grid": [2, 4], "network": net,
             "time_us": t, "block_stride_share": 0.8}
            for net, t in (("tca", 10.0), ("mpi", 30.0), ("hybrid", 20.0))]
    rows += [{"figure": "6", "plane": p, "n": 64, "network": net, "mb_per_s": v}
             for (p, net), v in {("jk", "tca"): 2000, ("jk", "mpi"): 900, ("ik", "tca"): 1900,
                                 ("ik", "mpi"): 500}.items()]
    text = tables(rows)
    assert "| small | 8 | (2, 4, 1) | 80% | 10.0 | 30.0 | 20.0 | 1.50 | 3.00 |" in text
    assert "| 64 | 32 KiB | 2000 | 900 | 1900 | 500 |" in text
    assert "hybrid up to 40% faster than MV2GDR" in text and "N = 512-576" in text
    assert GRIDS[8] == [(2, 4)] and sorted(GRIDS[16]) == [(2, 8), (4, 4)]
