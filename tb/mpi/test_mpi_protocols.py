"""Every protocol path of the MPI model, byte for byte (no simulator).

::

    rank 0 (node 0)                                   rank 1 (node 1)
    GPU/host buffer --HCA--+                 +--HCA-- GPU/host buffer
                           +-- QDR switch ---+

For each size and buffer placement the test checks which protocol the sender and the receiver
used (eager: GDR read / staged / inline; rendezvous: direct / host staging / pipelined) and that
every byte arrived; also matching order, wildcards, unexpected messages, self-sends, a
collective written with isend/irecv/waitall, and contention at one receiver.
"""

import random

import pytest

from peach2.sim.mpi import ANY_SOURCE, ANY_TAG, World, preset

KIB = 1 << 10


def exchange(world, nbytes, where, *, recv_first=False, count=None):
    """Send ``nbytes`` from rank 0 to rank 1; return (send status, recv status, ok)."""
    r0, r1 = world.ranks
    a, b = r0.alloc(nbytes, where), r1.alloc(count or nbytes, where)
    data = random.Random(nbytes).randbytes(nbytes)
    a.write(data)

    def program(rank):
        if rank.rank == 0:
            if not recv_first:
                return (yield rank.send(a, 1, 5))
            yield rank.elapse(50_000_000)           # let the receive be posted long before
            return (yield rank.send(a, 1, 5))
        if recv_first:
            return (yield rank.recv(b, 0, 5))
        yield rank.elapse(3_000_000_000)            # arrive unexpected (rndv waits for us)
        return (yield rank.recv(b, 0, 5))

    sent, got = world.run(program)
    return sent, got, b.read(0, nbytes) == data


@pytest.mark.parametrize("config, nbytes, send, recv", [
    # MVAPICH2-GDR 2.0, GPU2 to GPU2 (000 section 4)
    ("MV2GDR", 8, "eager-gdr", "eager-loopback"),                # <= 8 KB: GDR both ends
    ("MV2GDR", 8 * KIB, "eager-gdr", "eager-loopback"),
    ("MV2GDR", 8 * KIB + 8, "rndv-staged", "rndv"),              # copy to host, GDR write
    ("MV2GDR", 256 * KIB, "rndv-staged", "rndv"),
    ("MV2GDR", 256 * KIB + 64, "rndv-staged-pipelined", "rndv-staged-pipelined"),
    # no GPUDirect RDMA: staged through host memory at both ends
    ("MV2-staged", 8, "eager-staged", "eager-staged"),
    ("MV2-staged", 12 * KIB, "eager-staged", "eager-staged"),
    ("MV2-staged", 12 * KIB + 4, "rndv-staged", "rndv-staged"),
    # 000's tuned setting across QPI: GDR up to 8 KB, host staging above
    ("MV2GDR-QPI-Tuned", 8 * KIB, "eager-gdr", "eager-loopback"),
    ("MV2GDR-QPI-Tuned", 16 * KIB, "rndv-staged", "rndv-staged"),
    ("MV2GDR-QPI", 16 * KIB, "rndv-staged", "rndv"),
])
@pytest.mark.parametrize("recv_first", [True, False])
def test_gpu_paths(config, nbytes, send, recv, recv_first):
    p = preset(config)
    sent, got, ok = exchange(p.world(2), nbytes, p.where, recv_first=recv_first)
    assert (sent.protocol, got.protocol) == (send, recv)
    assert ok and got.count == nbytes and (got.source, got.tag) == (0, 5)


@pytest.mark.parametrize("nbytes, send, recv", [
    (0, "eager", "eager"), (8, "eager", "eager"), (128, "eager", "eager"),
    (4 * KIB, "eager", "eager"), (12 * KIB, "eager", "eager"),
    (64 * KIB, "rndv", "rndv"), (1 << 20, "rndv", "rndv")])   # rendezvous zero-copy
def test_host_paths(nbytes, send, recv):
    sent, got, ok = exchange(World(2), nbytes, "host")
    assert (sent.protocol, got.protocol) == (send, recv) and ok


def test_thresholds_are_parameters():
    world = preset("MV2GDR").world(2, MV2_USE_GPUDIRECT_LOOPBACK_LIMIT=0,
                                   MV2_GPUDIRECT_LIMIT=32 * KIB, MV2_IBA_EAGER_THRESHOLD=4 * KIB)
    sent, got, ok = exchange(world, 2 * KIB, "gpu2")
    assert (sent.protocol, got.protocol) == ("eager-gdr", "eager-staged") and ok
    world = preset("MV2GDR").world(2, MV2_GPUDIRECT_LIMIT=32 * KIB,
                                   MV2_IBA_EAGER_THRESHOLD=4 * KIB)
    sent, got, ok = exchange(world, 16 * KIB, "gpu2")          # rendezvous read by GDR
    assert (sent.protocol, got.protocol) == ("rndv", "rndv") and ok
    world = preset("MV2GDR").world(2, MV2_CUDA_BLOCK_SIZE=64 * KIB,
                                   MV2_USE_GPUDIRECT_RECEIVE_LIMIT=1 << 20)
    sent, got, ok = exchange(world, 200 * KIB, "gpu2")        # 4 blocks written by GDR
    assert (sent.protocol, got.protocol) == ("rndv-staged-pipelined", "rndv-pipelined") and ok


