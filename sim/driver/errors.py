"""The driver model's errors."""

__all__ = ["DriverError", "DmaFault", "PutFault"]


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


class PutFault(DriverError):
    """The chip refused inline puts (``PUT_STATUS.refused``): nothing of a refused put was sent.

    Members
    -------
    error : PutError
        The last refusal's code (``PUT_ERROR`` in ``docs/registers.md``).
    refused : int
        Puts refused since the last ``PUT_CLEAR``.
    """

    def __init__(self, error, refused):
        self.error, self.refused = error, refused
        super().__init__(f"the chip refused {refused} put(s), the last with {error.name}")
