"""A host memory behind a PCIe link, as a stand-in :class:`~.dma.DMA` for unit tests.

Sparse (4 KiB pages allocated on first write, zeros elsewhere) and paced: reads and writes each
occupy their own direction of the link for ``nbytes / bytes_per_s`` and complete a fixed latency
later.  The defaults are illustrative, not measured: PCIe Gen3 x8 (the ConnectX-3 slot, 000
section 2.2) carries 8 GT/s x 8 lanes x 128/130 = 7.88 GB/s raw, about 7.2 GB/s of data with
256-byte payloads and 24 bytes of TLP overhead; a read round trip of about 0.5 us and a posted
write landing about 0.2 us after it leaves the device are typical of that generation.  The node
model's paths (:mod:`peach2.sim.node`) or a PCIe endpoint (:mod:`peach2.sim.system`) replace it.
"""

import math
from fractions import Fraction

from .dma import DMA
from .pages import SparseBytes

__all__ = ["HostMemory"]


class HostMemory(DMA):
    """Byte-addressed host memory with a paced DMA port.

    Members
    -------
    bytes_per_s : float
        Data rate of each direction of the DMA port.
    read_latency_ps, write_latency_ps : int
        Added to the transfer time of every read / write.
    reads, writes : int
        Number of DMA reads and writes served (for tests and statistics).
    """

    def __init__(self, bytes_per_s=7.2e9, read_latency_ps=500_000, write_latency_ps=200_000):
        if isinstance(bytes_per_s, bool) or not isinstance(bytes_per_s, (int, float)) \
                or not math.isfinite(bytes_per_s) or bytes_per_s <= 0:
            raise ValueError(f"bytes_per_s must be a positive number, not {bytes_per_s!r}")
        for name, value in (("read_latency_ps", read_latency_ps),
                            ("write_latency_ps", write_latency_ps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
        self.bytes_per_s = bytes_per_s
        self.read_latency_ps = read_latency_ps
        self.write_latency_ps = write_latency_ps
        self._ps_per_byte = Fraction(10 ** 12) / Fraction(str(bytes_per_s))
        self._bytes = SparseBytes()          # the contents
        self._read_busy = 0
        self._write_busy = 0
        self.reads = 0
        self.writes = 0

    # -- CPU side: no timing ------------------------------------------------------------------

    def load(self, addr, nbytes):
        """Return ``nbytes`` at ``addr`` as the CPU sees them now."""
        _check(addr, nbytes)
        return self._bytes.load(addr, nbytes)

    def store(self, addr, data):
        """Write ``data`` at ``addr`` from the CPU (no timing)."""
        data = bytes(data)
        _check(addr, len(data))
        self._bytes.store(addr, data)

    # -- device side: the DMA interface -----------------------------------------------------------

    def read(self, t_ps, addr, nbytes):
        """Read for the device; see :meth:`DMA.read`."""
        start = max(t_ps, self._read_busy)
        self._read_busy = start + math.ceil(nbytes * self._ps_per_byte)
        self.reads += 1
        return self._read_busy + self.read_latency_ps, self.load(addr, nbytes)

    def write(self, t_ps, addr, data):
        """Write for the device; see :meth:`DMA.write`."""
        data = bytes(data)
        start = max(t_ps, self._write_busy)
        self._write_busy = start + math.ceil(len(data) * self._ps_per_byte)
        self.store(addr, data)
        self.writes += 1
        return self._write_busy + self.write_latency_ps

    def read_time_ps(self, t_ps, nbytes):
        """Completion time of a read of ``nbytes`` issued at ``t_ps`` on an idle port."""
        return t_ps + math.ceil(nbytes * self._ps_per_byte) + self.read_latency_ps

    def write_time_ps(self, t_ps, nbytes):
        """Completion time of a write of ``nbytes`` issued at ``t_ps`` on an idle port."""
        return t_ps + math.ceil(nbytes * self._ps_per_byte) + self.write_latency_ps


def _check(addr, nbytes):
    if isinstance(addr, bool) or not isinstance(addr, int) or not 0 <= addr < 1 << 64:
        raise ValueError(f"address must be a 64-bit unsigned integer, not {addr!r}")
    if nbytes < 0 or addr + nbytes > 1 << 64:
        raise ValueError(f"{nbytes} bytes at {addr:#x} leave the 64-bit address space")
