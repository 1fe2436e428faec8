"""Bad input to the MPI model gives a clear MPIError and loses nothing (no simulator).

A receive too small fails with MPI_ERR_TRUNCATE while its message stays queued for a receive
that can hold it (eager and rendezvous, posted before or after the message arrived); an
unknown rank, a bad tag, a buffer the rank never allocated (or freed, or another rank's), a
range outside the buffer, a request of another rank, a GPU buffer without CUDA support, a
program that deadlocks or yields nonsense: each raises at once, naming what was wrong.
"""

import random

import pytest

from peach2.sim.mpi import (
    ANY_TAG,
    ERR_BUFFER,
    ERR_COUNT,
    ERR_OTHER,
    ERR_RANK,
    ERR_REQUEST,
    ERR_TAG,
    ERR_TRUNCATE,
    TAG_UB,
    Deadlock,
    MPIError,
    MPIParams,
    World,
    preset,
)

KIB = 1 << 10


@pytest.mark.parametrize("nbytes, where", [(100, "host"), (4 * KIB, "gpu2"),
                                           (64 * KIB, "host"), (300 * KIB, "gpu2")])
@pytest.mark.parametrize("late", [False, True])
def test_truncate_keeps_the_message(nbytes, where, late):
    world = World(2)
    r0, r1 = world.ranks
    src, small, big = r0.alloc(nbytes, where), r1.alloc(nbytes // 2, where), \
        r1.alloc(nbytes, where)
    data = random.Random(nbytes).randbytes(nbytes)
    src.write(data)

    def program(rank):
        if rank.rank == 0:
            yield rank.send(src, 1, 4)
            return "sent"
        if late:
            yield rank.elapse(20_000_000)              # the message (or its RTS) is waiting
        with pytest.raises(MPIError) as info:
            yield rank.recv(small, 0, ANY_TAG)
        assert info.value.code == ERR_TRUNCATE
        assert f"{nbytes} bytes" in str(info.value) and "kept" in str(info.value)
        status = yield rank.recv(big, 0, 4)            # nothing lost
        return status

    sent, status = world.run(program)
    assert sent == "sent" and status.count == nbytes and big.read() == data
    assert small.read() == bytes(nbytes // 2)           # the short buffer was not touched


def test_truncate_lets_the_next_receive_take_it():
    world = World(2)
    r0, r1 = world.ranks
    src, small, big = r0.alloc(64), r1.alloc(8), r1.alloc(64)
    src.write(b"m" * 64)

    def program(rank):
        if rank.rank == 0:
            yield rank.elapse(1_000_000)
            yield rank.send(src, 1, 0)
            return None
        reqs = [rank.irecv(small, 0, 0), rank.irecv(big, 0, 0)]
        yield rank.wait(reqs[1])
        return reqs

    small_req, big_req = world.run(program)[1]
    assert small_req.error.code == ERR_TRUNCATE and big_req.status.count == 64
    assert big.read() == b"m" * 64


def test_unknown_ranks_and_tags():
    world = World(2)
    r0 = world.rank(0)
    buf = r0.alloc(8)
    for call, args, code in [(r0.isend, (buf, 2, 0), ERR_RANK),
                             (r0.isend, (buf, -1, 0), ERR_RANK),
                             (r0.irecv, (buf, 7, 0), ERR_RANK),
                             (r0.isend, (buf, True, 0), ERR_RANK),
                             (r0.isend, (buf, 1, -1), ERR_TAG),
                             (r0.isend, (buf, 1, TAG_UB + 1), ERR_TAG),
                             (r0.irecv, (buf, 1, -5), ERR_TAG)]:
        with pytest.raises(MPIError) as info:
            call(*args)
        assert info.value.code == code
    with pytest.raises(MPIError, match=r"dest = 2 is not a rank of this world \(0\.\.1\)"):
        r0.isend(buf, 2, 0)
    assert world.run(lambda rank: None) == [None, None]   # nothing was started


def test_unregistered_and_foreign_buffers():
    world = World(2)
    r0, r1 = world.ranks
    mine, theirs = r0.alloc(64), r1.alloc(64)
    with pytest.raises(MPIError, match="not a buffer from Rank.alloc") as info:
        r0.isend(mine.addr, 1, 0)                      # a bare address, never registered
    assert info.value.code == ERR_BUFFER
    with pytest.raises(MPIError, match="not a live buffer of this rank"):
        r0.isend(theirs, 1, 0)
    gone = r0.alloc(64)
    r0.free(gone)
    with pytest.raises(MPIError, match="not a live buffer") as info:
        r0.irecv(gone, 1, 0)
    assert info.value.code == ERR_BUFFER
    for count, offset in [(65, 0), (60, 10), (-1, 0)]:
        with pytest.raises(MPIError) as info:
            r0.isend(mine, 1, 0, count=count, offset=offset)
        assert info.value.code == ERR_COUNT


def test_buffer_in_use_cannot_be_freed():
    world = World(2)
    r0 = world.rank(0)
    buf = r0.alloc(64)
    r0.irecv(buf, 1, 0)
    with pytest.raises(MPIError, match="still in use") as info:
        r0.free(buf)
    assert info.value.code == ERR_BUFFER


def test_gpu_buffer_needs_cuda():
    world = World(2, MPIParams(MV2_USE_CUDA=False))
    buf = world.rank(0).alloc(64, "gpu2")
    with pytest.raises(MPIError, match="MV2_USE_CUDA") as info:
        world.rank(0).isend(buf, 1, 0)
    assert info.value.code == ERR_OTHER


def test_foreign_request():
    world = World(2)
    req = world.rank(0).irecv(world.rank(0).alloc(8), 1, 0)
    with pytest.raises(MPIError) as info:
        world.rank(1).wait(req)
    assert info.value.code == ERR_REQUEST


def test_deadlock_is_reported():
    world = World(2)
    bufs = [r.alloc(8) for r in world.ranks]

    def program(rank):                                  # both receive, nobody sends
        yield rank.recv(bufs[rank.rank], 1 - rank.rank, 0)

    with pytest.raises(Deadlock, match="rank 0: Wait") as info:
        world.run(program)
    assert set(info.value.blocked) == {0, 1}


def test_program_must_yield_waits():
    world = World(2)

    def program(rank):
        yield 5

    with pytest.raises(TypeError, match="yielded 5"):
        world.run(program)


def test_params_refuse_nonsense():
    with pytest.raises(ValueError, match="MV2_GPUDIRECT_LIMIT"):
        MPIParams(MV2_GPUDIRECT_LIMIT=-1)
    with pytest.raises(ValueError, match="MV2_USE_GPUDIRECT"):
        MPIParams(MV2_USE_GPUDIRECT=1)
    with pytest.raises(ValueError, match="MV2_PREPOST_DEPTH"):
        MPIParams(MV2_PREPOST_DEPTH=0)
    with pytest.raises(ValueError, match="no preset 'MV2'"):
        preset("MV2")
