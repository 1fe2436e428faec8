"""MVAPICH2's own broadcasts on the MPI model (no simulator): the k-nomial tree against a
pure-Python model of who sends to whom in which round, the pipelined k-nomial and scatter +
ring allgather byte for byte, and the tuning table that picks among them.

::

    k-nomial, k = 4, p = 8, root 0          rel 0 -> 4        (mask 4)
                                            rel 0 -> 1 2 3    (mask 1, three Isends at once)
                                            rel 4 -> 5 6 7    (mask 1)

Sends are recorded by wrapping ``Rank.isend`` (``send`` is ``isend`` + ``wait``), so the
tests see the messages the algorithms really start, in their order.
"""


import pytest
from mpi_runs import bcast_on_model, record_isends

from peach2.sim.mpi import MPIError, preset
from peach2.sim.mpi.collective import (
    BCAST_ALGORITHMS,
    BCAST_TUNING,
    bcast,
    knomial_bcast,
    knomial_tree,
    mv2_bcast,
    pipelined_bcast,
    scatter_ring_bcast,
    select_bcast,
)

KIB = 1 << 10
OFFSET, TAIL = 24, 16
BINOMIAL, KNOMIAL, PIPELINED, SCATTER_RING = BCAST_ALGORITHMS


def model_tree(p, k, rel):
    """Reference: write ``rel`` in base k; its parent clears the lowest non-zero digit; it
    sends, for each digit position below that one (the root: every position), highest first,
    to ``rel + i * k**position`` for i = 1..k-1 while below p."""
    digits, r = [], rel
    while r:
        digits.append(r % k)
        r //= k
    lowest = next((j for j, d in enumerate(digits) if d), None)
    parent = None if lowest is None else rel - digits[lowest] * k ** lowest
    top = 0
    while k ** top < p:
        top += 1
    below = lowest if lowest is not None else top
    rounds = [[rel + i * k ** j for i in range(1, k) if rel + i * k ** j < p]
              for j in reversed(range(below))]
    return parent, [r for r in rounds if r]


@pytest.mark.parametrize("k", [2, 3, 4, 8])
@pytest.mark.parametrize("p", [1, 2, 5, 8, 13, 16, 64, 100])
def test_knomial_tree_matches_the_model(p, k):
    for rel in range(p):
        assert knomial_tree(p, k, rel) == model_tree(p, k, rel), (p, k, rel)


def test_knomial_tree_is_a_spanning_tree():
    for p, k in [(8, 4), (16, 4), (100, 3)]:
        children = {rel: [c for batch in knomial_tree(p, k, rel)[1] for c in batch]
                    for rel in range(p)}
        reached, todo = set(), [0]
        while todo:
            rel = todo.pop()
            reached.add(rel)
            todo += children[rel]
        assert reached == set(range(p))
        assert sum(len(c) for c in children.values()) == p - 1


@pytest.fixture
def sends(monkeypatch):
    """Every collective ``isend``: (source, dest, count, offset) in the order started."""
    return record_isends(monkeypatch, lambda rank, buf, dest, count, offset:
                         (rank.rank, dest, count, offset))


def run(fn, p, count, root, where="gpu2", **kw):
    """Broadcast ``count`` bytes at OFFSET from ``root``; return every rank's buffer, the
    reference and the times."""
    return bcast_on_model(fn, p, count, root, configuration="MV2GDR", where=where,
                          offset=OFFSET, tail=TAIL, key=(fn.__name__, p, count, root), **kw)


@pytest.mark.parametrize("p, k, root", [(8, 4, 0), (8, 4, 5), (13, 3, 12), (16, 4, 7),
                                        (5, 8, 2), (9, 2, 4)])
def test_knomial_sends_what_the_model_says(sends, p, k, root):
    got, want, _ = run(knomial_bcast, p, 8, root, factor=k)
    assert got == want
    expect = {}
    for rel in range(p):
        _, batches = model_tree(p, k, rel)
        expect[(rel + root) % p] = [(c + root) % p for batch in batches for c in batch]
    for src in range(p):
        assert [d for s, d, _, _ in sends if s == src] == expect[src], src
    assert len(sends) == p - 1


def test_knomial_rounds_overlap():
    """k = 4 on 8 ranks: two rounds (root -> 4, then 0 -> 1,2,3 and 4 -> 5,6,7 at once), so
    faster than the binomial tree's three; k = 2 is the binomial tree, to the picosecond."""
    _, _, binomial = run(bcast, 8, 8, 0)
    _, _, two = run(knomial_bcast, 8, 8, 0, factor=2)
    _, _, four = run(knomial_bcast, 8, 8, 0, factor=4)
    assert max(two) == max(binomial)
    assert max(four) < max(binomial) * 0.8


