"""Broadcast and Allgather over TCA, over MPI, and hybrid: each a list of phases per node.

A collective here is what every node does, phase after phase; a node starts a phase when its
own previous phase is over (no barrier between phases, as in the hand-coded collectives of
"TCA/InfiniBand hybrid communication in XcalableACC", sections 5.4-5.5):

- :class:`TcaPhase`: one TCA collective per group (:mod:`peach2.sim.collectives`: chained DMAs
  with completion writes), on that group's chips only;
- :class:`MpiPhase`: a rank program (:mod:`peach2.sim.mpi`: MVAPICH2-GDR's protocols over the
  InfiniBand model), on every node that takes part.

The three networks of each collective (``network``):

========  ======================================  =============================================
network   Broadcast (root 0)                      Allgather (one block per node)
========  ======================================  =============================================
tca       binomial tree, one chained DMA per      recursive doubling, one descriptor per step
          forwarding node (000 sec. 5.4)          (000 sec. 5.5); one group only
mpi       ``MPI_Bcast`` as MVAPICH2's CUDA build   ``MPI_Allgather`` likewise: staged through
          runs it: staged through host memory     host memory, recursive doubling between
          (``naive_cuda_bcast``), the algorithm   the host copies (``naive_cuda_allgather``)
          MVAPICH2's tuning table picks
hybrid    step 1 over MPI between the groups'     TCA recursive doubling inside each group,
          leaders (``mv2_bcast`` among them),     then the remaining steps over MPI (the last
          then TCA inside every group (000 5.4)   one for two groups: 000 sec. 5.5)
========  ======================================  =============================================

The data is in every node's GPU0 (PEACH2's socket: the TCA DMA reads and writes it peer to
peer; the HCA on CPU1 reaches it across QPI, so the MPI steps use MVAPICH2-GDR as 000 tuned it:
GDR up to 8 KB, host staging above, "MV2GDR-QPI-Tuned").  The buffer is at the same offset of
every node's GPU0 window: the MPI rank's buffer and the TCA collective's place are the same
bytes (:class:`~.context.Context`).
"""

from dataclasses import dataclass, field

from peach2.sim.collectives import allgather as tca_allgather
from peach2.sim.collectives import broadcast as tca_broadcast
from peach2.sim.mpi.collective import (
    ALLGATHER_TAG,
    mv2_bcast,
    naive_cuda_allgather,
    naive_cuda_bcast,
    select_bcast,
)
from peach2.sim.mpi.request import COLL

__all__ = ["TcaPhase", "MpiPhase", "Overlap", "Hybrid", "NETWORKS", "broadcast", "allgather"]

#: The ways to communicate: TCA only, MPI over InfiniBand only, or both.
NETWORKS = ("tca", "mpi", "hybrid")


@dataclass
class TcaPhase:
    """``build(ctx, k)``: the :class:`~peach2.sim.collectives.Collective` group ``k`` runs (its
    nodes as chip ids of its sub-cluster), or None when the group sits this phase out."""
    name: str
    build: object


@dataclass
class MpiPhase:
    """``program(ctx, rank)``: the generator rank ``rank`` runs, or None when it sits this phase
    out."""
    name: str
    program: object


@dataclass
class Overlap:
    """A TCA part and an MPI part a node starts at the same instant and is over with when both
    are (000 section 5.3, ``reflect_do``: ``MPI_Startall`` and ``tcaDMAStart``, then
    ``MPI_Waitall`` and ``tcaDMAWaitRecv``).  ``parts``: at most one :class:`TcaPhase` and one
    :class:`MpiPhase` (a rank runs one program at a time)."""
    name: str
    parts: list

    def __post_init__(self):
        kinds = [type(p) for p in self.parts]
        if not self.parts or any(k not in (TcaPhase, MpiPhase) for k in kinds) \
                or len(set(kinds)) != len(kinds):
            raise ValueError(f"an Overlap holds at most one TcaPhase and one MpiPhase, not "
                             f"{[k.__name__ for k in kinds]}")

    def part(self, kind):
        """The part of type ``kind``, or None."""
        return next((p for p in self.parts if isinstance(p, kind)), None)


@dataclass
class Hybrid:
    """A collective: its ``phases`` in order, the bytes every node's buffer holds before
    (``initial(g)``) and after (``expected(g)``), and ``info`` for reports."""
    name: str
    network: str
    nbytes: int                 # bytes of each node's buffer the collective covers
    phases: list
    initial: object
    expected: object
    info: dict = field(default_factory=dict)


