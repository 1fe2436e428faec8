"""The HA-PACS/TCA node (Odajima et al., 000, Figure 1) as a timing model with real bytes.

Pure Python, integer picoseconds, deterministic; imports only the standard library and
``peach2.sim.infiniband`` (for the ``DMA`` interface).  See ``docs/mpi.md``.

- :class:`NodeParams`: topology, memories, PCIe and QPI rates and latencies, copy engines;
- :class:`Node`: two sockets, host memory per socket, four GPUs, the HCA's and PEACH2's
  PCIe views (:meth:`Node.dma`) and the GPUs' copy engines (:meth:`Node.copy`);
- :class:`DeviceDMA`, :class:`Path`: the ``DMA`` implementations a device uses: host memory,
  a GPU on its socket by GPUDirect RDMA, a GPU across QPI;
- :class:`CopyEngine`, :class:`Channel`, :class:`Memory`: the parts.
"""

from .channel import Channel
from .copy_engine import CopyEngine
from .memory import Memory
from .node import Node
from .params import NodeParams
from .path import Path
from .router import DeviceDMA

__all__ = ["NodeParams", "Node", "DeviceDMA", "Path", "CopyEngine", "Channel", "Memory"]
