"""The HCA's verbs over the InfiniBand fabric (:mod:`peach2.sim.infiniband`).

Pure Python, integer picoseconds, deterministic.  See ``docs/infiniband.md``.

- :class:`HCA`: memory registration, RC queue pairs, SEND / RDMA WRITE (with immediate),
  receives and completion queues that software polls;
- :class:`DMA`: the abstract host interface the HCA reads and writes memory through;
- :class:`HostMemory`: an in-memory :class:`DMA` stand-in for tests.
"""

from .cq import CompletionQueue
from .dma import DMA
from .hca import HCA
from .memory import HostMemory
from .qp import QueuePair
from .region import MemoryRegion
from .types import Access, Opcode, QPState, RecvWR, SendWR, Status, WCOpcode, WorkCompletion

__all__ = ["HCA", "DMA", "HostMemory", "MemoryRegion", "CompletionQueue", "QueuePair", "Access",
           "Opcode", "QPState", "RecvWR", "SendWR", "Status", "WCOpcode", "WorkCompletion"]
