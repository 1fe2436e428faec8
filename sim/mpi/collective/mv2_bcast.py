"""MVAPICH2's own ``MPI_Bcast`` algorithms between nodes: k-nomial tree, pipelined k-nomial,
and scatter + ring allgather.  Rank-program building blocks like :func:`.algorithms.bcast`.

Written from MVAPICH2's ``src/mpi/coll/bcast_osu.c`` (the 2.x series):

- :func:`knomial_bcast`: ``MPIR_Knomial_Bcast_inter_node_MV2`` with the factor
  ``MV2_KNOMIAL_INTER_NODE_FACTOR`` (default 4; MVAPICH2 2.0 user guide, "MV2_KNOMIAL_INTER_
  NODE_FACTOR": "the degree of the knomial operation during the inter-node knomial broadcast
  phase").  With ``rel = (rank - root) mod p``, a rank receives from ``rel`` with its lowest
  non-zero base-k digit cleared, then for ``mask`` = k**j below that digit, highest first,
  starts non-blocking sends to ``rel + i*mask`` (i = 1..k-1, while ``< p``) and waits for
  them all (``MPIC_Isend`` ... ``MPIC_Waitall``) before the next ``mask``.
- :func:`pipelined_bcast`: ``MPIR_Pipelined_Bcast_MV2``: the message in segments of
  ``bcast_segment_size`` (8192 in every row of MVAPICH2's tuning tables), each broadcast by the
  k-nomial tree with ``mv2_pipelined_knomial_factor`` (default 2).
- :func:`scatter_ring_bcast`: ``MPIR_Bcast_scatter_ring_allgather_MV2``: MPICH's binomial
  scatter (``scatter_for_bcast``: rank ``rel`` gets bytes from ``rel * ceil(n/p)``) and a ring
  allgather of the ``p`` pieces in ``p - 1`` steps (Thakur, Rabenseifner and Gropp,
  "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005: cost
  ``(log p + p - 1) alpha + 2 n (p-1)/p beta``).

One rank per node, so these run on the whole communicator (MVAPICH2's leader communicator is
every rank); the intra-node shared-memory step that follows them in MVAPICH2 has nothing to
do.  Arguments are checked as :func:`.algorithms.bcast` checks them.
"""

from ..request import COLL
from .algorithms import BCAST_TAG, check_bcast, check_received

__all__ = ["knomial_bcast", "pipelined_bcast", "scatter_ring_bcast", "knomial_tree",
           "MV2_KNOMIAL_INTER_NODE_FACTOR", "MV2_PIPELINED_KNOMIAL_FACTOR",
           "BCAST_SEGMENT_SIZE"]

#: MVAPICH2's defaults (user guide; ch3_shmem_coll.c: ``mv2_inter_node_knomial_factor = 4``,
#: ``mv2_pipelined_knomial_factor = 2``; ``bcast_segment_size`` 8192 in the tuning tables).
MV2_KNOMIAL_INTER_NODE_FACTOR = 4
MV2_PIPELINED_KNOMIAL_FACTOR = 2
BCAST_SEGMENT_SIZE = 8192


def _factor(k):
    # MVAPICH2 clamps the variable to MV2_INTER_NODE_KNOMIAL_FACTOR_MIN/MAX (2..8); a model
    # refuses instead of silently changing what it was asked for.
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= 8:
        raise ValueError(f"the k-nomial factor must be an integer 2..8 (MVAPICH2's range), "
                         f"not {k!r}")
    return k


def _segment(n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"segment must be a positive number of bytes, not {n!r}")
    return n


def knomial_tree(p, k, rel):
    """Where relative rank ``rel`` of a k-nomial tree on ``p`` ranks stands: ``(parent,
    batches)``, the parent's relative rank (None for the root) and the relative ranks it
    sends to, one list per ``mask``, in the order it sends them."""
    _factor(k)
    if isinstance(p, bool) or not isinstance(p, int) or p < 1 or not 0 <= rel < p:
        raise ValueError(f"need p >= 1 and 0 <= rel < p, not p={p!r}, rel={rel!r}")
    parent, mask = None, 1
    while mask < p:
        if rel % (k * mask):
            parent = rel // (k * mask) * (k * mask)
            break
        mask *= k
    mask //= k
    batches = []
    while mask > 0:
        batch = [rel + i * mask for i in range(1, k) if rel + i * mask < p]
        if batch:
            batches.append(batch)
        mask //= k
    return parent, batches


