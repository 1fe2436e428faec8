"""One PCIe route from a device (the HCA, PEACH2) to one memory of its node, as a ``DMA``.

A :class:`Path` implements :class:`peach2.sim.infiniband.DMA` for a single target memory: a read
of ``n`` bytes crosses its read channels (e.g. the device's link, the GPU's BAR read engine,
QPI) and completes ``read_latency_ps`` after the slowest has carried the data; a write likewise
through its write channels.  The data effect happens at the call (a later read returns it), as
the ``DMA`` contract says; the returned time says when it is visible.

The node builds one path per (device, memory) pair, of one of three kinds:

- ``"host"``: host memory, at the device link's full rate (the HCA's PCIe Gen3 x8: 7.2 GB/s),
  plus ``qpi_host_latency_ps`` when the memory is on the other socket (no rate cap);
- ``"gdr"``: a GPU on the device's own socket by GPUDirect RDMA: reads paced by the GPU's BAR
  read rate (2.8 GB/s on Ivy Bridge), writes at the PCIe rate;
- ``"qpi"``: a GPU on the other socket: peer-to-peer through both root complexes and QPI,
  paced at ``qpi_p2p_bytes_per_s`` (about 290 MB/s) in both directions.
"""

from peach2.sim.verbs import DMA

from .channel import Channel

__all__ = ["Path"]

KINDS = ("host", "gdr", "qpi")


class Path(DMA):
    """A device's DMA route to one :class:`~.memory.Memory`.

    Members
    -------
    kind : str
        ``"host"``, ``"gdr"`` or ``"qpi"``.
    memory : Memory
        The target.
    read_channels, write_channels : tuple of Channel
        Resources a read / a write crosses.
    read_latency_ps, write_latency_ps : int
        Added after the data has crossed the channels.
    reads, writes : int
        Accesses served.
    """

    def __init__(self, kind, memory, read_channels, write_channels, read_latency_ps,
                 write_latency_ps):
        if kind not in KINDS:
            raise ValueError(f"path kind must be one of {KINDS}, not {kind!r}")
        self.kind = kind
        self.memory = memory
        self.read_channels = tuple(read_channels)
        self.write_channels = tuple(write_channels)
        self.read_latency_ps = read_latency_ps
        self.write_latency_ps = write_latency_ps
        self.reads = 0
        self.writes = 0

    def __repr__(self):
        return f"Path({self.kind} -> {self.memory.name})"

    def read(self, t_ps, addr, nbytes):
        """Read for the device; see :meth:`peach2.sim.infiniband.DMA.read`."""
        data = self.memory.load(addr, nbytes)
        _start, end = Channel.transfer(self.read_channels, t_ps, nbytes)
        self.reads += 1
        return end + self.read_latency_ps, data

    def write(self, t_ps, addr, data):
        """Write for the device; see :meth:`peach2.sim.infiniband.DMA.write`."""
        data = bytes(data)
        self.memory.store(addr, data)
        _start, end = Channel.transfer(self.write_channels, t_ps, len(data))
        self.writes += 1
        return end + self.write_latency_ps

    def rate_bytes_per_s(self, write=False):
        """Sustained rate of reads (or writes) on an idle node: the slowest channel's."""
        channels = self.write_channels if write else self.read_channels
        return min(ch.bytes_per_s for ch in channels)
