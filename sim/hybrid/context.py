"""Where a hybrid collective's bytes are: one buffer at the same offset of every node's GPU0.

::

    node g's GPU0 (cocotb GPU model's memory, the node model's "gpu0" backed by it)
    [0 ......... offset ......... offset + nbytes ....]
                 └── MPI: Buffer of rank g (rank.alloc(nbytes, "gpu0"))
                 └── TCA: Place(i, ("gpu", 0), offset) of chip i of g's sub-cluster

The MPI rank's buffer is allocated first on every node, so the allocator gives every node the
same offset, which is the symmetric address the TCA descriptors use.  The TCA collectives' flags
(completion writes) are in each node's host window, in the part of it the MPI ranks never take
(``MachineSim.make_worlds(reserve=...)``).
"""

from peach2.sim.collectives import Memories

__all__ = ["Context", "GPU"]

#: The GPU holding the data: GPU0, on PEACH2's socket (000 Figure 1).
GPU = 0


class Context:
    """The buffers of ``nbytes`` on every local node of ``sim`` (a
    :class:`~peach2.sim.system.MachineSim` with its worlds made), for ``groups``.

    Members
    -------
    offset : int
        The buffer's offset in every node's GPU0 window.
    window : tuple
        ``("gpu", 0)``: the TCA window of the buffer.
    """

    def __init__(self, sim, groups, nbytes):
        self.sim, self.groups, self.nbytes = sim, groups, nbytes
        self.window = ("gpu", GPU)
        self._buffers = {}
        offsets = set()
        for s in sim.local:
            for g, rank in sim.worlds[s].ranks.items():
                buf = rank.alloc(nbytes, f"gpu{GPU}")
                self._buffers[g] = buf
                offsets.add(buf.addr - rank.node.memory(f"gpu{GPU}").base)
        offsets = {o for part in sim.transport.allgather(sorted(offsets)) for o in part}
        if len(offsets) != 1:
            raise RuntimeError(f"the buffers are not symmetric: GPU0 offsets {sorted(offsets)}")
        self.offset = offsets.pop()
        _, gpu_size = sim.address_map.window(0, self.window)
        if self.offset + nbytes > gpu_size:
            raise ValueError(f"{nbytes} bytes at GPU0 offset {self.offset:#x} do not fit the "
                             f"{gpu_size:#x}-byte GPU window: give the machine a larger "
                             f"gpu_size")
        self._mems = {s: Memories(c) for s, c in sim.clusters.items()}

    @property
    def nodes(self):
        """The local nodes (global numbers), in order."""
        return sorted(self._buffers)

    def free(self):
        """Give every rank's buffer back (after the run)."""
        for g, buf in self._buffers.items():
            self.sim.rank(g).free(buf)

    def buffer(self, g):
        """Rank ``g``'s :class:`~peach2.sim.mpi.Buffer` (a local node)."""
        return self._buffers[g]

    def mem(self, k):
        """The :class:`~peach2.sim.collectives.Memories` of group ``k``'s sub-cluster."""
        return self._mems[self.groups.subcluster(k)]

    def local_groups(self):
        """The groups whose sub-cluster runs in this process."""
        return [k for k in range(self.groups.count) if self.groups.subcluster(k) in self._mems]

    def write(self, g, data):
        self._buffers[g].write(data)

    def read(self, g):
        return self._buffers[g].read(0, self.nbytes)
