"""One memory of a node (a socket's DRAM or a GPU's device memory): real bytes and an allocator.

The bytes are sparse (4 KiB pages allocated on first write, zeros elsewhere), so a 6 GiB GPU
costs nothing until it is written.  Addresses are the node's bus addresses: a memory occupies
``[base, base + size)`` of the node's address map (:class:`~.node.Node`).  Loads and stores here
take no simulated time; timing belongs to the paths and copy engines that call them.
"""

import bisect

from peach2.sim.verbs.pages import SparseBytes

__all__ = ["Memory"]


class Memory:
    """Byte-addressed memory with a first-fit allocator.

    Members
    -------
    name : str
        ``"host0"``, ``"host1"``, ``"gpu0"`` ... ``"gpu3"``.
    base, size : int
        Its window in the node's address map.
    socket : int
        The socket whose root complex it hangs off.
    gpu : int or None
        GPU number for device memory, ``None`` for host memory.
    """

    def __init__(self, name, base, size, socket, gpu=None):
        self.name = name
        self.base = base
        self.size = size
        self.socket = socket
        self.gpu = gpu
        self._bytes = SparseBytes()       # the contents
        self._free = [(base, size)]       # (address, length), sorted by address
        self._used = {}                    # address -> length

    def __repr__(self):
        return f"Memory({self.name}, {self.base:#x}+{self.size:#x})"

    @property
    def is_gpu(self):
        """True for a GPU's device memory."""
        return self.gpu is not None

    def contains(self, addr, nbytes=1):
        """True when ``[addr, addr + nbytes)`` lies inside this memory."""
        return self.base <= addr and addr + max(nbytes, 1) <= self.base + self.size

    # -- bytes ---------------------------------------------------------------------------------

    def load(self, addr, nbytes):
        """Return ``nbytes`` at ``addr``."""
        self._check(addr, nbytes)
        return self._bytes.load(addr, nbytes)

    def store(self, addr, data):
        """Write ``data`` at ``addr``."""
        data = bytes(data)
        self._check(addr, len(data))
        self._bytes.store(addr, data)

    # -- allocation ----------------------------------------------------------------------------

    def alloc(self, nbytes, align=64):
        """Reserve ``nbytes`` (at least 1) aligned to ``align``; return the address.

        Raises ``MemoryError`` when no free block is large enough.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative integer, not {nbytes!r}")
        if isinstance(align, bool) or not isinstance(align, int) or align < 1 \
                or align & (align - 1):
            raise ValueError(f"align must be a power of two, not {align!r}")
        nbytes = max(nbytes, 1)
        for i, (start, length) in enumerate(self._free):
            addr = -(-start // align) * align
            if addr + nbytes <= start + length:
                del self._free[i]
                tail = start + length - (addr + nbytes)
                if tail:
                    self._free.insert(i, (addr + nbytes, tail))
                if addr > start:
                    self._free.insert(i, (start, addr - start))
                self._used[addr] = nbytes
                return addr
        raise MemoryError(f"{self.name}: no free block of {nbytes} bytes "
                          f"({self.free_bytes()} bytes free in all)")

    def free(self, addr):
        """Release the block that :meth:`alloc` returned at ``addr``."""
        nbytes = self._used.pop(addr, None)
        if nbytes is None:
            raise ValueError(f"{self.name}: {addr:#x} is not an allocated block")
        i = bisect.bisect_left(self._free, (addr, 0))
        self._free.insert(i, (addr, nbytes))
        # merge with the neighbours
        if i + 1 < len(self._free) and addr + nbytes == self._free[i + 1][0]:
            self._free[i] = (addr, nbytes + self._free[i + 1][1])
            del self._free[i + 1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == addr:
            self._free[i - 1] = (self._free[i - 1][0], self._free[i - 1][1] + self._free[i][1])
            del self._free[i]

    def allocated(self, addr):
        """Length of the block allocated at ``addr``, or ``None``."""
        return self._used.get(addr)

    def free_bytes(self):
        """Bytes not allocated."""
        return sum(length for _, length in self._free)

    def _check(self, addr, nbytes):
        if isinstance(addr, bool) or not isinstance(addr, int) \
                or isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"bad access: {nbytes!r} bytes at {addr!r}")
        if nbytes and not self.contains(addr, nbytes):
            raise ValueError(f"{nbytes} bytes at {addr:#x} leave {self.name} "
                             f"[{self.base:#x}, {self.base + self.size:#x})")
