"""The DMA half of the host driver model (000 section 2.5, the TCA API) and the driver's errors.

:class:`DmaDriver` is a mixin of :class:`peach2.sim.driver.Driver`: it needs the register
accessors of that class (``read_reg``, ``write_reg``, ``read_fields``, ``read_wide``,
``write_wide``) and its ``memory`` (host memory for descriptors).  Use it through
:class:`~peach2.sim.driver.Driver`, which re-exports :class:`DriverError` and :class:`DmaFault`.
"""

from peach2.params import N_DMA_CHANNELS, N_DMA_SLOTS, DmaError

__all__ = ["DriverError", "DmaFault", "DmaDriver"]


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


class DmaDriver:
    """DMA methods of :class:`~peach2.sim.driver.Driver` (see there; not usable alone)."""

    # -- DMA (000 section 2.5: tcaSetDMADesc_Memcpy, tcaDescSet, tcaStartDMADesc, ...) --------

    _SIZE_CODES = {128: 0, 256: 1, 512: 2}

    @staticmethod
    def _channel(channel):
        channel = int(channel)
        if not 0 <= channel < N_DMA_CHANNELS:
            raise IndexError(f"DMA channel {channel} out of range 0..{N_DMA_CHANNELS - 1}")
        return channel

    async def dma_config(self, mps=256, mrrs=512, ext_tags=True, timeout=None):
        """Set the DMA's max payload size, max read request size (bytes), tags and timeout.

        ``mps``/``mrrs`` must be what the host programmed into port N's device control
        register (and no larger than the MPS of every link a DMA write crosses); ``ext_tags``
        only if the host enabled the Extended Tag Field.  ``timeout`` is the completion timeout
        in 250 MHz core cycles (0: never; None: leave it).  Change this only while every channel
        is idle.  Returns once the chip has applied it (DMA_CONFIG read back).
        """
        for name, v in (("mps", mps), ("mrrs", mrrs)):
            if v not in self._SIZE_CODES:
                raise ValueError(f"DMA {name} must be 128, 256 or 512 bytes, not {v}")
        want = {"mps": self._SIZE_CODES[mps], "mrrs": self._SIZE_CODES[mrrs],
                "ext_tags": int(bool(ext_tags))}
        if timeout is not None:
            await self.write_reg("DMA_TIMEOUT", int(timeout))
        await self.write_reg("DMA_CONFIG", **want)
        got = await self.read_fields("DMA_CONFIG")
        if got != want:
            raise DriverError(f"DMA_CONFIG reads back {got} after writing {want}")

    async def dma_info(self):
        """Return the DMA_INFO fields (``channels``, ``slots``, ``tags``, ``buffer_kib``)."""
        return await self.read_fields("DMA_INFO")

    async def dma_set_vector(self, channel, vector):
        """Set the MSI vector raised by descriptors of ``channel`` with ``irq`` (CH_CFG)."""
        await self.write_reg("CH_CFG", index=self._channel(channel), msi_vector=vector)

    async def dma_desc_set(self, chain, memory=None):
        """Write ``chain`` (a :class:`peach2.sim.dma.Chain`) to host memory and register it.

        ``tcaDescSet`` of 000 section 2.5: every descriptor goes to its address in host memory
        (``memory``, default :attr:`memory`), then ``CH_HEAD`` of ``chain.channel`` gets the
        head pointer.  The channel must be idle.
        """
        memory = memory if memory is not None else self.memory
        if memory is None:
            raise ValueError("no host memory to write descriptors to: pass memory= or set "
                             "Driver.memory")
        channel = self._channel(chain.channel)
        for address, raw in chain.image():
            await memory.write(address, raw)
        await self.write_wide("CH_HEAD", chain.head, channel)

    async def dma_set_head(self, channel, head):
        """Write ``CH_HEAD`` of ``channel``: a pointer (bit 0: the descriptor is 64 bytes)."""
        await self.write_wide("CH_HEAD", head, self._channel(channel))

    async def dma_start(self, channel):
        """Start ``channel`` on the chain at ``CH_HEAD`` (``tcaStartDMADesc``, one write)."""
        await self.write_reg("CH_CTRL", index=self._channel(channel), start=1)

    async def dma_reg_set(self, channel, transfers):
        """Write ``transfers`` (1..4 :class:`peach2.sim.dma.Transfer`) into register slots.

        Register mode (002 section 3.4): slot ``s`` of ``channel`` gets ``transfers[s]``; start
        them with :meth:`dma_reg_start`.  Return the number of slots written.
        """
        channel = self._channel(channel)
        transfers = list(transfers)
        if not 1 <= len(transfers) <= N_DMA_SLOTS:
            raise ValueError(f"register mode takes 1..{N_DMA_SLOTS} descriptors, not "
                             f"{len(transfers)}")
        for s, t in enumerate(transfers):
            d = t if isinstance(t, dict) else t.fields()
            index = (channel, s)
            await self.write_wide("SLOT_SRC", d["src"], index)
            await self.write_wide("SLOT_DST", d["dst"], index)
            await self.write_reg("SLOT_LENGTH", d["length"], index)
            await self.write_reg("SLOT_CONTROL", d["control"], index)
            if d["ext"]:
                await self.write_reg("SLOT_COUNT", d["count"], index)
                await self.write_reg("SLOT_SRC_GAP", d["src_gap"], index)
                await self.write_reg("SLOT_DST_GAP", d["dst_gap"], index)
                if d["seq"]:
                    await self.write_reg("SLOT_SEQ_VALUE", d["seq_value"], index)
                    await self.write_wide("SLOT_SEQ_ADDR", d["seq_addr"], index)
        return len(transfers)

    async def dma_reg_start(self, channel, slots):
        """Run register-mode slots ``0 .. slots-1`` of ``channel`` (one write, no fetch)."""
        if not 1 <= slots <= N_DMA_SLOTS:
            raise ValueError(f"slots must be 1..{N_DMA_SLOTS}, not {slots}")
        await self.write_reg("CH_CTRL", index=self._channel(channel), reg_start=1, slots=slots)

    async def dma_abort(self, channel):
        """Stop ``channel``'s chain (it ends with error ABORTED once its reads are done)."""
        await self.write_reg("CH_CTRL", index=self._channel(channel), abort=1)

    async def dma_status(self, channel):
        """Return ``channel``'s state.

        A dict: ``busy``, ``start_ignored`` (bool), ``error`` (:class:`DmaError`),
        ``desc_done``, ``bytes``, ``desc_addr`` (ints).
        """
        channel = self._channel(channel)
        st = await self.read_fields("CH_STATUS", channel)
        return {"busy": bool(st["busy"]), "start_ignored": bool(st["start_ignored"]),
                "error": DmaError(st["error"]),
                "desc_done": await self.read_reg("CH_DESC_DONE", channel),
                "bytes": await self.read_wide("CH_BYTES", channel),
                "desc_addr": await self.read_wide("CH_DESC_ADDR", channel)}

    async def dma_wait(self, channel, *, max_polls=None, pause=None):
        """Poll ``channel`` until it is idle; return its :meth:`dma_status` (``tcaWaitDMADesc``).

        Completion is detected by polling ``CH_STATUS`` (002 section 4.1 polls: 1 us faster than
        the interrupt).  ``pause`` is an optional coroutine function awaited between polls
        (e.g. a few clock cycles); ``max_polls`` bounds the wait.

        Raises
        ------
        DmaFault
            The channel stopped with an error (its code, ``CH_DESC_ADDR`` and counts attached).
        DriverError
            Still busy after ``max_polls`` polls.
        """
        channel = self._channel(channel)
        polls = 0
        while (await self.read_fields("CH_STATUS", channel))["busy"]:
            polls += 1
            if max_polls is not None and polls >= max_polls:
                st = await self.dma_status(channel)
                raise DriverError(f"DMA channel {channel} still busy after {polls} polls: {st}")
            if pause is not None:
                await pause()
        st = await self.dma_status(channel)
        if st["error"] != DmaError.NONE:
            raise DmaFault(channel, st["error"], st["desc_addr"], st["desc_done"], st["bytes"])
        return st

    async def dma_run(self, chain, **wait_args):
        """Register ``chain``, start it and wait for it; return the final :meth:`dma_status`."""
        await self.dma_desc_set(chain)
        await self.dma_start(chain.channel)
        return await self.dma_wait(chain.channel, **wait_args)
