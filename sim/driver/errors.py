"""The driver model's errors."""

__all__ = ["DriverError", "DmaFault"]


class DriverError(RuntimeError):
    """The chip does not answer as a PEACH2 of a supported version."""


class DmaFault(DriverError):
    """A DMA channel stopped its chain with an error (``CH_STATUS.error``).

    Members
    -------
    channel : int
    error : DmaError
        The code (``DMA_ERROR`` in ``docs/registers.md``).
    desc_addr : int
        ``CH_DESC_ADDR``: the failing descriptor's address (register mode: the slot number).
    desc_done, bytes : int
        ``CH_DESC_DONE`` and ``CH_BYTES`` when the channel stopped.
    """

    def __init__(self, channel, error, desc_addr, desc_done, bytes_done):
        self.channel, self.error, self.desc_addr = channel, error, desc_addr
        self.desc_done, self.bytes = desc_done, bytes_done
        super().__init__(f"DMA channel {channel} stopped with {error.name} at descriptor "
                         f"{desc_addr:#x} after {desc_done} descriptor(s), {bytes_done} bytes")
