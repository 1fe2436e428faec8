"""The node model's memories backed by a co-simulated node's real bytes.

::

    peach2.sim.node.Node (timing: paths, channels, copy engines)      cocotb sub-cluster
      host0  [base, base + window) ----- load/store ----> Cluster.memory(i): the host memory
             (rest: the model's own sparse pages)                behind node i's TCA window
      gpu0   [base, base + window) ----- load/store ----> Cluster.gpu_memory(i, 0)
      gpu1   [base, base + window) ----- load/store ----> Cluster.gpu_memory(i, 1)
      host1, gpu2, gpu3: the model's own bytes (CPU1's side is not in the cocotb node)

The HCA, the GPUs' copy engines and MPI's buffers all reach memory through the node model's
:class:`~peach2.sim.node.Memory` objects, so backing those gives every one of them the cocotb
models' bytes at once, while each access keeps the timing of the node model's paths: the HCA
sits on CPU1, so host0 costs it the QPI latency and GPU0/GPU1 the peer-to-peer rate across QPI
(about 290 MB/s), as in Figure 1 of "TCA/InfiniBand hybrid communication in XcalableACC".

In the machine the HCA's own DMA to these memories is the node's PCIe endpoint instead
(:mod:`.endpoint_dma`: TLPs through the cocotb root complex); the node model still serves its
other memories and every copy engine and ``memcpy``, with its documented times, touching the
bytes directly.  ``launch --hca-dma node`` keeps the HCA on the node model's paths too.
"""

from peach2.sim.node import Memory, Node, NodeParams

__all__ = ["WindowMemory", "back", "bridged_node"]


class WindowMemory(Memory):
    """A :class:`Memory` whose first ``len(window)`` bytes live in ``window`` (any object with
    byte slices: a cocotbext-pcie memory region, a GPU model's memory).

    Made from an existing :class:`Memory` by :func:`back`, so every path, copy engine and
    buffer that already holds the memory sees the new bytes.

    Members
    -------
    window : object
        ``window[a:b]`` reads and ``window[a:b] = data`` writes byte ``base + a`` onwards.
    window_bytes : int
        How many bytes from ``base`` it covers.
    """

    def load(self, addr, nbytes):
        self._bounds(addr, nbytes)
        lo, hi = self._split(addr, nbytes)
        out = bytes(self.window[lo:hi]) if hi > lo else b""
        if len(out) < nbytes:
            out += super().load(addr + len(out), nbytes - len(out))
        return out

    def store(self, addr, data):
        data = bytes(data)
        self._bounds(addr, len(data))
        lo, hi = self._split(addr, len(data))
        if hi > lo:
            self.window[lo:hi] = data[:hi - lo]
        if hi - lo < len(data):
            super().store(addr + (hi - lo), data[hi - lo:])

    def _bounds(self, addr, nbytes):
        if isinstance(addr, bool) or not isinstance(addr, int) or nbytes < 0 \
                or (nbytes and not self.contains(addr, nbytes)):
            raise ValueError(f"{nbytes} bytes at {addr!r} leave {self.name} "
                             f"[{self.base:#x}, {self.base + self.size:#x})")

    def _split(self, addr, nbytes):
        """Offsets ``[lo, hi)`` of the access's part inside the window (``hi <= lo``: none)."""
        lo = addr - self.base
        return lo, max(lo, min(lo + nbytes, self.window_bytes))


def back(memory, window, nbytes):
    """Back the first ``nbytes`` of ``memory`` with ``window``; return ``memory``.

    The memory's class becomes :class:`WindowMemory` in place (its allocator, its identity and
    the references the node's paths hold are kept).  Bytes already stored in that part are
    replaced by the window's.
    """
    if not isinstance(memory, Memory):
        raise TypeError(f"expected a Memory, not {type(memory).__name__}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 < nbytes <= memory.size:
        raise ValueError(f"a window of {nbytes!r} bytes does not fit {memory!r}")
    memory.__class__ = WindowMemory
    memory.window = window
    memory.window_bytes = nbytes
    return memory


def bridged_node(cluster, node, params=None, reserve=0):
    """A :class:`Node` (``params``) whose host0 is ``cluster.memory(node)`` and whose GPU ``i``
    is ``cluster.gpu_memory(node, i)`` for every GPU the cocotb node has (on socket 0, as GPU0
    and GPU1 are).

    ``reserve`` bytes at the start of host0 are allocated at once, so MPI buffers taken from
    host0 later never overlap what the sub-cluster's own (TCA) traffic uses there.
    """
    model = Node(params or NodeParams())
    amap = cluster.address_map
    _, region = cluster.memory(node)
    back(model.memory("host0"), region, amap.host_size)
    for i in range(len(cluster.gpus[node])):
        memory = model.memory(f"gpu{i}")
        if memory.socket != model.params.peach2_socket:
            raise ValueError(f"GPU {i} of the cocotb node sits on PEACH2's socket, but the node "
                             f"model puts it on socket {memory.socket}")
        back(memory, cluster.gpu_memory(node, i)[1], amap.gpu_size)
    if reserve:
        model.memory("host0").alloc(reserve)
    return model
