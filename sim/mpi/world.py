"""A set of ranks, one per node, on one InfiniBand switch, and the runner of their programs.

::

    rank 0: Node + HCA --+
    rank 1: Node + HCA --+-- Fabric (one flat 4x QDR switch) -- one event engine
     ...                 |
    rank n-1: Node + HCA-+

Everything runs on the fabric's event engine (``Fabric.schedule`` / ``Fabric.run``): the HCAs'
verbs, the nodes' copies, the MPI protocol, and the rank programs themselves, which are
generators resumed when what they wait for is complete.  Nothing reads a clock or a random
source, and simultaneous events are ordered by (time, rank, scheduling order), so the same
programs give the same bytes and the same times.

Example (one 8-byte ping from GPU2 to GPU2)::

    world = World(2)
    a, b = world.rank(0).alloc(8, "gpu2"), world.rank(1).alloc(8, "gpu2")
    a.write(b"8 bytes!")

    def program(rank):
        if rank.rank == 0:
            yield rank.send(a, dest=1, tag=0)
        else:
            status = yield rank.recv(b, source=0, tag=0)
            return rank.now

    print(world.run(program))          # [None, 6.5 us in ps]
"""

import inspect

from peach2.sim.infiniband import Fabric
from peach2.sim.node import Node, NodeParams
from peach2.sim.verbs import HCA

from .errors import Deadlock
from .params import MPIParams
from .rank import Rank

__all__ = ["World"]


class World:
    """``n_ranks`` nodes, their HCAs on one switch, one MPI rank each.

    One rank is allowed (as ``mpirun -np 1``): its switch has a second, unused port.

    Members
    -------
    fabric : Fabric
        The switch and the event engine.
    params : MPIParams
        MPI settings, the same on every rank.
    nodes : list of Node
        One per rank.
    ranks : list of Rank
        The MPI ranks.
    """

    def __init__(self, n_ranks, params=None, *, node_params=None, ib_params=None, socket=None):
        if params is None:
            params = MPIParams()
        if not isinstance(params, MPIParams):
            raise TypeError(f"params must be an MPIParams, not {type(params).__name__}")
        node_params = node_params or NodeParams()
        if socket is None:
            socket = node_params.hca_socket
        if isinstance(socket, bool) or not isinstance(socket, int) \
                or not 0 <= socket < node_params.sockets:
            raise ValueError(f"socket must be 0..{node_params.sockets - 1}, not {socket!r}")
        if isinstance(n_ranks, bool) or not isinstance(n_ranks, int) or n_ranks < 1:
            raise ValueError(f"a world needs at least 1 rank, not {n_ranks!r}")
        self.fabric = Fabric(max(n_ranks, 2), ib_params)    # one rank: a port left unused
        self.params = params
        self.nodes = [Node(node_params) for _ in range(n_ranks)]
        self.ranks = []
        for r, node in enumerate(self.nodes):
            hca = HCA(self.fabric, r, node.dma("hca"))
            self.ranks.append(Rank(self, r, node, hca, params, socket))

    def __repr__(self):
        return f"World({self.size} ranks, t = {self.now} ps)"

    @property
    def size(self):
        """Number of ranks."""
        return len(self.ranks)

    @property
    def now(self):
        """The event engine's time (picoseconds)."""
        return self.fabric.now

    def rank(self, r):
        """Return :class:`~.rank.Rank` ``r``."""
        return self.ranks[r]

    def connect(self, a, b):
        """Create and connect the queue pair between ranks ``a`` and ``b`` (done on first use)."""
        ra, rb = self.ranks[a], self.ranks[b]
        qa = ra.hca.create_qp(ra.protocol.cq, ra.protocol.cq)
        qb = rb.hca.create_qp(rb.protocol.cq, rb.protocol.cq)
        ra.hca.connect(qa, b, qb.qp_num)
        rb.hca.connect(qb, a, qa.qp_num)
        ra.protocol.attach(b, qa)
        rb.protocol.attach(a, qb)

    # -- running programs ------------------------------------------------------------------------

    def run(self, program, limit_ps=None):
        """Run rank programs until all have returned; return their return values by rank.

        ``program`` is one generator function called for every rank (``program(rank)``), or a
        dict / sequence of them by rank (ranks without one do nothing).  A plain function (not a
        generator) simply runs at once.  Raises :class:`~.errors.Deadlock` when nothing is left
        to simulate and some rank still waits, and any error a program does not catch.
        """
        if callable(program):
            programs = {r: program for r in range(self.size)}
        elif isinstance(program, dict):
            programs = dict(program)
        else:
            programs = dict(enumerate(program))
        if any(rank.running for rank in self.ranks):
            raise RuntimeError("World.run is already running")
        results = {}
        for r in sorted(programs):
            rank = self.ranks[r]
            outcome = programs[r](rank)
            if inspect.isgenerator(outcome):
                rank.run_program(outcome, max(rank.now, self.now), results.__setitem__)
            else:
                results[r] = outcome
        try:
            self.fabric.run(limit_ps)
            if any(rank.running for rank in self.ranks):
                raise Deadlock({rank.rank: rank.blocked_on() for rank in self.ranks
                                if rank.running})
        finally:
            for rank in self.ranks:
                rank.stop_program()
        return [results.get(r) for r in range(self.size)]
