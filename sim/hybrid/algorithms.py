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

A network may carry options after ``+`` (``"hybrid+ring+staged"``), each changing one part of
it (issue 31's item 4):

- ``ring`` (Allgather; ``tca`` and ``hybrid``): the TCA part gathers along the group's rings
  (:func:`peach2.sim.collectives.ring_allgather`: one hop per step, no ring link shared by two
  flows) instead of recursive doubling, whose steps between nodes 2 and 4 apart share links;
- ``staged`` (``hybrid``): the hybrid's MPI steps stage the GPU data through host memory
  (``cudaMemcpy``, InfiniBand host to host, ``cudaMemcpy``: ``naive_cuda_bcast`` /
  ``naive_cuda_allgather`` among the leaders / from the gathered groups) instead of sending it
  from GPU0 message by message (GPUDirect RDMA across QPI up to 8 KB, MVAPICH2-GDR's pipeline
  above), the path MPI alone takes;
- ``hops<H>`` (``hybrid``, e.g. ``hybrid+hops2``): a per-step choice by hop count (000 section
  6.2: send multi-hop TCA steps over InfiniBand instead): the TCA part takes only the steps
  whose routes cross at most ``H`` links, the farther ones go over MPI with the rest
  (:meth:`~.groups.Groups.within`: smaller TCA groups, more MPI leaders).  Which ``H`` at
  which size: the tuning table's choice (:mod:`.tuning`).
"""

from dataclasses import dataclass, field

from peach2.sim.collectives import allgather as tca_allgather
from peach2.sim.collectives import broadcast as tca_broadcast
from peach2.sim.collectives import ring_allgather
from peach2.sim.mpi.collective import allgather as mpi_allgather
from peach2.sim.mpi.collective import (
    mv2_bcast,
    naive_cuda_allgather,
    naive_cuda_bcast,
    select_bcast,
)

__all__ = ["TcaPhase", "MpiPhase", "Overlap", "Hybrid", "NETWORKS", "OPTIONS", "parse_network",
           "broadcast", "allgather", "probe"]

#: The ways to communicate: TCA only, MPI over InfiniBand only, or both.
NETWORKS = ("tca", "mpi", "hybrid")

#: The options a network may carry after ``+``: which collectives and networks take each
#: (``hops`` is followed by its number: ``hops2``).
OPTIONS = {"ring": (("allgather",), ("tca", "hybrid")),
           "staged": (("broadcast", "allgather"), ("hybrid",)),
           "hops": (("broadcast", "allgather"), ("hybrid",))}


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
    (``initial(g)``) and after (``expected(g)``), and ``info`` for reports; ``groups``: the
    :class:`~.groups.Groups` its phases number, when not those it was built for (``+hops``)."""
    name: str
    network: str
    nbytes: int                 # bytes of each node's buffer the collective covers
    phases: list
    initial: object
    expected: object
    info: dict = field(default_factory=dict)
    groups: object = None


def parse_network(network, collective=None):
    """``"hybrid+ring+hops2"`` -> ``("hybrid", {"ring": True, "hops": 2})``: the network and
    its options; ``ValueError`` for an unknown network or option, or one ``collective`` does
    not take."""
    base, *words = str(network).split("+")
    if base not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS} (with options "
                         f"{'/'.join('+' + o for o in OPTIONS)}), not {network!r}")
    options = {}
    for word in words:
        name, value = word.rstrip("0123456789"), word[len(word.rstrip("0123456789")):]
        if name not in OPTIONS or (name == "hops") != bool(value) or (value and int(value) < 1):
            raise ValueError(f"{network!r}: unknown option {word!r} (options: ring, staged, "
                             f"hops<H> with H >= 1)")
        collectives, bases = OPTIONS[name]
        if base not in bases or (collective is not None and collective not in collectives):
            raise ValueError(f"{network!r}: +{name} goes with {' or '.join(collectives)} over "
                             f"{' or '.join(bases)}")
        if name in options:
            raise ValueError(f"{network!r}: an option twice")
        options[name] = int(value) if value else True
    return base, options


def _check(network, groups, what):
    base, options = parse_network(network, what)
    if base == "tca" and groups.count != 1:
        raise ValueError(f"TCA alone reaches only the nodes of one group; this machine has "
                         f"{groups.count} groups: use network='hybrid' or 'mpi' for {what}")
    if "hops" in options:
        groups = groups.within(options["hops"])
    if "ring" in options and groups.ring is None:
        raise ValueError(f"+ring gathers along whole rings: a group of {groups.size} nodes of "
                         f"a {groups.plan.shape} holds none")
    return base, options, groups


