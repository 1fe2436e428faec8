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
from .wait import Wait

__all__ = ["World"]


class World:
    """``n_ranks`` nodes, their HCAs on one switch, one MPI rank each.

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
        self.fabric = Fabric(n_ranks, ib_params)
        self.params = params
        self.nodes = [Node(node_params) for _ in range(n_ranks)]
        self.ranks = []
        for r, node in enumerate(self.nodes):
            hca = HCA(self.fabric, r, node.dma("hca"))
            self.ranks.append(Rank(self, r, node, hca, params, socket))
        self._programs = {}         # rank -> generator still running
        self._waiting = {}          # rank -> Wait it is blocked on
        self._results = {}

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
        if self._programs:
            raise RuntimeError("World.run is already running")
        results = {}
        self._results = results
        for r in sorted(programs):
            rank = self.ranks[r]
            outcome = programs[r](rank)
            if inspect.isgenerator(outcome):
                self._programs[r] = outcome
                self.fabric.schedule(max(rank.now, self.now), r, self._step, r, None, None)
            else:
                results[r] = outcome
        try:
            self.fabric.run(limit_ps)
            if self._programs:
                raise Deadlock({r: repr(self._waiting.get(r, "running"))
                                for r in self._programs})
        finally:
            self._programs.clear()
            self._waiting.clear()
        return [results.get(r) for r in range(self.size)]

    def notify(self, r):
        """A request of rank ``r`` completed: resume it if its wait is over."""
        wait = self._waiting.get(r)
        if wait is not None and wait.ready():
            del self._waiting[r]
            rank = self.ranks[r]
            t = max(rank.now, self.now, wait.t_ready()) + self.params.wait_overhead_ps
            self.fabric.schedule(t, r, self._resume, r, wait)

    def _resume(self, r, wait):
        rank = self.ranks[r]
        rank.now = max(rank.now, self.now)
        try:
            value = wait.result()
        except Exception as error:        # the request's MPIError, thrown into the program
            self._step(r, None, error)
            return
        self._step(r, value, None)

    def _step(self, r, value, error):
        gen = self._programs.get(r)
        if gen is None:
            return
        rank = self.ranks[r]
        rank.now = max(rank.now, self.now)
        try:
            wait = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            del self._programs[r]
            self._results[r] = stop.value
            return
        if not isinstance(wait, Wait) or wait.rank != r:
            gen.close()
            del self._programs[r]
            raise TypeError(f"rank {r}'s program yielded {wait!r}: yield what rank.wait, "
                            f"waitall, send, recv or elapse return (for this rank)")
        if not wait.requests:
            rank.now += wait.delay_ps
            self.fabric.schedule(rank.now, r, self._step, r, None, None)
            return
        self._waiting[r] = wait
        self.notify(r)