def test_mixed_placements_and_offsets():
    world = World(2)
    r0, r1 = world.ranks
    src, dst = r0.alloc(100 * KIB, "gpu3"), r1.alloc(100 * KIB, "host0")
    data = random.Random(9).randbytes(100 * KIB)
    src.write(data)

    def program(rank):
        if rank.rank == 0:
            yield rank.waitall([rank.isend(src, 1, 1, count=30 * KIB, offset=7),
                                rank.isend(src, 1, 2, count=100, offset=3)])
        else:
            return (yield rank.waitall([rank.irecv(dst, 0, 1, count=40 * KIB, offset=1),
                                        rank.irecv(dst, 0, 2, count=100, offset=50 * KIB)]))

    big, small = world.run(program)[1]
    assert (big.count, small.count) == (30 * KIB, 100)
    assert dst.read(1, 30 * KIB) == data[7:7 + 30 * KIB]
    assert dst.read(50 * KIB, 100) == data[3:103]
    assert dst.read(0, 1) == bytes(1)                       # nothing written outside


def test_order_wildcards_and_unexpected():
    world = World(3)
    bufs = [[r.alloc(20 * KIB) for _ in range(4)] for r in world.ranks]
    for r in range(3):
        for k in range(4):
            bufs[r][k].write(bytes([16 * r + k]) * (20 * KIB if k % 2 else 100))

    def program(rank):
        if rank.rank in (0, 1):                            # four messages each, same tag
            reqs = [rank.isend(bufs[rank.rank][k], 2, 9, count=20 * KIB if k % 2 else 100)
                    for k in range(4)]
            yield rank.waitall(reqs)
            return None
        yield rank.elapse(40_000_000)                      # all are unexpected by now
        got = []
        for _ in range(8):
            st = yield rank.recv(bufs[2][0], ANY_SOURCE, ANY_TAG)
            got.append((st.source, st.count, bufs[2][0].read(0, 1)[0]))
        return got

    got = world.run(program)[2]
    for src in (0, 1):                                     # each source in its sending order
        assert [b - 16 * src for s, _, b in got if s == src] == [0, 1, 2, 3]
    assert sorted(c for _, c, _ in got) == [100] * 4 + [20 * KIB] * 4


@pytest.mark.parametrize("where", ["host", "gpu2"])
def test_self_send(where):
    world = World(2)
    r0 = world.rank(0)
    a, b = r0.alloc(50 * KIB, where), r0.alloc(50 * KIB, "gpu0")
    a.write(b"s" * 50 * KIB)

    def program(rank):
        if rank.rank == 0:
            return (yield rank.waitall([rank.irecv(b, 0, 3), rank.isend(a, 0, 3)]))

    recv, send = world.run(program)[0]
    assert b.read() == b"s" * 50 * KIB and recv.protocol == send.protocol == "self"


def test_ring_allgather_written_with_isend_irecv():
    """A collective in the API: ring allgather of 3 KiB blocks from GPU2 on 4 ranks."""
    n, block = 4, 3 * KIB
    world = preset("MV2GDR").world(n)
    bufs = [r.alloc(n * block, "gpu2") for r in world.ranks]
    blocks = [random.Random(r).randbytes(block) for r in range(n)]
    for r in range(n):
        bufs[r].write(blocks[r], offset=r * block)

    def allgather(rank):
        right, left = (rank.rank + 1) % n, (rank.rank - 1) % n
        for step in range(n - 1):
            out, inp = (rank.rank - step) % n, (rank.rank - step - 1) % n
            yield rank.waitall([
                rank.isend(bufs[rank.rank], right, step, count=block, offset=out * block),
                rank.irecv(bufs[rank.rank], left, step, count=block, offset=inp * block)])
        return rank.now

    times = world.run(allgather)
    assert all(buf.read() == b"".join(blocks) for buf in bufs)
    assert 3 * 6e6 < max(times) < 3 * 30e6                 # three GDR steps of a few us


def test_two_senders_share_the_receiver_link():
    world = World(3)
    size = 2 << 20
    bufs = [r.alloc(size) for r in world.ranks] + [world.rank(2).alloc(size)]

    def program(rank):
        if rank.rank < 2:
            yield rank.send(bufs[rank.rank], 2, 0)
            return rank.now
        yield rank.waitall([rank.irecv(bufs[2], 0, 0), rank.irecv(bufs[3], 1, 0)])
        return rank.now

    alone = World(2)
    a, b = alone.rank(0).alloc(size), alone.rank(1).alloc(size)

    def single(rank):
        if rank.rank == 0:
            yield rank.send(a, 1, 0)
        else:
            yield rank.recv(b, 0, 0)
        return rank.now

    t_alone = alone.run(single)[1]
    t_both = world.run(program)[2]
    assert 1.8 * t_alone < t_both < 2.3 * t_alone          # one downlink for two senders