def broadcast(groups, size, data, *, root=0, network="hybrid"):
    """Broadcast ``data`` (``size`` bytes) from global node ``root`` to every node."""
    base, options, groups = _check(network, groups, "broadcast")
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
        how = naive_cuda_bcast if "staged" in options else mv2_bcast
        return how(rank, ctx.buffer(rank.rank), size, groups.of(root), group=leaders)

    def world_bcast(ctx, rank):
        return naive_cuda_bcast(rank, ctx.buffer(rank.rank), size, root)

    phases = {"tca": [TcaPhase("TCA binomial", tca)],
              "mpi": [MpiPhase("MPI_Bcast", world_bcast)],
              "hybrid": [MpiPhase("MPI_Bcast among group leaders"
                                  + (", staged" if "staged" in options else ""), leaders_bcast),
                         TcaPhase("TCA binomial in each group", tca)]}[base]
    return Hybrid("broadcast", network, size, phases,
                  initial=lambda g: data if g == root else bytes(size),
                  expected=lambda g: data,
                  info={"root": root, "leaders": leaders, "bytes": size,
                        "mpi_algorithm": select_bcast(
                            p if base == "mpi" else len(leaders), size)},
                  groups=groups)


def allgather(groups, block, blocks, *, network="hybrid"):
    """Allgather: node ``g``'s ``blocks[g]`` (``block`` bytes) ends at ``g * block`` of every
    node's buffer (``p * block`` bytes)."""
    base, options, groups = _check(network, groups, "allgather")
    p, m = groups.plan.n_nodes, groups.size
    if p & (p - 1) or m & (m - 1):
        raise ValueError(f"recursive doubling needs a power-of-two number of nodes and group "
                         f"size, not {p} nodes in groups of {m}")
    blocks = [bytes(b) for b in blocks]
    if block < 1 or len(blocks) != p or any(len(b) != block for b in blocks):
        raise ValueError(f"allgather needs {p} blocks of block = {block} >= 1 bytes")
    whole = b"".join(blocks)

    ring = "ring" in options

    def tca(ctx, k):
        first = groups.members(k)[0]
        if m == 1:
            return None
        if ring:
            return ring_allgather(ctx.mem(k), groups.local(k), ctx.offset + first * block,
                                  block, ring=groups.ring, window=ctx.window)
        return tca_allgather(ctx.mem(k), groups.local(k), ctx.offset + first * block, block,
                             window=ctx.window)

    def across(ctx, rank):
        # each node holds its group's m blocks: recursive doubling's steps from distance m on
        how = naive_cuda_allgather if "staged" in options else mpi_allgather
        return how(rank, ctx.buffer(rank.rank), block, held=m)

    def world_allgather(ctx, rank):
        return naive_cuda_allgather(rank, ctx.buffer(rank.rank), block)

    tca_name = "TCA ring" if ring else "TCA recursive doubling"
    phases = {"tca": [TcaPhase(tca_name, tca)],
              "mpi": [MpiPhase("MPI_Allgather", world_allgather)],
              "hybrid": [TcaPhase(f"{tca_name} in each group", tca),
                         MpiPhase("MPI recursive doubling across groups"
                                  + (", staged" if "staged" in options else ""), across)]}[base]
    return Hybrid("allgather", network, p * block, phases,
                  initial=lambda g: bytes(g * block) + blocks[g] + bytes((p - 1 - g) * block),
                  expected=lambda g: whole,
                  info={"block": block, "gathered": p * block, "mpi_steps":
                        (p // m).bit_length() - 1 if base == "hybrid" else None},
                  groups=groups)


def probe(groups, collective, network):
    """The :class:`Hybrid` of a one-byte ``collective`` (``"broadcast"``, ``"allgather"``)
    over ``network`` on ``groups``, built without a simulator: ``ValueError`` for whatever a
    run would refuse (a network or option the machine cannot take)."""
    if collective == "allgather":
        return allgather(groups, 1, [b"\0"] * groups.plan.n_nodes, network=network)
    if collective == "broadcast":
        return broadcast(groups, 1, b"\0", network=network)
    raise ValueError(f"collective must be 'broadcast' or 'allgather', not {collective!r}")
