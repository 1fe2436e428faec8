"""InfiniBand for the HA-PACS/TCA machine: a packet-level 4x QDR fabric and a verbs HCA.

Pure Python, independent of cocotb and of the rest of ``peach2.sim``; time is an integer number
of picoseconds and every run is deterministic.  See ``docs/infiniband.md``.

- :class:`Params`: link, header, credit and latency parameters, each with its source;
- :class:`Fabric`: one flat switch, its HCA links, credits and output contention;
- :class:`HCA`: memory registration, RC queue pairs, SEND / RDMA WRITE (with immediate),
  receives and completion queues, over an abstract :class:`DMA` host interface;
- :class:`HostMemory`: an in-memory :class:`DMA` stand-in for tests.
"""

from .cq import CompletionQueue
from .dma import DMA
from .fabric import Fabric
from .hca import HCA
from .memory import HostMemory
from .message import Message
from .packet import Packet
from .params import Params
from .qp import QueuePair
from .region import MemoryRegion
from .verbs import Access, Opcode, QPState, RecvWR, SendWR, Status, WCOpcode, WorkCompletion

__all__ = ["Params", "Fabric", "Message", "Packet", "HCA", "DMA", "HostMemory", "MemoryRegion",
           "CompletionQueue", "QueuePair", "Access", "Opcode", "QPState", "RecvWR", "SendWR",
           "Status", "WCOpcode", "WorkCompletion"]