@pytest.mark.parametrize("count", [0, 1, 7, 8 * KIB, 20000, 64 * KIB])
@pytest.mark.parametrize("p, root", [(1, 0), (3, 2), (8, 5), (11, 4)])
def test_pipelined_and_scatter_ring_bytes(p, root, count):
    for fn in (pipelined_bcast, scatter_ring_bcast):
        got, want, _ = run(fn, p, count, root)
        assert got == want, (fn.__name__, p, root, count)


def test_pipelined_sends_segments(sends):
    run(pipelined_bcast, 4, 20000, 1, segment=8192)
    assert sorted({c for _, _, c, _ in sends}) == [3616, 8192]
    assert len(sends) == 3 * 3                 # three segments, p - 1 sends each


def test_scatter_ring_sends_pieces(sends):
    """A binomial scatter (p - 1 sends, subtree-sized) then p - 1 ring steps per rank, each
    one piece of ceil(count / p) bytes to the right-hand neighbour."""
    p, count, root = 8, 8000, 3
    run(scatter_ring_bcast, p, count, root)
    assert len(sends) == (p - 1) + p * (p - 1)
    for src in range(p):
        mine = [(d, c) for s, d, c, _ in sends if s == src]
        assert mine[-(p - 1):] == [((src + 1) % p, 1000)] * (p - 1)
        rel = (src - root) % p
        subtree = [c for d, c in mine[:-(p - 1)]]
        # the root sends half, a quarter, an eighth; rel 4 sends 2000 then 1000; ...
        assert subtree == {0: [4000, 2000, 1000], 4: [2000, 1000], 2: [1000],
                           6: [1000]}.get(rel, [])


def test_table_reads_as_mvapich2_reads_it():
    assert select_bcast(2, 1 << 30) == BINOMIAL
    assert {select_bcast(8, n) for n in (1, 8192, 1 << 22)} == {BINOMIAL}
    assert select_bcast(16, 8192) == BINOMIAL and select_bcast(16, 8193) == PIPELINED
    assert select_bcast(32, 8) == KNOMIAL and select_bcast(32, 524289) == SCATTER_RING
    assert select_bcast(64, 2049) == BINOMIAL
    assert select_bcast(4096, 8) == select_bcast(512, 8) == KNOMIAL   # beyond: the last row
    table = ((4, ((100, KNOMIAL), (-1, SCATTER_RING))),)
    assert select_bcast(1000, 100, table) == KNOMIAL
    assert select_bcast(3, 101, table) == SCATTER_RING
    assert BCAST_TUNING[0][0] == 8


def test_mv2_bcast_runs_what_the_table_picks(sends):
    got, want, _ = run(mv2_bcast, 16, 16 * KIB, 3)
    assert got == want
    assert {c for _, _, c, _ in sends} == {8192}          # pipelined: 8 KB segments
    sends.clear()
    table = ((16, ((-1, KNOMIAL),)),)
    got, want, _ = run(mv2_bcast, 16, 64, 3, table=table)
    assert got == want
    assert [d for s, d, _, _ in sends if s == 3] == [7, 11, 15, 4, 5, 6]


@pytest.mark.parametrize("bad", [1, 9, 0, 2.0, True, "4"])
def test_bad_factor_is_refused(bad):
    with pytest.raises(ValueError, match="k-nomial factor"):
        knomial_tree(8, bad, 0)
    world = preset("MV2GDR").world(2)
    buf = world.ranks[0].alloc(8, "host")
    with pytest.raises(ValueError, match="k-nomial factor"):
        knomial_bcast(world.ranks[0], buf, 8, 0, factor=bad)
    with pytest.raises(ValueError, match="k-nomial factor"):
        mv2_bcast(world.ranks[0], buf, 8, 0, knomial_factor=bad)


def test_other_bad_input_is_refused():
    world = preset("MV2GDR").world(2)
    buf = world.ranks[0].alloc(8, "host")
    with pytest.raises(ValueError, match="segment"):
        pipelined_bcast(world.ranks[0], buf, 8, 0, segment=0)
    with pytest.raises(MPIError, match="root"):
        scatter_ring_bcast(world.ranks[0], buf, 8, 2)
    with pytest.raises(ValueError, match="p must be"):
        select_bcast(0, 8)
    with pytest.raises(ValueError, match="nbytes"):
        select_bcast(8, -1)
    with pytest.raises(ValueError, match="unknown broadcast"):
        select_bcast(8, 8, ((8, ((-1, "MPIR_Bcast_Mcast"),)),))
    with pytest.raises(ValueError, match="0 <= rel < p"):
        knomial_tree(4, 2, 4)
