"""A device's whole view of its node: the ``DMA`` the HCA (or PEACH2) is built with.

A PCIe device reaches every memory of the node through one bus address space; which route a
transfer takes (local host memory, a GPU on the same socket, a GPU across QPI, ...) follows from
the address.  :class:`DeviceDMA` does that dispatch: it finds the memory whose window holds the
address and hands the access to the :class:`~.path.Path` the node built for that pair.  An
access outside every memory, or straddling two, raises ``ValueError`` (a real bus would answer
with an Unsupported Request completion).
"""

from peach2.sim.verbs import DMA

__all__ = ["DeviceDMA"]


class DeviceDMA(DMA):
    """The DMA interface of one device of a node, dispatching by address.

    Members
    -------
    device : str
        ``"hca"`` or ``"peach2"``.
    socket : int
        The socket whose root complex the device is plugged into.
    paths : dict of str to Path
        One path per memory name.
    """

    def __init__(self, device, socket, paths):
        self.device = device
        self.socket = socket
        self.paths = dict(paths)
        self._windows = sorted((p.memory.base, p.memory.base + p.memory.size, p)
                               for p in self.paths.values())

    def __repr__(self):
        return f"DeviceDMA({self.device} on socket {self.socket})"

    def path_for(self, addr, nbytes=1):
        """Return the :class:`~.path.Path` serving ``[addr, addr + nbytes)``."""
        if isinstance(addr, bool) or not isinstance(addr, int):
            raise ValueError(f"address must be an integer, not {addr!r}")
        for lo, hi, path in self._windows:
            if lo <= addr < hi:
                if addr + max(nbytes, 1) > hi:
                    raise ValueError(f"{self.device}: {nbytes} bytes at {addr:#x} run past the "
                                     f"end of {path.memory.name}")
                return path
        raise ValueError(f"{self.device}: address {addr:#x} is in no memory of the node")

    def read(self, t_ps, addr, nbytes):
        """Read for the device; see :meth:`peach2.sim.infiniband.DMA.read`."""
        return self.path_for(addr, nbytes).read(t_ps, addr, nbytes)

    def write(self, t_ps, addr, data):
        """Write for the device; see :meth:`peach2.sim.infiniband.DMA.write`."""
        return self.path_for(addr, len(data)).write(t_ps, addr, data)

    def kind(self, addr):
        """Path kind for ``addr``: ``"host"``, ``"gdr"`` or ``"qpi"``."""
        return self.path_for(addr).kind
