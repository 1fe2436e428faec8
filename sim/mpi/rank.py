"""One MPI rank (one node): buffers, non-blocking point-to-point calls, matching.

The API follows MPI's non-blocking calls, so collectives can be written on it::

    def ring(rank):                              # a rank program: a generator
        right, left = (rank.rank + 1) % rank.size, (rank.rank - 1) % rank.size
        reqs = [rank.isend(out, right, tag=0), rank.irecv(inp, left, tag=0)]
        yield rank.waitall(reqs)

Calls take the rank's CPU time (``MPIParams`` software costs) and return at once; a program
blocks by yielding what :meth:`Rank.wait`, :meth:`Rank.waitall`, :meth:`Rank.send`,
:meth:`Rank.recv` or :meth:`Rank.elapse` return (see :mod:`.wait`).  Messages match receives
by (source, tag) in MPI's order (wildcards :data:`ANY_SOURCE`, :data:`ANY_TAG`) within one
context: the user's calls use :data:`~.request.P2P`, the collectives of
:mod:`peach2.sim.mpi.collective` pass ``context=COLL``, so neither matches the other; sizes are
bytes.  Bad input raises :class:`~.errors.MPIError` naming the MPI error class.

Progress is asynchronous: completions are handled when they appear, as if the rank sat in
``MPI_Wait`` (MVAPICH2 progresses only inside MPI calls; a rank computing between calls would
delay its peers, which this model does not do).
"""

from .buffer import Buffer
from .errors import (
    ERR_BUFFER,
    ERR_COUNT,
    ERR_OTHER,
    ERR_RANK,
    ERR_REQUEST,
    ERR_TAG,
    ERR_TRUNCATE,
    MPIError,
)
from .params import TAG_UB
from .protocol import Protocol
from .request import ANY_SOURCE, ANY_TAG, CONTEXTS, P2P, Request
from .wait import Wait

__all__ = ["Rank"]


