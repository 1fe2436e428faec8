"""MPI all-to-all across sub-clusters, with its Python model: every byte known in advance.

Node ``g`` sends one message to every node ``h`` of every other sub-cluster and receives one
from each, all at once (``irecv`` all, ``isend`` all, ``waitall``).  Message ``g -> h`` has
:func:`message_bytes` bytes of :func:`message_data`, a function of the seed and the two global
node numbers only, so every process knows what any node sends.  Buffers alternate between host
memory (host0, PEACH2's socket) and GPU memory (GPU0, across QPI from the HCA) by node, so the
host and the QPI-limited GDR paths both carry traffic.
"""

import random

__all__ = ["MpiAllToAll"]

TAG = 7


class MpiAllToAll:
    """The traffic and its model for ``plan`` (a :class:`~.plan.MachinePlan`).

    Parameters
    ----------
    plan : MachinePlan
    seed : int
    size : int
        Largest message, bytes (messages are ``size // 2`` .. ``size``).
    """

    def __init__(self, plan, seed, size):
        self.plan, self.seed, self.size = plan, seed, size
        self._buffers = {}

    def peers(self, g):
        """Every node of the other sub-clusters."""
        s = self.plan.subcluster_of(g)
        return [h for h in range(self.plan.n_nodes) if self.plan.subcluster_of(h) != s]

    def message_bytes(self, g, h):
        """Length of message ``g -> h``."""
        half = self.size // 2
        return half + (g * 131 + h * 71) % (self.size - half + 1)

    def message_data(self, g, h):
        """Bytes of message ``g -> h``."""
        return random.Random(self.seed * 1_000_003 + g * 4099 + h).randbytes(
            self.message_bytes(g, h))

    def where(self, g):
        """Memory of node ``g``'s buffers: ``(send, receive)``."""
        return ("host0", "gpu0") if g % 2 == 0 else ("gpu0", "host0")

    def _offsets(self, g, outgoing):
        offsets, pos = {}, 0
        for h in self.peers(g):
            offsets[h] = pos
            pos += self.message_bytes(g, h) if outgoing else self.message_bytes(h, g)
        return offsets, pos

    def setup(self, world):
        """Allocate and fill the buffers of ``world``'s ranks; return the rank program."""
        for g, rank in world.ranks.items():
            sends, stotal = self._offsets(g, True)
            recvs, rtotal = self._offsets(g, False)
            swhere, rwhere = self.where(g)
            sbuf, rbuf = rank.alloc(max(stotal, 1), swhere), rank.alloc(max(rtotal, 1), rwhere)
            for h, off in sends.items():
                sbuf.write(self.message_data(g, h), off)
            self._buffers[g] = (sbuf, sends, rbuf, recvs)

        def program(rank):
            g = rank.rank
            sbuf, sends, rbuf, recvs = self._buffers[g]
            reqs = [rank.irecv(rbuf, h, TAG, self.message_bytes(h, g), off)
                    for h, off in recvs.items()]
            reqs += [rank.isend(sbuf, h, TAG, self.message_bytes(g, h), off)
                     for h, off in sends.items()]
            yield rank.waitall(reqs)
            return [req.t_done for req in reqs]
        return program

    def check(self, g):
        """Compare node ``g``'s receive buffer with the model; return the bytes checked."""
        sbuf, sends, rbuf, recvs = self._buffers[g]
        n = 0
        for h, off in recvs.items():
            want = self.message_data(h, g)
            got = rbuf.read(off, len(want))
            if got != want:
                bad = next(i for i in range(len(want)) if got[i] != want[i])
                raise AssertionError(f"node {g}: the message from node {h} differs from its "
                                     f"model at byte {bad} of {len(want)} ({rbuf!r})")
            n += len(want)
        for h, off in sends.items():        # the sender's bytes are untouched
            if sbuf.read(off, self.message_bytes(g, h)) != self.message_data(g, h):
                raise AssertionError(f"node {g}: its send buffer to node {h} was overwritten")
        return n
