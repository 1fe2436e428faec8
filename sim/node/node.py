"""The HA-PACS/TCA node of Odajima et al. (000) Figure 1 as a timing model with real bytes.

::

        socket 0 (CPU0)                       socket 1 (CPU1)
     host0 DRAM                             host1 DRAM
        |                                      |
     root complex 0 ========= QPI ========= root complex 1
      |      |       |                       |      |      |
    PEACH2  GPU0    GPU1                    HCA    GPU2   GPU3
    Gen2x8  Gen2x16 Gen2x16                Gen3x8  Gen2x16 Gen2x16

Every memory has a window in one bus address map (host ``s`` at ``(1 + s) << 40``, GPU ``g`` at
``(16 + g) << 40``), as GPUDirect RDMA maps GPU memory into the PCIe address space; a device
reaches all of them through :meth:`Node.dma`, whose route (and so its rate) follows from the
address: host memory at the device link's rate, a GPU on the same socket by GPUDirect RDMA
(reads paced by the GPU's BAR read rate), a GPU across QPI at about 290 MB/s.  The GPUs'
copy engines (:meth:`Node.copy`) move data between device and host memory for ``cudaMemcpy``.

Shared resources are :class:`~.channel.Channel` objects, so two transfers through one link or
one GPU share it.  Host DRAM bandwidth and the QPI link for host traffic are not limits (both
are well above a PCIe Gen3 x8 link).  Parameters and sources: :class:`~.params.NodeParams`.
"""

from .channel import Channel
from .copy_engine import CopyEngine
from .memory import Memory
from .params import NodeParams
from .path import Path
from .router import DeviceDMA

__all__ = ["Node"]

DEVICES = ("hca", "peach2")


