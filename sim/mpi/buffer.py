"""A communication buffer a rank allocated: host or GPU memory, registered with the HCA."""

__all__ = ["Buffer"]


class Buffer:
    """``length`` bytes at bus address ``addr`` in memory ``where`` of a rank's node.

    Buffers come from :meth:`Rank.alloc`, which registers them for communication (MVAPICH2's
    registration cache, steady state: no registration cost).  Passing anything else to a send
    or receive (another rank's buffer, a freed one, a bare address never allocated) raises
    ``MPI_ERR_BUFFER``.

    Members
    -------
    rank : int
        Owner.
    addr, length : int
        The bytes.
    where : str
        Memory name: ``"host0"``, ``"host1"``, ``"gpu0"`` ... ``"gpu3"``.
    gpu : int or None
        GPU number for device memory.
    freed : bool
        True after :meth:`Rank.free`.
    """

    def __init__(self, node, rank, addr, length, where, gpu):
        self._node = node
        self.rank = rank
        self.addr = addr
        self.length = length
        self.where = where
        self.gpu = gpu
        self.freed = False

    def __repr__(self):
        state = ", freed" if self.freed else ""
        return (f"Buffer(rank {self.rank}, {self.where}, {self.length} bytes at "
                f"{self.addr:#x}{state})")

    def read(self, offset=0, nbytes=None):
        """Return the buffer's bytes as they are now (no simulated time)."""
        nbytes = self.length - offset if nbytes is None else nbytes
        self._range(offset, nbytes)
        return self._node.load(self.addr + offset, nbytes)

    def write(self, data, offset=0):
        """Set bytes from ``offset`` (no simulated time: initialisation and checks)."""
        data = bytes(data)
        self._range(offset, len(data))
        self._node.store(self.addr + offset, data)

    def _range(self, offset, nbytes):
        if self.freed:
            raise ValueError(f"{self!r} has been freed")
        if not (0 <= offset and 0 <= nbytes and offset + nbytes <= self.length):
            raise ValueError(f"{nbytes} bytes at offset {offset} leave {self!r}")
