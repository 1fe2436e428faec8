"""A registered memory region: a range of host addresses with keys and access rights."""

from dataclasses import dataclass

from .types import Access

__all__ = ["MemoryRegion"]


@dataclass(frozen=True)
class MemoryRegion:
    """What ``ibv_reg_mr`` returns: ``[addr, addr + length)`` usable with ``lkey`` / ``rkey``.

    Members
    -------
    addr, length : int
        The registered range of host (or GPU, through GPUDirect) addresses.
    access : Access
        Rights granted; local reads are always allowed.
    lkey, rkey : int
        Keys for local work requests and for remote RDMA writes.
    """

    addr: int
    length: int
    access: Access
    lkey: int
    rkey: int

    def covers(self, addr, length, access=Access.LOCAL_READ):
        """True when ``[addr, addr + length)`` lies inside the region with ``access`` granted."""
        if length == 0:
            return True
        return (self.addr <= addr and addr + length <= self.addr + self.length
                and (self.access & access) == access)
