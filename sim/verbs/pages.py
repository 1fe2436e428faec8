"""Sparse bytes: 4 KiB pages allocated on first write, zeros elsewhere.

The store behind :class:`~.memory.HostMemory` and :class:`peach2.sim.node.Memory`; each checks
its addresses before it calls :meth:`SparseBytes.load` or :meth:`SparseBytes.store`.
"""

__all__ = ["SparseBytes"]

PAGE = 4096


class SparseBytes:
    """A byte-addressed store that costs memory only where it has been written."""

    def __init__(self):
        self._pages = {}

    def load(self, addr, nbytes):
        """Return the ``nbytes`` bytes at ``addr`` (zeros where nothing was stored)."""
        out = bytearray()
        while nbytes:
            page, off = divmod(addr, PAGE)
            n = min(nbytes, PAGE - off)
            data = self._pages.get(page)
            out += data[off:off + n] if data is not None else bytes(n)
            addr += n
            nbytes -= n
        return bytes(out)

    def store(self, addr, data):
        """Write the bytes ``data`` at ``addr``."""
        pos = 0
        while pos < len(data):
            page, off = divmod(addr + pos, PAGE)
            n = min(len(data) - pos, PAGE - off)
            buf = self._pages.get(page)
            if buf is None:
                buf = self._pages[page] = bytearray(PAGE)
            buf[off:off + n] = data[pos:pos + n]
            pos += n
