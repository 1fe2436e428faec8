"""The HCA's view of its host: an abstract DMA interface.

The verbs layer moves data only through this interface, so it does not care what sits behind
it: the in-memory :class:`~peach2.sim.infiniband.memory.HostMemory` of the unit tests, later a
cocotbext-pcie endpoint on the node's root complex (PCIe Gen3 x8), or a GPU reached across QPI
at the rate 000 section 2.4 reports (about 290 MB/s).

Calls are made at simulated time ``t_ps``, in non-decreasing time order per HCA, and return
when the access is complete in simulated time; the data effect of a write is applied at the
call.  An implementation paces its own bandwidth (a busy-until per direction is enough).
"""

import abc

__all__ = ["DMA"]


class DMA(abc.ABC):
    """Host memory as a device sees it over PCIe."""

    @abc.abstractmethod
    def read(self, t_ps, addr, nbytes):
        """Read ``nbytes`` at ``addr`` starting at ``t_ps``; return ``(t_done_ps, data)``.

        ``t_done_ps`` is when the last byte is in the device (completion received).
        """

    @abc.abstractmethod
    def write(self, t_ps, addr, data):
        """Write ``data`` at ``addr`` starting at ``t_ps``; return ``t_done_ps``.

        ``t_done_ps`` is when the data is visible to the host (a later CPU read sees it).
        """