def knomial_bcast(rank, buf, count, root, offset=0, group=None,
                  factor=MV2_KNOMIAL_INTER_NODE_FACTOR):
    """Broadcast ``count`` bytes at ``offset`` of ``buf`` from ``root`` by a k-nomial tree of
    degree ``factor`` (``MPIR_Knomial_Bcast_inter_node_MV2``); ``yield from`` it.  Arguments as
    :func:`~.algorithms.bcast`; a factor outside 2..8 raises ``ValueError``."""
    _factor(factor)
    members = check_bcast(rank, buf, count, root, offset, group)
    return _knomial(rank, buf, count, root, offset, members, factor)


def _knomial(rank, buf, count, root, offset, members, k):
    p, me = len(members), members.index(rank.rank)
    if p == 1 or count == 0:
        return
    rel = (me - root) % p
    parent, batches = knomial_tree(p, k, rel)
    if parent is not None:
        status = yield rank.recv(buf, members[(parent + root) % p], BCAST_TAG, count, offset,
                                 context=COLL)
        check_received(rank, status, count)
    for batch in batches:
        yield rank.waitall([rank.isend(buf, members[(c + root) % p], BCAST_TAG, count, offset,
                                       context=COLL) for c in batch])


def pipelined_bcast(rank, buf, count, root, offset=0, group=None,
                    factor=MV2_PIPELINED_KNOMIAL_FACTOR, segment=BCAST_SEGMENT_SIZE):
    """Broadcast in segments of ``segment`` bytes, each by the k-nomial tree of degree
    ``factor`` (``MPIR_Pipelined_Bcast_MV2``); ``yield from`` it."""
    _factor(factor), _segment(segment)
    members = check_bcast(rank, buf, count, root, offset, group)
    return _pipelined(rank, buf, count, root, offset, members, factor, segment)


def _pipelined(rank, buf, count, root, offset, members, k, segment):
    for start in range(0, count, segment):
        yield from _knomial(rank, buf, min(segment, count - start), root, offset + start,
                            members, k)


def scatter_ring_bcast(rank, buf, count, root, offset=0, group=None):
    """Broadcast by a binomial scatter of ``ceil(count/p)``-byte pieces and a ring allgather
    (``MPIR_Bcast_scatter_ring_allgather_MV2``); ``yield from`` it."""
    members = check_bcast(rank, buf, count, root, offset, group)
    return _scatter_ring(rank, buf, count, root, offset, members)


def _scatter_ring(rank, buf, count, root, offset, members):
    p, me = len(members), members.index(rank.rank)
    if p == 1 or count == 0:
        return
    rel = (me - root) % p
    piece = -(-count // p)
    # scatter_for_bcast: binomial tree; a subtree rooted at rel gets the bytes from rel*piece
    have = count if rel == 0 else 0
    mask = 1
    while mask < p:
        if rel & mask:
            want = count - rel * piece
            if want > 0:
                status = yield rank.recv(buf, members[(me - mask) % p], BCAST_TAG, want,
                                         offset + rel * piece, context=COLL)
                have = status.count
            break
        mask <<= 1
    mask >>= 1
    while mask:
        if rel + mask < p:
            size = have - piece * mask
            if size > 0:
                yield rank.send(buf, members[(me + mask) % p], BCAST_TAG, size,
                                offset + piece * (rel + mask), context=COLL)
                have -= size
        mask >>= 1
    # ring allgather of the pieces: send piece (j - root) right, receive (j-1 - root) from left
    sizes = [max(0, min(piece, count - i * piece)) for i in range(p)]
    at = [offset + min(i * piece, count) for i in range(p)]
    left, right = members[(me - 1) % p], members[(me + 1) % p]
    j, jnext = me, (me - 1) % p
    for _ in range(p - 1):
        out, into = (j - root) % p, (jnext - root) % p
        yield rank.waitall([
            rank.irecv(buf, left, BCAST_TAG, sizes[into], at[into], context=COLL),
            rank.isend(buf, right, BCAST_TAG, sizes[out], at[out], context=COLL)])
        j, jnext = jnext, (jnext - 1) % p