def _check(network, groups, what):
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, not {network!r}")
    if network == "tca" and groups.count != 1:
        raise ValueError(f"TCA alone reaches only the nodes of one group; this machine has "
                         f"{groups.count} groups: use network='hybrid' or 'mpi' for {what}")


def broadcast(groups, size, data, *, root=0, network="hybrid"):
    """Broadcast ``data`` (``size`` bytes) from global node ``root`` to every node."""
    _check(network, groups, "a Broadcast")
    data = bytes(data)
    if size < 1 or len(data) != size:
        raise ValueError(f"size must be >= 1 and match the data ({len(data)} bytes), not {size}")
    p = groups.plan.n_nodes
    if not 0 <= root < p:
        raise ValueError(f"root must be a node of the machine (0..{p - 1}), not {root}")
    leaders = [groups.leader(k, root) for k in range(groups.count)]

    def tca(ctx, k):
        nodes = groups.local(k)
        lead = groups.leader(k, root) - groups.members(k)[0]
        return tca_broadcast(ctx.mem(k), nodes, ctx.offset, size, root=lead,
                             window=ctx.window) if len(nodes) > 1 else None

    def leaders_bcast(ctx, rank):
        if rank.rank not in leaders:
            return None
        return mv2_bcast(rank, ctx.buffer(rank.rank), size, groups.of(root), group=leaders)

    def world_bcast(ctx, rank):
        return naive_cuda_bcast(rank, ctx.buffer(rank.rank), size, root)

    phases = {"tca": [TcaPhase("TCA binomial", tca)],
              "mpi": [MpiPhase("MPI_Bcast", world_bcast)],
              "hybrid": [MpiPhase("MPI_Bcast among group leaders", leaders_bcast),
                         TcaPhase("TCA binomial in each group", tca)]}[network]
    return Hybrid("broadcast", network, size, phases,
                  initial=lambda g: data if g == root else bytes(size),
                  expected=lambda g: data,
                  info={"root": root, "leaders": leaders, "bytes": size,
                        "mpi_algorithm": select_bcast(
                            p if network == "mpi" else len(leaders), size)})


def allgather(groups, block, blocks, *, network="hybrid"):
    """Allgather: node ``g``'s ``blocks[g]`` (``block`` bytes) ends at ``g * block`` of every
    node's buffer (``p * block`` bytes)."""
    _check(network, groups, "an Allgather")
    p, m = groups.plan.n_nodes, groups.size
    if p & (p - 1) or m & (m - 1):
        raise ValueError(f"recursive doubling needs a power-of-two number of nodes and group "
                         f"size, not {p} nodes in groups of {m}")
    blocks = [bytes(b) for b in blocks]
    if block < 1 or len(blocks) != p or any(len(b) != block for b in blocks):
        raise ValueError(f"allgather needs {p} blocks of block = {block} >= 1 bytes")
    whole = b"".join(blocks)

    def tca(ctx, k):
        first = groups.members(k)[0]
        return tca_allgather(ctx.mem(k), groups.local(k), ctx.offset + first * block, block,
                             window=ctx.window) if m > 1 else None

    def across(ctx, rank):
        return _doubling_from(rank, ctx.buffer(rank.rank), block, m, p)

    def world_allgather(ctx, rank):
        return naive_cuda_allgather(rank, ctx.buffer(rank.rank), block)

    phases = {"tca": [TcaPhase("TCA recursive doubling", tca)],
              "mpi": [MpiPhase("MPI_Allgather", world_allgather)],
              "hybrid": [TcaPhase("TCA recursive doubling in each group", tca),
                         MpiPhase("MPI recursive doubling across groups", across)]}[network]
    return Hybrid("allgather", network, p * block, phases,
                  initial=lambda g: bytes(g * block) + blocks[g] + bytes((p - 1 - g) * block),
                  expected=lambda g: whole,
                  info={"block": block, "gathered": p * block, "mpi_steps":
                        (p // m).bit_length() - 1 if network == "hybrid" else None})


def _doubling_from(rank, buf, block, first_mask, p):
    """Recursive doubling's steps from distance ``first_mask`` on: each node already holds the
    ``first_mask`` blocks of its group (as ``MPIR_Allgather_RD`` after its first steps)."""
    me, mask = rank.rank, first_mask
    while mask < p:
        peer = me ^ mask
        mine, theirs = me & -mask, peer & -mask
        yield rank.waitall([
            rank.irecv(buf, peer, ALLGATHER_TAG, mask * block, theirs * block, context=COLL),
            rank.isend(buf, peer, ALLGATHER_TAG, mask * block, mine * block, context=COLL)])
        mask <<= 1
