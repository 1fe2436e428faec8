"""Calibration of the whole model (node, InfiniBand, MPI) and its determinism (no simulator).

Targets (one-way 8-byte GPU-to-GPU latency, HA-PACS/TCA as presented at GTC 2014): MPI over
InfiniBand with GPUDirect RDMA 6.5 us, staged through host memory 17 us; each within 15%, and
refitting their one parameter gives the default back.  Not fitted, checked: MV2GDR-QPI stays
at or under ~290 MB/s up to 256 KB and joins MV2GDR from 512 KB (Odajima et al., section 4),
the tuned setting beats it in between, host-to-host latency is ConnectX-3-like.  The same
programs give the same bytes and the same times.
"""

import random

import pytest

from peach2.sim.mpi import World, preset
from peach2.sim.mpi.pingpong import TARGETS, checks, fit, pingpong, table
from peach2.sim.node import NodeParams

KIB = 1 << 10
US = 1_000_000


@pytest.mark.parametrize("index", range(len(TARGETS)))
def test_latency_targets(index):
    _what, config, target, _source, _name, _owner = TARGETS[index]
    one_way, _ = pingpong(config, 8)
    assert abs(one_way / US / target - 1) <= 0.15
    assert abs(one_way / US / target - 1) <= 0.01          # it is fitted, after all


@pytest.mark.parametrize("index", range(len(TARGETS)))
def test_fit_gives_the_defaults_back(index):
    value, model = fit(index)
    _what, _config, target, _source, name, owner = TARGETS[index]
    assert abs(model - target) < 0.02
    if owner == "node":
        assert value == getattr(NodeParams(), name)
    else:
        assert value == getattr(preset("MV2GDR").params, name)


def test_fitted_copy_launch_is_plausible():
    """GMPI (001) measured a kernel launch at 3.2 us, 11 us with synchronisation."""
    assert 3.2 * US < NodeParams().copy_launch_ps < 11 * US


def test_qpi_cap_and_protocol_switch():
    sizes = [8, 8 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 512 * KIB]
    curves = table(sizes)
    by = {name: {r["size"]: r for r in rows} for name, rows in curves.items()}
    for n in sizes[:-1]:
        assert by["MV2GDR-QPI"][n]["mb_s"] <= 290 * 1.0      # ~290 MB/s at most, 000 sec. 4
        assert by["MV2GDR"][n]["mb_s"] >= by["MV2GDR-QPI"][n]["mb_s"]
    assert by["MV2GDR-QPI"][256 * KIB]["mb_s"] > 0.85 * 290   # and it gets close to it
    big = 512 * KIB                                            # host staging: the same again
    assert abs(by["MV2GDR-QPI"][big]["mb_s"] / by["MV2GDR"][big]["mb_s"] - 1) < 0.01
    for n in (16 * KIB, 64 * KIB, 256 * KIB):
        assert by["MV2GDR-QPI-Tuned"][n]["mb_s"] > 2 * by["MV2GDR-QPI"][n]["mb_s"]
    assert by["MV2GDR"][big]["send"] == "rndv-staged-pipelined"
    assert all(row["ok"] for row in checks(curves))


def test_bandwidth_grows_with_size_on_each_path():
    for name in ("MV2GDR", "MV2GDR-QPI-Tuned"):
        rates = [r["mb_s"] for r in table([1 * KIB, 4 * KIB, 32 * KIB, 128 * KIB], [name])[name]]
        assert rates == sorted(rates)


def _mixed(world):
    """All-to-all with mixed sizes, placements and wildcards; returns times and digests."""
    n = world.size
    sizes = [8, 3000, 9000, 20_000, 300_000]
    where = ["gpu2", "host", "gpu0", "gpu2", "host1"]
    outs = {(r, d): world.rank(r).alloc(sizes[(r + d) % 5], where[(r + 2 * d) % 5])
            for r in range(n) for d in range(n) if r != d}
    ins = {(r, s): world.rank(r).alloc(sizes[(s + r) % 5], where[(s + r) % 5])
           for r in range(n) for s in range(n) if r != s}
    for (r, d), buf in outs.items():
        buf.write(random.Random(r * 31 + d).randbytes(buf.length))

    def program(rank):
        me = rank.rank
        reqs = [rank.irecv(ins[me, s], s, 11) for s in range(n) if s != me]
        reqs += [rank.isend(outs[me, d], d, 11) for d in range(n) if d != me]
        statuses = yield rank.waitall(reqs)
        return rank.now, [(s.source, s.count, s.protocol) for s in statuses]

    results = world.run(program)
    for (r, s), buf in ins.items():
        assert buf.read() == outs[s, r].read()
    return results, world.now


def test_deterministic():
    first = _mixed(World(4))
    second = _mixed(World(4))
    assert first == second
    assert len({t for t, _ in first[0]}) > 1                   # ranks finish at different times


def test_repeatable_within_one_world():
    """Later identical round trips take exactly the time of the first measured one."""
    one, _ = pingpong("MV2GDR", 20 * KIB, iters=1)
    three, _ = pingpong("MV2GDR", 20 * KIB, iters=3)
    assert one == three
