"""Which ``MPI_Bcast`` algorithm MVAPICH2 runs, by process count and message size: its tuning
table, transcribed, and :func:`mv2_bcast`, the broadcast it selects.

MVAPICH2 picks a broadcast from ``mv2_bcast_thresholds_table`` (``src/mpi/coll/
bcast_tuning.c``, ``MV2_set_bcast_tuning_table``): the first row whose ``numproc`` is at least
the communicator's size (else the last row), then in that row the first range whose ``max``
is at least the message's bytes (``-1``: no limit).  The tables are per architecture and HCA;
the 2013 source of the 2.0 series has two (AMD Opteron 6136 with ConnectX QDR, Xeon E5-2680
with ConnectX FDR) and a default for every other machine.  HA-PACS/TCA (Xeon E5-2680 v2,
ConnectX-3 QDR; "TCA/InfiniBand hybrid communication in XcalableACC", section 4) matches
neither, so :data:`BCAST_TUNING` is that default table's inter-node column.  With one process
per node the intra-node column (shared memory) has nothing to do, and the ``_shm`` variant of
scatter + ring allgather is the plain one.

So at 8 processes MVAPICH2 broadcasts by the binomial tree at every size; at 16 it switches to
the pipelined k-nomial above 8 KB; the k-nomial tree with ``MV2_KNOMIAL_INTER_NODE_FACTOR``
first appears at 32 processes (up to 8 KB).  A different table (a user's
``MV2_INTER_BCAST_TUNING``, or a newer release's) is passed as ``table``.
"""

from .algorithms import _binomial, check_bcast
from .mv2_bcast import (
    BCAST_SEGMENT_SIZE,
    MV2_KNOMIAL_INTER_NODE_FACTOR,
    MV2_PIPELINED_KNOMIAL_FACTOR,
    _factor,
    _knomial,
    _pipelined,
    _scatter_ring,
    _segment,
)

__all__ = ["BCAST_TUNING", "BCAST_ALGORITHMS", "select_bcast", "mv2_bcast"]

#: MVAPICH2's broadcasts this model has, by the name of their C function.
BCAST_ALGORITHMS = ("MPIR_Bcast_binomial_MV2", "MPIR_Knomial_Bcast_inter_node_wrapper_MV2",
                    "MPIR_Pipelined_Bcast_MV2", "MPIR_Bcast_scatter_ring_allgather_MV2")

_B, _K, _P, _S = BCAST_ALGORITHMS

#: ``(numproc, [(max_bytes, algorithm), ...])``: the default ``mv2_bcast_thresholds_table`` of
#: MVAPICH2's 2.0-series bcast_tuning.c, inter-node functions (``_shm`` read as the plain
#: scatter + ring allgather: one process per node).
BCAST_TUNING = (
    (8, ((-1, _B),)),
    (16, ((8192, _B), (-1, _P))),
    (32, ((8192, _K), (524288, _P), (-1, _S))),
    (64, ((2048, _K), (8192, _B), (262144, _P), (-1, _S))),
    (128, ((8192, _K), (131072, _P), (262144, _S), (-1, _S))),
    (256, ((2048, _K), (8192, _B), (131072, _P), (524288, _S), (-1, _S))),
    (512, ((8192, _K), (262144, _P), (-1, _S))),
)


def select_bcast(p, nbytes, table=BCAST_TUNING):
    """The algorithm (one of :data:`BCAST_ALGORITHMS`) MVAPICH2 runs for ``nbytes`` on ``p``
    processes, by ``table`` as ``MPIR_Bcast_tune_inter_node_helper_MV2`` reads it."""
    for what, value in (("p", p), ("nbytes", nbytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (what == "p"):
            raise ValueError(f"{what} must be a {'positive' if what == 'p' else 'non-negative'}"
                             f" integer, not {value!r}")
    if not table:
        raise ValueError("the tuning table is empty")
    row = next((ranges for numproc, ranges in table if p <= numproc), table[-1][1])
    for i, (most, algorithm) in enumerate(row):
        if algorithm not in BCAST_ALGORITHMS:
            raise ValueError(f"unknown broadcast {algorithm!r}; this model has "
                             f"{BCAST_ALGORITHMS}")
        if most == -1 or nbytes <= most or i == len(row) - 1:
            return algorithm
    raise AssertionError("unreachable: the loop returns at the last range")


def mv2_bcast(rank, buf, count, root, offset=0, group=None, table=BCAST_TUNING,
              knomial_factor=MV2_KNOMIAL_INTER_NODE_FACTOR,
              pipelined_factor=MV2_PIPELINED_KNOMIAL_FACTOR, segment=BCAST_SEGMENT_SIZE):
    """``MPI_Bcast`` as MVAPICH2 runs it: the algorithm :func:`select_bcast` picks for this
    communicator's size and ``count``; ``yield from`` it.  Arguments as
    :func:`~.algorithms.bcast`."""
    _factor(knomial_factor), _factor(pipelined_factor), _segment(segment)
    members = check_bcast(rank, buf, count, root, offset, group)
    algorithm = select_bcast(len(members), count, table)
    if algorithm == _K:
        return _knomial(rank, buf, count, root, offset, members, knomial_factor)
    if algorithm == _P:
        return _pipelined(rank, buf, count, root, offset, members, pipelined_factor, segment)
    if algorithm == _S:
        return _scatter_ring(rank, buf, count, root, offset, members)
    return _binomial(rank, buf, count, root, offset, members)
