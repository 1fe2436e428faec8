"""MPI_Bcast (binomial tree) and MPI_Allgather (recursive doubling) on the MPI model (no
simulator): bytes against a pure-Python reference, times against the point-to-point model,
the collective context, and bad input.

::

    rank 0 .. p-1 (one node each: GPU0/GPU2/host buffer, HCA)
        \\  |  /
      QDR switch          bcast: root -> rel+p/2 -> ... (ceil(log2 p) hops)
                          allgather: step s exchanges 2**s blocks with rank xor 2**s

Every buffer starts full of random bytes, the collective's window at a non-zero offset, so
the reference checks that nothing outside the window changes.  The default run covers every
rank count, root choice, size and memory at least once (a few seconds);
``test_full_sweep`` (``pytest -m slow``) runs the whole product.
"""

import math
import random

import pytest

from peach2.sim.mpi import (
    ANY_SOURCE,
    ANY_TAG,
    COLL,
    ERR_BUFFER,
    ERR_COUNT,
    ERR_OTHER,
    ERR_ROOT,
    ERR_TRUNCATE,
    P2P,
    MPIError,
    World,
    allgather,
    bcast,
    preset,
    wire,
)
from peach2.sim.mpi.collective import ALLGATHER_TAG, BCAST_TAG, collective_time, one_hop
from peach2.sim.mpi.collective.times import print_table, table

KIB = 1 << 10
MIB = 1 << 20
PLACES = ("host", "gpu0", "gpu2")
OFFSET = 40                 # the collective's window starts here
TAIL = 24                   # and this many bytes follow it


def world_for(where, p):
    """``p`` ranks as HA-PACS/TCA runs them for buffers in ``where``: on GPU2's socket for
    host and GPU2 buffers (MV2GDR), on GPU0's for GPU0 (MV2GDR-QPI: GDR across QPI)."""
    return preset("MV2GDR-QPI" if where == "gpu0" else "MV2GDR").world(p)


def filled(world, where, length, seed):
    """One buffer of ``length`` random bytes per rank; return (buffers, their bytes)."""
    rng = random.Random(repr(seed))
    bufs, before = [], []
    for rank in world.ranks:
        data = rng.randbytes(length)
        buf = rank.alloc(length, where)
        buf.write(data)
        bufs.append(buf)
        before.append(data)
    return bufs, before


def bcast_reference(before, count, root, offset):
    """Every rank's buffer after the broadcast: the root's window everywhere, the rest kept."""
    window = before[root][offset:offset + count]
    return [b[:offset] + window + b[offset + count:] for b in before]


def allgather_reference(before, block, offset):
    """Every rank's buffer after the allgather: rank r's block r everywhere, the rest kept."""
    p = len(before)
    whole = b"".join(before[r][offset + r * block:offset + (r + 1) * block] for r in range(p))
    return [b[:offset] + whole + b[offset + p * block:] for b in before]


def run_bcast(p, count, root, where):
    world = world_for(where, p)
    bufs, before = filled(world, where, OFFSET + count + TAIL, (p, count, root, where))

    def program(rank):
        yield from bcast(rank, bufs[rank.rank], count, root, OFFSET)
        return rank.now

    times = world.run(program)
    return [b.read() for b in bufs], bcast_reference(before, count, root, OFFSET), times


def run_allgather(p, block, where):
    world = world_for(where, p)
    bufs, before = filled(world, where, OFFSET + p * block + TAIL, (p, block, where))

    def program(rank):
        yield from allgather(rank, bufs[rank.rank], block, OFFSET)
        return rank.now

    times = world.run(program)
    return [b.read() for b in bufs], allgather_reference(before, block, OFFSET), times


