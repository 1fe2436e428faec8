"""The verbs HCA's DMA as memory requests of the node's PCIe endpoint, in cocotb time.

::

    machine (fabric events)                         cocotb sub-cluster
    Requester/Responder ── start_read(t, a, n) ──>  HcaModel.dma_read(bus(a), n): read TLPs
                           start_write(t, a, d) ─>  HcaModel.dma_write(bus(a), d): write TLPs
           done(t_c, ...) <── fabric event at t_c ──┘ (t_c: cocotb time of the completion)

The machine runs the window ``[e, e + W)`` after cocotb has reached ``e + W``
(:class:`~.machine_driver.MachineDriver`).  So a DMA the verbs layer issues at ``t`` in that window
starts in cocotb at ``e + W``: at most one window (112 ns) late.  Its completion, at cocotb time
``t_c >= e + W``, is handed to the machine as a fabric event at ``t_c`` (a read's data, a
write's visibility as :meth:`~peach2.sim.pcie.hca.HcaFunction.dma_write` bounds it), which is
in the machine's future: the machine has run only to ``e + W - 1``.  Each sub-cluster's cocotb
runs in the process of its partition, so one process and N ranks make the same requests at the
same cocotb times and get the same answers.

An address of the node model (:func:`.bridge.bridged_node`) inside a memory the cocotb node
holds (host0's window, GPU0, GPU1) becomes its bus address there; the HCA is on CPU1 (000
Figure 1), so host0 is ``"qpi-memory"`` and the GPUs ``"qpi-peer"`` ranges of the endpoint,
with the node model's QPI figures (:class:`peach2.sim.node.NodeParams`).  Anything else (host1,
GPU2/GPU3, host0 beyond the window, an access straddling a window's end) is not in the cocotb
node and keeps the node model's path (``fallback``, synchronous).

A write hands its data over at once (the responder's receive buffer drains when the packet
arrives): the PCIe side does not push back on the InfiniBand link's credits.
"""

import math

import cocotb
from cocotb.utils import get_sim_time

from peach2.sim.verbs import DMA

__all__ = ["EndpointDMA", "endpoint_dma", "hca_params"]


class EndpointDMA(DMA):
    """The :class:`~peach2.sim.verbs.DMA` of the verbs HCA on ``port`` of ``fabric``, served by
    ``model`` (a :class:`~peach2.sim.pcie.hca.HcaModel`) for the ``windows`` and by
    ``fallback`` (the node model's ``DeviceDMA``) elsewhere.

    Parameters
    ----------
    windows : list of (int, int, int)
        ``(lo, hi, bus)``: node-model addresses ``[lo, hi)`` are bus addresses ``bus + a - lo``.

    Members
    -------
    reads, writes : int
        Accesses that went to the endpoint (the others went to ``fallback``).
    failed : int
        Reads the bus refused.
    """

    def __init__(self, model, fabric, port, fallback, windows):
        self.model = model
        self.fabric = fabric
        self.port = port
        self.fallback = fallback
        self.windows = sorted(windows)
        self.reads = self.writes = self.failed = 0

    def __repr__(self):
        return f"EndpointDMA(port {self.port}, {len(self.windows)} windows)"

    def bus(self, addr, nbytes):
        """Bus address of ``[addr, addr + nbytes)``, or ``None`` if not wholly in a window."""
        for lo, hi, bus in self.windows:
            if lo <= addr and addr + max(nbytes, 1) <= hi:
                return bus + addr - lo
        return None

    # -- synchronous calls: only for what the fallback serves ------------------------------------

    def read(self, t_ps, addr, nbytes):
        if self.bus(addr, nbytes) is not None:
            raise TypeError("the HCA endpoint answers in cocotb time: use start_read")
        return self.fallback.read(t_ps, addr, nbytes)

    def write(self, t_ps, addr, data):
        if self.bus(addr, len(data)) is not None:
            raise TypeError("the HCA endpoint answers in cocotb time: use start_write")
        return self.fallback.write(t_ps, addr, data)

    # -- what the verbs layer calls --------------------------------------------------------------

    def start_read(self, t_ps, addr, nbytes, done):
        bus = self.bus(addr, nbytes)
        if bus is None:
            return self.fallback.start_read(t_ps, addr, nbytes, done)
        self.reads += 1
        cocotb.start_soon(self._read(bus, nbytes, done))
        return None

    def start_write(self, t_ps, addr, data, done=None):
        bus = self.bus(addr, len(data))
        if bus is None:
            return self.fallback.start_write(t_ps, addr, data, done)
        self.writes += 1
        cocotb.start_soon(self._write(bus, bytes(data), done))
        return t_ps

    async def _read(self, bus, nbytes, done):
        data = await self.model.dma_read(bus, nbytes)
        if data is None:
            self.failed += 1
        t = int(get_sim_time("ps"))
        self.fabric.schedule(t, self.port, done, t, data)

    async def _write(self, bus, data, done):
        visible_ns = await self.model.dma_write(bus, data)
        if done is not None:
            t = max(math.ceil(visible_ns * 1000), int(get_sim_time("ps")))
            self.fabric.schedule(t, self.port, done, t)


def hca_params(node_params):
    """The :class:`~peach2.sim.pcie.hca.HcaModel` keyword arguments of a node model's
    ``NodeParams``: its QPI crossing, peer to peer and to host memory."""
    return {"qpi_p2p_bytes_per_s": node_params.qpi_p2p_bytes_per_s,
            "qpi_p2p_latency_ns": node_params.qpi_p2p_latency_ps / 1000,
            "qpi_host_latency_ns": node_params.qpi_host_latency_ps / 1000}


def endpoint_dma(cluster, node, model, fabric, port):
    """The :class:`EndpointDMA` of ``cluster`` node ``node``'s HCA (``cluster.hcas[node]``),
    whose node model is ``model`` (:func:`.bridge.bridged_node`), on ``port`` of ``fabric``.

    Tells the endpoint which of its bus ranges lie across QPI, from the sockets the node model
    puts the HCA and each memory on."""
    hca = cluster.hcas[node]
    far = model.params.hca_socket
    windows = []
    targets = [(model.memory("host0"), cluster.memory(node)[0], "memory")]
    targets += [(model.memory(f"gpu{k}"), cluster.gpu_memory(node, k)[0], "peer")
                for k in range(len(cluster.gpus[node]))]
    for memory, bus, kind in targets:
        size = memory.window_bytes
        windows.append((memory.base, memory.base + size, bus))
        hca.function.add_range(bus, bus + size, kind if memory.socket == far else f"qpi-{kind}")
    return EndpointDMA(hca, fabric, port, model.dma("hca"), windows)
