"""MVAPICH2's "naive" CUDA collectives on the MPI model (no simulator): GPU buffers staged
through host memory (``naive_cuda_bcast``, ``naive_cuda_allgather``), byte for byte against a
Python reference, their messages host to host, and the unstaged algorithm where MVAPICH2 would
not stage (host buffers, above the limit, ``MV2_CUDA_USE_NAIVE`` off)."""

import random

import pytest
from mpi_runs import bcast_on_model, record_isends

from peach2.sim.mpi import MPIError, preset
from peach2.sim.mpi.collective import allgather, mv2_bcast, naive_cuda_allgather, naive_cuda_bcast

KIB = 1 << 10
OFFSET = 32


@pytest.fixture
def sent_from(monkeypatch):
    """The memory ("host0", "gpu0", ...) of every collective message's send buffer."""
    return record_isends(monkeypatch, lambda rank, buf, dest, count, offset: buf.where)


def bcast_run(fn, p, count, root, where="gpu0", **kw):
    got, want, times = bcast_on_model(fn, p, count, root, configuration="MV2GDR-QPI-Tuned",
                                      where=where, offset=OFFSET, tail=8,
                                      key=(p, count, root, where), **kw)
    assert got == want
    return max(times)


def allgather_run(fn, p, block, where="gpu0", **kw):
    world = preset("MV2GDR-QPI-Tuned").world(p)
    rng = random.Random(repr((p, block, where)))
    before = [bytearray(rng.randbytes(OFFSET + p * block + 8)) for _ in range(p)]
    held = kw.get("held", 1)
    for r in range(p):          # rank r holds its aligned group's blocks already
        for b in range(r & -held, (r & -held) + held):
            before[r][OFFSET + b * block:OFFSET + (b + 1) * block] = \
                before[b][OFFSET + b * block:OFFSET + (b + 1) * block]
    before = [bytes(b) for b in before]
    bufs = []
    for rank, data in zip(world.ranks, before):
        buf = rank.alloc(len(data), where)
        buf.write(data)
        bufs.append(buf)
    whole = b"".join(before[r][OFFSET + r * block:OFFSET + (r + 1) * block] for r in range(p))
    want = [b[:OFFSET] + whole + b[OFFSET + p * block:] for b in before]

    def program(rank):
        yield from fn(rank, bufs[rank.rank], block, OFFSET, **kw)
        return rank.now
    times = world.run(program)
    assert [b.read() for b in bufs] == want
    return max(times)


@pytest.mark.parametrize("p, root, count", [(8, 0, 8), (8, 5, 4 * KIB), (5, 2, 64 * KIB),
                                            (16, 9, 16 * KIB), (2, 1, 1), (1, 0, 8)])
def test_staged_bcast_bytes_and_host_messages(sent_from, p, root, count):
    bcast_run(naive_cuda_bcast, p, count, root)
    assert set(sent_from) <= {"host0"}                 # GPU0's socket: every message host-host
    assert len(sent_from) >= (p > 1) * (p - 1)


@pytest.mark.parametrize("p, block", [(8, 16), (8, 4 * KIB), (4, 64 * KIB), (16, 1 * KIB)])
def test_staged_allgather_bytes_and_host_messages(sent_from, p, block):
    allgather_run(naive_cuda_allgather, p, block)
    assert sent_from and set(sent_from) == {"host0"}


@pytest.mark.parametrize("fn", [allgather, naive_cuda_allgather])
@pytest.mark.parametrize("p, held, block", [(8, 4, 16), (16, 8, 3 * KIB), (8, 8, 5),
                                            (4, 1, 7)])
def test_allgather_from_held_groups(sent_from, fn, p, held, block):
    """``held``: every rank holds its aligned group's blocks (a hybrid's TCA groups gathered
    them); only the ``log2(p / held)`` steps between groups are sent, every byte right."""
    allgather_run(fn, p, block, held=held)
    assert len(sent_from) == p * (p // held).bit_length() - p


def test_allgather_refuses_a_bad_held():
    world = preset("MV2GDR-QPI-Tuned").world(8)
    rank = world.ranks[0]
    buf = rank.alloc(64, "gpu0")
    for held in (0, 3, 16, True, 2.0):
        for fn in (allgather, naive_cuda_allgather):
            with pytest.raises(MPIError, match="held must be a power of two"):
                fn(rank, buf, 8, held=held)


def test_staging_is_what_makes_medium_gpu_messages_fast():
    """GPU0 across QPI moves 8 KiB by GPUDirect at ~126 MB/s; staged, 4 KiB collectives pay two
    cudaMemcpy and run host to host: well over twice as fast on 8 ranks."""
    assert bcast_run(naive_cuda_bcast, 8, 4 * KIB, 0) * 2 < bcast_run(mv2_bcast, 8, 4 * KIB, 0)
    assert allgather_run(naive_cuda_allgather, 8, 4 * KIB) * 2 < \
        allgather_run(allgather, 8, 4 * KIB)


def test_not_staged_where_mvapich2_does_not_stage(sent_from):
    """Host buffers, MV2_CUDA_USE_NAIVE off and messages above the limit take the unstaged
    algorithm, to the picosecond."""
    assert bcast_run(naive_cuda_bcast, 8, 4 * KIB, 3, "host0") == \
        bcast_run(mv2_bcast, 8, 4 * KIB, 3, "host0")
    assert bcast_run(naive_cuda_bcast, 8, 4 * KIB, 3, naive=False) == \
        bcast_run(mv2_bcast, 8, 4 * KIB, 3)
    assert bcast_run(naive_cuda_bcast, 4, 4 * KIB, 1, limit=4 * KIB - 1) == \
        bcast_run(mv2_bcast, 4, 4 * KIB, 1)
    assert allgather_run(naive_cuda_allgather, 4, 2 * KIB, limit=KIB) == \
        allgather_run(allgather, 4, 2 * KIB)
    sent_from.clear()
    allgather_run(naive_cuda_allgather, 4, 2 * KIB, naive=False)
    assert set(sent_from) == {"gpu0"}


def test_bad_input_is_refused_before_staging():
    world = preset("MV2GDR-QPI-Tuned").world(4)
    rank = world.ranks[0]
    buf = rank.alloc(64, "gpu0")
    with pytest.raises(MPIError, match="root"):
        naive_cuda_bcast(rank, buf, 8, 4)
    with pytest.raises(MPIError, match="leave"):
        naive_cuda_bcast(rank, buf, 65, 0)
    with pytest.raises(MPIError, match="leave"):
        naive_cuda_allgather(rank, buf, 17)
    odd = preset("MV2GDR-QPI-Tuned").world(3)
    with pytest.raises(MPIError, match="power-of-two"):
        naive_cuda_allgather(odd.ranks[0], odd.ranks[0].alloc(48, "gpu0"), 16)