def roots(p):
    return sorted({0, p // 2, p - 1})


# -- bytes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("count", [0, 1, 8, 8 * KIB, 64 * KIB, MIB])
def test_bcast_every_size_and_memory(count, where):
    """Eager (GDR, inline, staged), rendezvous and the pipelined path, on 5 ranks, root 3."""
    got, want, _ = run_bcast(5, count, 3, where)
    assert got == want


@pytest.mark.parametrize("count", [8, 64 * KIB])
@pytest.mark.parametrize("p, root", [(p, root) for p in (1, 2, 3, 5, 8, 16) for root in roots(p)])
def test_bcast_every_rank_count_and_root(p, root, count):
    got, want, _ = run_bcast(p, count, root, "gpu2")
    assert got == want


@pytest.mark.parametrize("p, block, where",
                         [(p, block, "gpu2") for p in (2, 4, 8, 16) for block in (1, 16, 4 * KIB)]
                         + [(4, 16, "host"), (4, 16, "gpu0"), (8, 4 * KIB, "host")]
                         + [(p, 256 * KIB, where) for p in (2, 4) for where in PLACES])
def test_allgather_bytes(p, block, where):
    got, want, _ = run_allgather(p, block, where)
    assert got == want


def test_zero_and_single_rank_send_nothing():
    """count 0 (MPICH returns at once) and a world of one rank: no message, no time."""
    for p, count in ((4, 0), (1, 64)):
        world = world_for("gpu2", p)
        bufs, before = filled(world, "gpu2", OFFSET + p * max(count, 1) + TAIL, p)

        def program(rank, count=count, bufs=bufs):
            yield from bcast(rank, bufs[rank.rank], count, 0, OFFSET)
            yield from allgather(rank, bufs[rank.rank], count, OFFSET)
            return rank.now

        assert world.run(program) == [0] * p
        assert [b.read() for b in bufs] == before
        assert all(rank.protocol.cq.entries == 0 for rank in world.ranks)


@pytest.mark.slow
def test_full_sweep():
    """Every rank count x root x size x memory of the bcast, every p x block x memory of the
    allgather (minutes)."""
    for where in PLACES:
        for p in (1, 2, 3, 5, 8, 16):
            for root in roots(p):
                for count in (0, 1, 8, 8 * KIB, 64 * KIB, MIB):
                    got, want, _ = run_bcast(p, count, root, where)
                    assert got == want, (p, root, count, where)
        for p in (2, 4, 8, 16):
            for block in (1, 16, 4 * KIB, 256 * KIB):
                got, want, _ = run_allgather(p, block, where)
                assert got == want, (p, block, where)


# -- times ------------------------------------------------------------------------------------

def hop(where):
    """(blocking send time, one-hop latency) of one 8-byte message, both ranks from 0."""
    world = world_for(where, 2)
    a, b = world.ranks[0].alloc(8, where), world.ranks[1].alloc(8, where)

    def program(rank):
        if rank.rank == 0:
            yield rank.send(a, 1, 0)
        else:
            yield rank.recv(b, 0, 0)
        return rank.now

    return world.run(program)


def binomial_time(p, send, latency):
    """When the last rank of a binomial broadcast returns, if every message reaches its
    receiver ``latency`` after its sender starts it and a blocking send holds the sender for
    ``send``: a rank's j-th child gets the data j sends after the rank got it."""
    got, done = {0: 0}, []
    for rel in range(p):                    # a parent's relative rank is below its children's
        mask = rel & -rel if rel else 1 << (p - 1).bit_length()
        m, sent = mask >> 1, 0
        while m:
            if rel + m < p:
                got[rel + m] = got[rel] + sent * send + latency
                sent += 1
            m >>= 1
        done.append(got[rel] + sent * send)
    return max(done)


@pytest.mark.parametrize("where", ["gpu2", "host"])
def test_bcast_of_8_bytes_takes_log2_p_hops(where):
    """Powers of two: the last rank (relative rank p-1) is reached by log2 p hops, each its
    sender's first send, so the time is log2 p one-hop latencies.  5% leaves room for what a
    tree adds to a lone hop (a link or CPU shared with a sibling's message: 8-byte messages
    hardly meet) and fails a tree one step deeper or with serialised hops (25% or more off).
    Other p: between floor and ceil(log2 p) hops, the later children waiting only for their
    parent's earlier blocking sends, which are shorter than a hop."""
    send, latency = hop(where)
    assert latency == one_hop(where=where) and 0 < send < latency
    for p in (2, 3, 4, 5, 8, 12, 16):
        _, _, times = run_bcast(p, 8, p - 1, where)
        t = max(times)
        steps = math.log2(p)
        if steps.is_integer():
            assert abs(t / (steps * latency) - 1) <= 0.05, (p, t, latency)
        else:
            assert math.floor(steps) * latency <= t <= math.ceil(steps) * latency * 1.05, p


@pytest.mark.parametrize("where", ["gpu2", "host"])
def test_bcast_time_follows_the_tree(where):
    """Each rank's time is its path in the tree: hops plus its parent's earlier sends (2%)."""
    send, latency = hop(where)
    for p in (3, 5, 6, 7, 11, 13):
        _, _, times = run_bcast(p, 8, 0, where)
        model = binomial_time(p, send, latency)
        assert abs(max(times) / model - 1) <= 0.02, (p, max(times), model)


@pytest.mark.parametrize("where", ["gpu2", "host"])
def test_allgather_time_grows_with_block_and_adds_up_its_steps(where):
    """Step s is one exchange of 2**s blocks; both directions run at once (full-duplex links,
    one copy engine each way), so it costs a one-way message of that size plus the irecv call
    that precedes the isend.  3% covers the two directions' shared CPU and PCIe; an exchange
    that serialised its directions would be about 2x.  And never faster than the link carries
    the (p-1) blocks a rank receives."""
    p = 4
    world = world_for(where, p)
    call = world.params.recv_overhead_ps + world.params.cuda_check_ps
    link = world.fabric.params.data_bytes_per_s
    blocks = (1, 16, 4 * KIB, 64 * KIB, 256 * KIB)
    times = []
    for block in blocks:
        t = collective_time("allgather", p, block, where=where)
        model = sum(one_hop(where=where, nbytes=block << s) + call for s in range(2))
        assert abs(t / model - 1) <= 0.03, (block, t, model)
        assert t >= (p - 1) * block / link * 1e12
        times.append(t)
    assert times == sorted(times) and times[1] < times[2] < times[3] < times[4], times


# -- the collective context -------------------------------------------------------------------

def test_wire_keeps_point_to_point_and_marks_collectives():
    assert wire.imm(wire.EAGER, 5) == (1 << 28) | 5 == wire.imm(wire.EAGER, 5, P2P)
    value = wire.imm(wire.RTS, BCAST_TAG, COLL)
    assert wire.split(value) == (wire.RTS, BCAST_TAG) and wire.context_of(value) == COLL
    assert wire.context_of(wire.imm(wire.EAGER, wire.FIELD_MASK)) == P2P
    for kind in (wire.CTS, wire.DATA):
        with pytest.raises(ValueError):
            wire.imm(kind, 0, COLL)
    with pytest.raises(ValueError):
        wire.imm(wire.EAGER, 0, 2)
    rank = World(2).ranks[0]
    for context in (2, -1, True):
        with pytest.raises(ValueError):
            rank.isend(rank.alloc(8), 1, 0, context=context)


@pytest.mark.parametrize("nbytes", [8, 64 * KIB])          # eager and rendezvous (RTS)
@pytest.mark.parametrize("op", ["bcast", "allgather"])
@pytest.mark.parametrize("first", ["user send", "user wildcard receive"])
def test_user_messages_never_match_the_collective(op, nbytes, first):
    """A user message with the collective's tag, sent to the rank before the collective starts
    (its receive is posted first), and a user receive with wildcards posted before the
    collective's messages arrive: each side gets its own bytes."""
    p, where = 2, "gpu2"
    world = world_for(where, p)
    tag = BCAST_TAG if op == "bcast" else ALLGATHER_TAG
    size = nbytes if op == "bcast" else p * nbytes
    bufs, before = filled(world, where, size, f"{op} {nbytes}")
    user = [rank.alloc(nbytes, where) for rank in world.ranks]
    inbox = [rank.alloc(nbytes, where) for rank in world.ranks]
    notes = [random.Random(r).randbytes(nbytes) for r in range(p)]
    for r in range(p):
        user[r].write(notes[r])

    def collective(rank):
        if op == "bcast":
            return bcast(rank, bufs[rank.rank], nbytes, 0)
        return allgather(rank, bufs[rank.rank], nbytes)

    def program(rank):
        peer = 1 - rank.rank
        if first == "user send":
            out = rank.isend(user[rank.rank], peer, tag)
            yield from collective(rank)
            got = yield rank.recv(inbox[rank.rank], peer, tag)
            yield rank.wait(out)
        else:
            inp = rank.irecv(inbox[rank.rank], ANY_SOURCE, ANY_TAG)
            yield from collective(rank)
            out = rank.isend(user[rank.rank], peer, tag)
            got = yield rank.wait(inp)
            yield rank.wait(out)
        return got

    statuses = world.run(program)
    want = (bcast_reference(before, nbytes, 0, 0) if op == "bcast"
            else allgather_reference(before, nbytes, 0))
    assert [b.read() for b in bufs] == want
    assert [b.read() for b in inbox] == [notes[1], notes[0]]
    assert [(s.source, s.tag, s.count) for s in statuses] == [(1, tag, nbytes), (0, tag, nbytes)]


# -- bad input ----------------------------------------------------------------------------------

def refused(call, code, *words):
    with pytest.raises(MPIError) as caught:
        call()
    assert caught.value.code == code
    for word in words:
        assert word in str(caught.value)


def test_bad_input_is_refused_at_the_call():
    world = World(4)
    r0, r1 = world.ranks[:2]
    buf = r0.alloc(64)
    for root in (-1, 4, True, "0", None):
        refused(lambda root=root: bcast(r0, buf, 8, root), ERR_ROOT, "root")
    refused(lambda: bcast(r0, buf, -1, 0), ERR_COUNT, "count")
    refused(lambda: bcast(r0, buf, 8, 0, offset=-8), ERR_COUNT, "offset")
    refused(lambda: bcast(r0, buf, 2.0, 0), ERR_COUNT, "count")
    refused(lambda: bcast(r0, buf, 60, 0, offset=8), ERR_COUNT, "leave")
    refused(lambda: allgather(r0, buf, -1), ERR_COUNT, "block")
    refused(lambda: allgather(r0, buf, 17), ERR_COUNT, "68 bytes")     # 4 x 17 > 64
    refused(lambda: allgather(r0, buf, 16, offset=1), ERR_COUNT, "leave")
    refused(lambda: bcast(r0, buf.addr, 8, 0), ERR_BUFFER)
    refused(lambda: bcast(r0, r1.alloc(64), 8, 0), ERR_BUFFER)
    gone = r0.alloc(64)
    r0.free(gone)
    refused(lambda: allgather(r0, gone, 8), ERR_BUFFER)
    nocuda = World(2, preset("MV2GDR").params.with_(MV2_USE_CUDA=False))
    refused(lambda: bcast(nocuda.ranks[0], nocuda.ranks[0].alloc(8, "gpu2"), 8, 0), ERR_OTHER,
            "MV2_USE_CUDA")
    for p in (3, 5, 6, 12):
        rank = World(p).ranks[0]
        refused(lambda rank=rank: allgather(rank, rank.alloc(p * 8), 8), ERR_OTHER,
                "power-of-two", "Bruck")


def test_refused_calls_send_nothing():
    """Inside rank programs: every rank's call raises before any message or CPU time."""
    world = World(4)
    bufs = [rank.alloc(64) for rank in world.ranks]
    codes = {}

    def program(rank):
        for call in (lambda: bcast(rank, bufs[rank.rank], 8, rank.size),
                     lambda: bcast(rank, bufs[rank.rank], 128, 0),
                     lambda: allgather(rank, bufs[rank.rank], 32)):
            try:
                yield from call()
            except MPIError as error:
                codes.setdefault(rank.rank, []).append(error.code)
        return rank.now

    assert world.run(program) == [0] * 4
    assert codes == {r: [ERR_ROOT, ERR_COUNT, ERR_COUNT] for r in range(4)}
    assert all(rank.protocol.cq.entries == 0 and not rank.pending() for rank in world.ranks)


@pytest.mark.parametrize("theirs, code", [(8, ERR_TRUNCATE), (32, ERR_OTHER)])
def test_ranks_that_disagree_on_the_count_fail(theirs, code):
    """Root 16 bytes, rank 1 expects 8 (the message does not fit) or 32 (too little came)."""
    world = World(2)
    bufs = [rank.alloc(64) for rank in world.ranks]

    def program(rank):
        yield from bcast(rank, bufs[rank.rank], 16 if rank.rank == 0 else theirs, 0)

    refused(lambda: world.run(program), code)


def test_times_table():
    """The docs table's code path on a small case; the bcast row is one hop."""
    result = table(ranks=(2,), sizes=(8,))
    row = {r["op"]: r["us"][2] for r in result["rows"]}
    assert row["bcast"] == pytest.approx(result["one_hop_us"])
    assert row["allgather"] > row["bcast"]
    print_table(result)


# -- a communicator of some ranks ---------------------------------------------------------------

@pytest.mark.parametrize("group, root", [([6, 2, 5], 0), ([6, 2, 5], 2), ([1, 3, 5, 7], 1)])
def test_bcast_in_a_group(group, root):
    """A communicator of some ranks, in its own order (the hybrid Broadcast's step across
    sub-clusters): only its members' windows change, and the tree is the group's."""
    world = world_for("gpu2", 8)
    bufs, before = filled(world, "gpu2", OFFSET + 64 + TAIL, ("group", tuple(group), root))

    def program(rank):
        if rank.rank in group:
            yield from bcast(rank, bufs[rank.rank], 64, root, OFFSET, group=group)
        return rank.now

    times = world.run(program)
    source = before[group[root]][OFFSET:OFFSET + 64]
    for r in range(8):
        want = before[r][:OFFSET] + source + before[r][OFFSET + 64:] if r in group else before[r]
        assert bufs[r].read() == want, r
    hop, levels = one_hop("MV2GDR", 64, "gpu2"), math.log2(len(group))
    # the group's own tree: log2 p hops for 4 members, between 1 and 2 for 3 (the root's
    # second send waits for its first to complete, less than a hop)
    assert math.floor(levels) * hop * 0.95 < max(times) < math.ceil(levels) * hop * 1.05


def test_bcast_group_refused():
    world = world_for("host", 4)
    bufs, _ = filled(world, "host", 64, "refused")
    r0 = world.rank(0)
    for group in ([1, 2], [0, 0, 1], [0, 9]):
        with pytest.raises(MPIError) as e:
            bcast(r0, bufs[0], 8, 0, group=group)
        assert e.value.code == "MPI_ERR_RANK"
    with pytest.raises(MPIError) as e:
        bcast(r0, bufs[0], 8, 2, group=[0, 1])
    assert e.value.code == ERR_ROOT
