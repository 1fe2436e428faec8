"""A GPU's copy engines: ``cudaMemcpy`` between its memory and pinned host memory.

A K20X has two copy engines, one per direction, so a device-to-host and a host-to-device copy
can run at once.  A copy issued at ``t``:

- starts no earlier than ``t + copy_launch_ps`` (the CUDA driver's launch and completion
  overhead: the call, the DMA descriptor, the event or synchronisation that reports it; fitted
  to the 17 us of an 8-byte MPI message staged through host memory, GTC 2014) and not before
  the engine has finished the copies issued before it (one CUDA stream per engine);
- moves its bytes at ``copy_bytes_per_s`` (assumed 6.0 GB/s, 82% of the K20X's PCIe Gen2 x16
  bound) through the engine, the GPU's link, and QPI's host path when the host buffer sits on
  the other socket (full rate, ``qpi_host_latency_ps`` more: 000 section 4);
- is done when the slowest of those has carried the data.

The bytes are copied at the call; the returned time says when the copy is complete.  A caller
that models the launch itself (``launched=True``: the call comes when the launch is over) has
the bytes copied when the engine starts, so writes still on their way into the GPU when the CPU
called (ahead of the launch's doorbell on the GPU's link) are in the copy.
A device-to-device copy between two GPUs is routed through both GPUs' links (and the
peer-to-peer QPI path when they sit on different sockets); within one GPU it costs the engine
time only.
"""

from .channel import Channel

__all__ = ["CopyEngine"]


class CopyEngine:
    """The two copy engines of one GPU.

    Members
    -------
    gpu : int
        The GPU number.
    d2h, h2d : Channel
        Device-to-host and host-to-device engines (``copy_bytes_per_s`` each).
    copies : int
        Copies issued so far.
    """

    def __init__(self, node, gpu):
        p = node.params
        self.node = node
        self.gpu = gpu
        self.memory = node.memory(f"gpu{gpu}")
        self.d2h = Channel(f"gpu{gpu}.d2h", p.copy_bytes_per_s)
        self.h2d = Channel(f"gpu{gpu}.h2d", p.copy_bytes_per_s)
        self.copies = 0

    def __repr__(self):
        return f"CopyEngine(gpu{self.gpu})"

    def copy(self, t_ps, dst_mem, dst, src_mem, src, nbytes, launched=False):
        """Copy ``nbytes`` from ``src`` in ``src_mem`` to ``dst`` in ``dst_mem``; return ``t_done``.

        One of the two memories must be this GPU's; the other host memory or a GPU.
        ``launched``: ``t_ps`` is the end of the launch, not the call (no ``copy_launch_ps``
        added).
        """
        node = self.node
        p = node.params
        data = src_mem.load(src, nbytes)
        latency = 0
        if src_mem is self.memory and not dst_mem.is_gpu:
            channels = [self.d2h, node.gpu_out(self.gpu)]
            if dst_mem.socket != self.memory.socket:
                latency = p.qpi_host_latency_ps
        elif dst_mem is self.memory and not src_mem.is_gpu:
            channels = [self.h2d, node.gpu_in(self.gpu)]
            if src_mem.socket != self.memory.socket:
                latency = p.qpi_host_latency_ps
        elif src_mem is self.memory and dst_mem is self.memory:
            channels = [self.d2h]
        elif src_mem is self.memory and dst_mem.is_gpu:
            channels = [self.d2h, node.gpu_out(self.gpu), node.gpu_in(dst_mem.gpu)]
            if dst_mem.socket != self.memory.socket:
                channels.append(node.qpi_p2p(dst_mem.socket))
                latency = p.qpi_p2p_latency_ps
        else:
            raise ValueError(f"copy engine of gpu{self.gpu} cannot copy from {src_mem.name} "
                             f"to {dst_mem.name}")
        dst_mem.store(dst, data)
        start = t_ps if launched else t_ps + p.copy_launch_ps
        _start, end = Channel.transfer(channels, start, nbytes)
        self.copies += 1
        return end + latency

    def time_ps(self, nbytes, cross_socket=False):
        """Duration of one copy on idle engines (launch overhead included)."""
        p = self.node.params
        rate = min(p.copy_bytes_per_s, p.gpu_pcie_bytes_per_s)
        t = p.copy_launch_ps + Channel("probe", rate).service_ps(nbytes)
        return t + (p.qpi_host_latency_ps if cross_socket else 0)