class Node:
    """One node: host memory per socket, GPUs, the HCA's and PEACH2's PCIe views, copy engines.

    Members
    -------
    params : NodeParams
        Topology, rates and latencies.
    memories : list of Memory
        ``host0``, ``host1``, ..., then ``gpu0`` ... ``gpu3``.
    """

    def __init__(self, params=None):
        if params is None:
            params = NodeParams()
        if not isinstance(params, NodeParams):
            raise TypeError(f"params must be a NodeParams, not {type(params).__name__}")
        p = self.params = params
        self.memories = [Memory(f"host{s}", (1 + s) << 40, p.host_bytes, s)
                         for s in range(p.sockets)]
        self.memories += [Memory(f"gpu{g}", (16 + g) << 40, p.gpu_bytes, s, gpu=g)
                          for g, s in enumerate(p.gpu_sockets)]
        self._by_name = {m.name: m for m in self.memories}
        self._gpu_out = [Channel(f"gpu{g}.out", p.gpu_pcie_bytes_per_s) for g in range(p.gpus)]
        self._gpu_in = [Channel(f"gpu{g}.in", p.gpu_pcie_bytes_per_s) for g in range(p.gpus)]
        self._gpu_bar = [Channel(f"gpu{g}.bar", p.gpu_read_bytes_per_s) for g in range(p.gpus)]
        self._qpi = [Channel(f"qpi.p2p->{s}", p.qpi_p2p_bytes_per_s) for s in range(p.sockets)]
        self._engines = [CopyEngine(self, g) for g in range(p.gpus)]
        self._dma = {}
        for device, socket, rate in (("hca", p.hca_socket, p.hca_pcie_bytes_per_s),
                                     ("peach2", p.peach2_socket, p.peach2_pcie_bytes_per_s)):
            self._dma[device] = self._device(device, socket, rate)

    def __repr__(self):
        return f"Node({len(self.memories)} memories)"

    # -- structure -------------------------------------------------------------------------------

    def memory(self, name):
        """Return the :class:`~.memory.Memory` called ``name`` (``"host1"``, ``"gpu2"``, ...)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise ValueError(f"no memory {name!r} in this node "
                             f"({', '.join(self._by_name)})") from None

    def locate(self, addr, nbytes=1):
        """Return the memory holding ``[addr, addr + nbytes)``; ``ValueError`` if none."""
        for m in self.memories:
            if m.contains(addr, 1):
                if not m.contains(addr, nbytes):
                    raise ValueError(f"{nbytes} bytes at {addr:#x} run past the end of "
                                     f"{m.name}")
                return m
        raise ValueError(f"address {addr!r} is in no memory of the node")

    def dma(self, device="hca"):
        """The :class:`~.router.DeviceDMA` of ``device`` (``"hca"`` or ``"peach2"``)."""
        try:
            return self._dma[device]
        except KeyError:
            raise ValueError(f"no device {device!r}; devices are {DEVICES}") from None

    def copy_engine(self, gpu):
        """The :class:`~.copy_engine.CopyEngine` of GPU ``gpu``."""
        if isinstance(gpu, bool) or not isinstance(gpu, int) \
                or not 0 <= gpu < self.params.gpus:
            raise ValueError(f"no GPU {gpu!r} (0..{self.params.gpus - 1})")
        return self._engines[gpu]

    def gpu_in(self, gpu):
        """Channel of GPU ``gpu``'s link towards the GPU."""
        return self._gpu_in[gpu]

    def gpu_out(self, gpu):
        """Channel of GPU ``gpu``'s link away from the GPU."""
        return self._gpu_out[gpu]

    def qpi_p2p(self, socket):
        """Channel of peer-to-peer traffic crossing QPI towards ``socket``."""
        return self._qpi[socket]

    # -- memory as the CPU sees it (no time) ---------------------------------------------------

    def alloc(self, where, nbytes, align=64):
        """Allocate ``nbytes`` in memory ``where`` (``"host0"``, ``"gpu2"``, ...); return it."""
        return self.memory(where).alloc(nbytes, align)

    def free(self, addr):
        """Release a block returned by :meth:`alloc`."""
        self.locate(addr).free(addr)

    def load(self, addr, nbytes):
        """Return ``nbytes`` at ``addr`` (any memory)."""
        return self.locate(addr, nbytes).load(addr, nbytes)

    def store(self, addr, data):
        """Write ``data`` at ``addr`` (any memory)."""
        self.locate(addr, len(data)).store(addr, data)

    # -- timed copies --------------------------------------------------------------------------

    def copy(self, t_ps, dst, src, nbytes, *, launched=False):
        """Copy ``nbytes`` from ``src`` to ``dst`` from ``t_ps`` on; return the completion time.

        A copy touching GPU memory is a ``cudaMemcpy`` on that GPU's copy engine (the source
        GPU's for device to device); host to host is a CPU ``memcpy``.  The bytes move at the
        call.  ``launched`` (a ``cudaMemcpy``): ``t_ps`` is when its launch is over
        (``copy_launch_ps`` after the CPU's call, which the caller waited), not the call.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative integer, not {nbytes!r}")
        src_mem = self.locate(src, nbytes)
        dst_mem = self.locate(dst, nbytes)
        if src_mem.is_gpu or dst_mem.is_gpu:
            engine = self._engines[src_mem.gpu if src_mem.is_gpu else dst_mem.gpu]
            return engine.copy(t_ps, dst_mem, dst, src_mem, src, nbytes, launched)
        if launched:
            raise ValueError("launched is a cudaMemcpy's: a host-to-host copy is a CPU memcpy")
        return self.memcpy(t_ps, dst, src, nbytes)

    def memcpy(self, t_ps, dst, src, nbytes):
        """CPU copy between host memories; return when it is done (the CPU is busy until then)."""
        p = self.params
        src_mem = self.locate(src, nbytes)
        dst_mem = self.locate(dst, nbytes)
        if src_mem.is_gpu or dst_mem.is_gpu:
            raise ValueError("a CPU memcpy cannot touch GPU memory: use copy() (cudaMemcpy)")
        dst_mem.store(dst, src_mem.load(src, nbytes))
        return t_ps + p.memcpy_ps + Channel("cpu", p.memcpy_bytes_per_s).service_ps(nbytes)

    # -- construction ----------------------------------------------------------------------------

    def _device(self, device, socket, rate):
        p = self.params
        rd = Channel(f"{device}.rd", rate)      # memory -> device (the device's reads)
        wr = Channel(f"{device}.wr", rate)      # device -> memory (its writes)
        paths = {}
        for m in self.memories:
            far = m.socket != socket
            if not m.is_gpu:
                extra = p.qpi_host_latency_ps if far else 0
                paths[m.name] = Path("host", m, [rd], [wr], p.host_read_latency_ps + extra,
                                     p.host_write_latency_ps + extra)
                continue
            g = m.gpu
            reads = [rd, self._gpu_bar[g], self._gpu_out[g]]
            writes = [wr, self._gpu_in[g]]
            extra = 0
            if far:
                reads.append(self._qpi[socket])
                writes.append(self._qpi[m.socket])
                extra = p.qpi_p2p_latency_ps
            paths[m.name] = Path("qpi" if far else "gdr", m, reads, writes,
                                 p.gpu_read_latency_ps + extra, p.gpu_write_latency_ps + extra)
        return DeviceDMA(device, socket, paths)
