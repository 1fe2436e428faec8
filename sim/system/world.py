"""MPI ranks of one partition of the machine, on that partition's share of the switch.

::

    Machine ── Partition s ── PartitionFabric (ports s*n .. s*n+n-1; the event engine)
                                 │
                 PartitionWorld: Rank g (Node, HCA on port g) for every port of the partition

:class:`peach2.sim.mpi.World` holds every rank on one :class:`~peach2.sim.infiniband.Fabric` and
runs the fabric itself.  Here the machine runs the partition's fabric one window at a time, the
ranks of other partitions live in other partitions (perhaps other processes), and only what the
switch carries crosses.  So the world differs from ``World`` in two ways:

- queue pairs are made when the world is built, not on first use (a peer in another process
  cannot be reached synchronously): each rank gets one queue pair per peer in the peers' order,
  so queue pair numbers are known on both sides without asking;
- programs are started at a given time and advance only as the machine runs the fabric
  (:attr:`finished` says when all have returned).

Rank numbers are the machine's global node numbers (= switch ports); ``size`` is the machine's.
"""

import inspect

from peach2.sim.mpi import MPIParams, Rank
from peach2.sim.verbs import HCA

__all__ = ["PartitionWorld"]


class PartitionWorld:
    """One partition's MPI ranks, each on its node model, connected to ``peers(g)``.

    Parameters
    ----------
    partition : peach2.sim.machine.Partition
    nodes : dict of int to Node
        The node model of every port of the partition (e.g. :func:`.bridge.bridged_node`).
    peers : callable
        ``peers(g)``: the ranks rank ``g`` talks to (symmetric: ``h in peers(g)`` iff
        ``g in peers(h)``), connected at once, each with ``MV2_PREPOST_DEPTH`` receives posted.
    params : MPIParams
    dmas : dict of int to DMA, optional
        The DMA each rank's HCA uses (e.g. :class:`.endpoint_dma.EndpointDMA`); default the
        node model's ``node.dma("hca")``.

    Members
    -------
    fabric : PartitionFabric
    ranks : dict of int to Rank
        This partition's ranks by global number.
    size : int
        Ranks of the whole machine.
    results : dict of int to object
        What each finished program returned.
    """

    def __init__(self, partition, nodes, peers, params=None, socket=None, dmas=None):
        self.params = params or MPIParams()
        if not isinstance(self.params, MPIParams):
            raise TypeError(f"params must be an MPIParams, not {type(self.params).__name__}")
        self.fabric = partition.fabric
        self.size = self.fabric.n_ports
        if sorted(nodes) != list(partition.ports):
            raise ValueError(f"nodes must be given for ports {partition.ports.start}.."
                             f"{partition.ports.stop - 1}, not {sorted(nodes)}")
        self.ranks = {}
        for g in partition.ports:
            node = nodes[g]
            home = node.params.hca_socket if socket is None else socket
            dma = node.dma("hca") if dmas is None else dmas[g]
            self.ranks[g] = Rank(self, g, node, HCA(self.fabric, g, dma), self.params, home)
        self._peers = {g: sorted(peers(g)) for g in range(self.size)}
        for g, rank in self.ranks.items():
            for h in self._peers[g]:
                if g not in self._peers[h] or h == g:
                    raise ValueError(f"peers must be symmetric and exclude the rank itself: "
                                     f"{h} in peers({g}) but peers({h}) = {self._peers[h]}")
        for g, rank in self.ranks.items():
            cq = rank.protocol.cq
            for h in self._peers[g]:
                qp = rank.hca.create_qp(cq, cq)
                rank.hca.connect(qp, h, self._peers[h].index(g))
                rank.protocol.attach(h, qp)
        self.results = {}

    def __repr__(self):
        return f"PartitionWorld(ranks {min(self.ranks)}..{max(self.ranks)} of {self.size})"

    @property
    def now(self):
        return self.fabric.now

    @property
    def finished(self):
        """True when every started program has returned."""
        return not any(rank.running for rank in self.ranks.values())

    def rank(self, g):
        """Return this partition's :class:`Rank` ``g``."""
        return self.ranks[g]

    def connect(self, a, b):
        """Refused: a distributed world connects its ranks when it is built."""
        raise ValueError(f"rank {a} has no queue pair to rank {b}: a machine's ranks connect "
                         f"only to their peers, when the world is built (peers({a}) = "
                         f"{self._peers.get(a)})")

    def start(self, program, t_ps):
        """Start ``program(rank)`` (a generator function) on every rank of this partition at
        ``t_ps``; the machine's run calls advance them."""
        for g in sorted(self.ranks):
            rank = self.ranks[g]
            rank.now = max(rank.now, t_ps)
            outcome = program(rank)
            if inspect.isgenerator(outcome):
                rank.run_program(outcome, rank.now, self.results.__setitem__)
            else:
                self.results[g] = outcome

    def start_rank(self, g, program, t_ps, on_return=None):
        """Start ``program(rank)`` on rank ``g`` of this partition alone at ``t_ps`` (a rank
        whose program has returned, or that never ran one); ``on_return(g, value)`` is called
        when it returns, after :attr:`results` holds the value.  A step of a hybrid collective
        starts this way when the node's previous step is over."""
        rank = self.ranks[g]
        if rank.running:
            raise RuntimeError(f"rank {g} is still running a program ({rank.blocked_on()})")

        def returned(r, value):
            self.results[r] = value
            if on_return is not None:
                on_return(r, value)
        rank.now = max(rank.now, t_ps)
        outcome = program(rank)
        if inspect.isgenerator(outcome):
            rank.run_program(outcome, rank.now, returned)
        else:
            returned(g, outcome)

    def pending(self):
        """``{rank: what it waits for}`` of the programs still running."""
        return {g: rank.blocked_on() for g, rank in self.ranks.items() if rank.running}