class Rank:
    """The MPI view of one node of a :class:`~.world.World`.

    Members
    -------
    rank : int
        Its number (also its node and switch port).
    size : int
        Number of ranks.
    node : Node
        Its node (memories, copy engines, PCIe paths).
    hca : HCA
        Its InfiniBand HCA.
    params : MPIParams
        Protocol thresholds and software costs.
    socket : int
        The socket it runs on; its host buffers default to that socket's memory.
    now : int
        The program's clock (picoseconds): advanced by calls and waits.
    """

    def __init__(self, world, rank, node, hca, params, socket):
        self.world = world
        self.rank = rank
        self.node = node
        self.hca = hca
        self.params = params
        self.socket = socket
        self.now = 0
        self._cpu_free = 0
        self._buffers = {}          # address -> Buffer
        self._pending = {}          # requests not yet complete (a dict: ordered)
        self._posted = []           # receives waiting for a message, in posting order
        self._unexpected = []       # messages waiting for a receive, in arrival order
        self._program = None        # the program's generator while it runs
        self._waiting = None        # the Wait it is blocked on
        self._on_return = None      # on_return(rank, value) when it returns
        self.protocol = Protocol(self)

    def __repr__(self):
        return f"Rank({self.rank} of {self.size}, socket {self.socket})"

    @property
    def size(self):
        """Number of ranks in the world."""
        return self.world.size

    @property
    def home(self):
        """Name of the host memory of the rank's socket (``"host1"``, ...)."""
        return f"host{self.socket}"

    # -- buffers ---------------------------------------------------------------------------------

    def alloc(self, nbytes, where="host", align=64):
        """Allocate and register ``nbytes`` in ``where``; return the :class:`Buffer`.

        ``where`` is ``"host"`` (the rank's socket), ``"host0"``, ``"host1"``, or ``"gpu0"`` ...
        ``"gpu3"``.  The memory starts zeroed.
        """
        memory = self.node.memory(self.home if where == "host" else where)
        addr = memory.alloc(nbytes, align)
        buf = Buffer(self.node, self.rank, addr, nbytes, memory.name, memory.gpu)
        self._buffers[addr] = buf
        return buf

    def free(self, buf):
        """Release a buffer from :meth:`alloc`; refused while a request still uses it."""
        self._own(buf)
        if any(r.buf is buf for r in self._pending):
            raise MPIError(ERR_BUFFER, f"{buf!r} is still in use by a pending request")
        del self._buffers[buf.addr]
        self.node.free(buf.addr)
        buf.freed = True

    # -- point to point ------------------------------------------------------------------------

    def isend(self, buf, dest, tag, count=None, offset=0, *, context=P2P):
        """Start sending ``count`` bytes of ``buf`` from ``offset`` to ``dest``; return it.

        ``context`` is :data:`~.request.P2P` for the user's messages; collectives send in
        :data:`~.request.COLL`, where only their own receives match.
        """
        self._check_context(context)
        self._check_rank(dest, "dest", wildcard=False)
        self._check_tag(tag, wildcard=False)
        req = Request("send", self, dest, tag, *self._range(buf, offset, count), context)
        self._start(req, self.params.send_overhead_ps, self.protocol.start_send)
        return req

    def irecv(self, buf, source, tag, count=None, offset=0, *, context=P2P):
        """Post a receive of at most ``count`` bytes into ``buf`` at ``offset``; return it.

        It matches only messages sent in the same ``context`` (see :meth:`isend`).
        """
        self._check_context(context)
        self._check_rank(source, "source", wildcard=True)
        self._check_tag(tag, wildcard=True)
        req = Request("recv", self, source, tag, *self._range(buf, offset, count), context)
        self._start(req, self.params.recv_overhead_ps, self._post_recv)
        return req

    def send(self, buf, dest, tag, count=None, offset=0, *, context=P2P):
        """Blocking send: ``yield rank.send(...)``."""
        return self.wait(self.isend(buf, dest, tag, count, offset, context=context))

    def recv(self, buf, source, tag, count=None, offset=0, *, context=P2P):
        """Blocking receive: ``status = yield rank.recv(...)``."""
        return self.wait(self.irecv(buf, source, tag, count, offset, context=context))

    def wait(self, req):
        """Wait for ``req``: ``status = yield rank.wait(req)`` (raises the request's error)."""
        self._own_request(req)
        return Wait(self.rank, [req])

    def waitall(self, reqs):
        """Wait for all of ``reqs``: ``statuses = yield rank.waitall(reqs)``."""
        reqs = list(reqs)
        for req in reqs:
            self._own_request(req)
        return Wait(self.rank, reqs, many=True)

    def test(self, req):
        """True when ``req`` is complete (``MPI_Test`` without the status)."""
        self._own_request(req)
        return req.done

    def elapse(self, delay_ps):
        """Compute for ``delay_ps``: ``yield rank.elapse(2_000_000)``."""
        if isinstance(delay_ps, bool) or not isinstance(delay_ps, int) or delay_ps < 0:
            raise ValueError(f"delay must be a non-negative integer of ps, not {delay_ps!r}")
        return Wait(self.rank, delay_ps=delay_ps)

    # -- used by the protocol and the world ---------------------------------------------------

    def cpu(self, t_ps, cost_ps):
        """Run ``cost_ps`` of MPI work on the rank's CPU from ``t_ps`` on; return its end."""
        start = max(t_ps, self._cpu_free)
        self._cpu_free = start + cost_ps
        return self._cpu_free

    def block_cpu(self, until_ps):
        """Keep the CPU busy until ``until_ps`` (a synchronous copy)."""
        self._cpu_free = max(self._cpu_free, until_ps)

    def arrived(self, env):
        """Match an arrived message to the oldest fitting receive, or queue it as unexpected."""
        i = 0
        while i < len(self._posted):
            req = self._posted[i]
            if env.matches(req.peer, req.tag, req.context):
                del self._posted[i]
                if env.size > req.count:
                    self._truncated(req, env)       # that receive fails; the message stays
                    continue
                self.protocol.deliver(env, req)
                return
            i += 1
        self._unexpected.append(env)

    def complete(self, req, status=None, error=None):
        """Mark ``req`` complete now, with its status or its error."""
        req.done = True
        req.t_done = self.world.fabric.now
        req.status = status
        req.error = error
        self._pending.pop(req, None)
        self._notify()

    def pending(self):
        """Requests of this rank not complete yet (for diagnostics)."""
        return list(self._pending)

    # -- the rank's program, run by its world ---------------------------------------------------

    def run_program(self, gen, t_ps, on_return):
        """Run the generator ``gen`` (a started program) from ``t_ps`` on the fabric's events;
        call ``on_return(rank number, value)`` when it returns."""
        self._program = gen
        self._on_return = on_return
        self.world.fabric.schedule(t_ps, self.rank, self._step, None, None)

    @property
    def running(self):
        """True while a program runs on this rank."""
        return self._program is not None

    def blocked_on(self):
        """What the running program waits for, as text (for diagnostics)."""
        return repr(self._waiting if self._waiting is not None else "running")

    def stop_program(self):
        """Forget the program and what it waits for (its pending events then do nothing)."""
        self._program = None
        self._waiting = None

    def _notify(self):
        # a request completed: resume the program if its wait is over
        wait = self._waiting
        if wait is not None and wait.ready():
            self._waiting = None
            fabric = self.world.fabric
            t = max(self.now, fabric.now, wait.t_ready()) + self.params.wait_overhead_ps
            fabric.schedule(t, self.rank, self._resume, wait)

    def _resume(self, wait):
        self.now = max(self.now, self.world.fabric.now)
        try:
            value = wait.result()
        except Exception as error:        # the request's MPIError, thrown into the program
            self._step(None, error)
            return
        self._step(value, None)

    def _step(self, value, error):
        gen = self._program
        if gen is None:
            return
        r = self.rank
        self.now = max(self.now, self.world.fabric.now)
        try:
            wait = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            self._program = None
            self._on_return(r, stop.value)
            return
        if not isinstance(wait, Wait) or wait.rank != r:
            gen.close()
            self._program = None
            raise TypeError(f"rank {r}'s program yielded {wait!r}: yield what rank.wait, "
                            f"waitall, send, recv or elapse return (for this rank)")
        if not wait.requests:
            self.now += wait.delay_ps
            self.world.fabric.schedule(self.now, r, self._step, None, None)
            return
        self._waiting = wait
        self._notify()

    # -- internals -------------------------------------------------------------------------------

    def _start(self, req, cost, action):
        if req.device and not self.params.MV2_USE_CUDA:
            raise MPIError(ERR_OTHER, f"{req.buf!r} is GPU memory but MV2_USE_CUDA is off")
        if self.params.MV2_USE_CUDA:
            cost += self.params.cuda_check_ps
        t = self.cpu(max(self.now, self.world.fabric.now), cost)
        self.now = t
        self._pending[req] = None
        self.world.fabric.schedule(t, self.rank, action, req)

    def _post_recv(self, req):
        for i, env in enumerate(self._unexpected):
            if env.matches(req.peer, req.tag, req.context):
                if env.size > req.count:
                    self._truncated(req, env)
                    return
                del self._unexpected[i]
                self.protocol.deliver(env, req)
                return
        self._posted.append(req)

    def _truncated(self, req, env):
        self.complete(req, error=MPIError(
            ERR_TRUNCATE, f"rank {self.rank}: a message of {env.size} bytes from rank "
            f"{env.src} (tag {env.tag}) does not fit the receive of {req.count} bytes; the "
            f"message is kept for a receive that can hold it"))

    def _range(self, buf, offset, count):
        self._own(buf)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise MPIError(ERR_COUNT, f"offset must be a non-negative integer, not {offset!r}")
        if count is None:
            count = buf.length - offset
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise MPIError(ERR_COUNT, f"count must be a non-negative integer, not {count!r}")
        if offset + count > buf.length:
            raise MPIError(ERR_COUNT, f"{count} bytes at offset {offset} leave {buf!r}")
        return buf, offset, count

    def _own(self, buf):
        if not isinstance(buf, Buffer):
            what = f"address {buf:#x}" if isinstance(buf, int) and not isinstance(buf, bool) \
                else repr(buf)
            raise MPIError(ERR_BUFFER, f"rank {self.rank}: {what} is not a buffer from "
                           f"Rank.alloc (unknown or unregistered memory)")
        if buf.freed or buf.rank != self.rank or self._buffers.get(buf.addr) is not buf:
            raise MPIError(ERR_BUFFER, f"rank {self.rank}: {buf!r} is not a live buffer of "
                           f"this rank")

    def _own_request(self, req):
        if not isinstance(req, Request) or req.rank is not self:
            raise MPIError(ERR_REQUEST, f"rank {self.rank}: {req!r} is not a request of this "
                           f"rank")

    def _check_rank(self, value, name, wildcard):
        if wildcard and value == ANY_SOURCE:
            return
        if isinstance(value, bool) or not isinstance(value, int) \
                or not 0 <= value < self.size:
            raise MPIError(ERR_RANK, f"rank {self.rank}: {name} = {value!r} is not a rank of "
                           f"this world (0..{self.size - 1})")

    @staticmethod
    def _check_context(value):
        if isinstance(value, bool) or not isinstance(value, int) or value not in CONTEXTS:
            raise ValueError(f"context must be one of {CONTEXTS} (P2P, COLL), not {value!r}")

    def _check_tag(self, value, wildcard):
        if wildcard and value == ANY_TAG:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= TAG_UB:
            raise MPIError(ERR_TAG, f"rank {self.rank}: tag {value!r} is outside 0..{TAG_UB}")

