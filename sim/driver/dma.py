"""The driver model's DMA calls (000 section 2.5, the TCA API: ``tcaSetDMADesc_Memcpy``,
``tcaDescSet``, ``tcaStartDMADesc``, ``tcaWaitDMADesc``; register mode, 002 section 3.4; and
register-mode queues, docs/dma.md "Queue mode"): :class:`DmaCalls`, which
:class:`~peach2.sim.driver.driver.Driver` takes its ``dma_*`` methods from.  They reach the chip
through the driver's registers by name (``read_fields``, ``write_reg``, ``write_wide``, ...).
"""

from peach2.params import N_DMA_CHANNELS, N_DMA_SLOTS, DmaError

from .errors import DmaFault, DriverError

__all__ = ["DmaCalls", "DMA_WAIT_NS"]

#: The longest :meth:`Driver.dma_wait` waits by default, in simulated ns: 8 MiB (the largest
#: source a test or benchmark gives a chain) takes 2.3 ms at the 3.66 GB/s link bound and
#: 9.6 ms read from a GPU at 870 MB/s; twice the slower.
DMA_WAIT_NS = 20_000_000


def _sim_ns():
    """Simulated time in ns inside a cocotb simulation, else ``None`` (a driver on a model)."""
    import cocotb
    if not getattr(cocotb, "is_simulation", False):
        return None
    from cocotb.utils import get_sim_time
    return get_sim_time("ns")


def _slot_list(transfers, least, what):
    """``transfers`` as a list of ``least`` .. :data:`N_DMA_SLOTS` descriptors, else
    ``ValueError`` starting with ``what``."""
    transfers = list(transfers)
    if not least <= len(transfers) <= N_DMA_SLOTS:
        raise ValueError(f"{what} {least}..{N_DMA_SLOTS} descriptors, not {len(transfers)}")
    return transfers


class DmaCalls:
    """The ``dma_*`` methods of :class:`~peach2.sim.driver.driver.Driver` (a base class of it:
    it needs the driver's register access and its ``memory``, ``_announced`` and ``_queue``).
    """

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
        """Write ``chain`` (a :class:`peach2.sim.driver.chain.Chain`) to host memory and register
        it.

        ``tcaDescSet`` of 000 section 2.5: every descriptor goes to its address in host memory
        (``memory``, default :attr:`memory`), then ``CH_HEAD`` of ``chain.channel`` gets the
        head pointer.  The channel must be idle.  The next :meth:`dma_start` of the channel
        announces ``chain.announced`` descriptors after the head (``CH_CTRL.adj``).
        """
        memory = memory if memory is not None else self.memory
        if memory is None:
            raise ValueError("no host memory to write descriptors to: pass memory= or set "
                             "Driver.memory")
        channel = self._channel(chain.channel)
        for address, raw in chain.image():
            await memory.write(address, raw)
        await self.write_wide("CH_HEAD", chain.head, channel)
        self._announced[channel] = chain.announced

    async def dma_set_head(self, channel, head):
        """Write ``CH_HEAD`` of ``channel``: a pointer (bit 0: the descriptor is 64 bytes; bits
        [4:1]: descriptors that follow it immediately).  The next start announces no more."""
        channel = self._channel(channel)
        await self.write_wide("CH_HEAD", head, channel)
        self._announced[channel] = 0

    async def dma_start(self, channel, adj=None):
        """Start ``channel`` on the chain at ``CH_HEAD`` (``tcaStartDMADesc``, one write).

        ``adj`` (``CH_CTRL.adj``, 0 .. :data:`~peach2.dma.common.MAX_ANNOUNCED`, refused by
        the register map's field check beyond): descriptors of the head's size that follow it
        immediately in memory, fetched with it; default what :meth:`dma_desc_set` wrote (0
        after :meth:`dma_set_head`)."""
        channel = self._channel(channel)
        if adj is None:
            adj = self._announced.get(channel, 0)
        await self.write_reg("CH_CTRL", index=channel, start=1, adj=adj)

    async def dma_reg_set(self, channel, transfers):
        """Write ``transfers`` (1..4 :class:`peach2.sim.driver.chain.Transfer`) into register slots.

        Register mode (002 section 3.4): slot ``s`` of ``channel`` gets ``transfers[s]``; start
        them with :meth:`dma_reg_start`.  Return the number of slots written.
        """
        channel = self._channel(channel)
        return await self._slots_set(channel, _slot_list(transfers, 1, "register mode takes"))

    async def dma_slot_set(self, channel, slot, transfer):
        """Write ``transfer`` (a :class:`peach2.sim.driver.chain.Transfer` or its field dict)
        into register slot ``slot`` (0..3) of ``channel``.  A slot the channel holds (started
        or appended and not yet closed, ``CH_STATUS.held``) is not written: the chip drops
        the write and sets ``CH_STATUS.slot_refused``."""
        channel = self._channel(channel)
        if not 0 <= slot < N_DMA_SLOTS:
            raise IndexError(f"slot {slot} out of range 0..{N_DMA_SLOTS - 1}")
        d = transfer if isinstance(transfer, dict) else transfer.fields()
        index = (channel, slot)
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

    async def dma_reg_start(self, channel, slots):
        """Run register-mode slots ``0 .. slots-1`` of ``channel`` (one write, no fetch)."""
        if not 1 <= slots <= N_DMA_SLOTS:
            raise ValueError(f"slots must be 1..{N_DMA_SLOTS}, not {slots}")
        await self.write_reg("CH_CTRL", index=self._channel(channel), reg_start=1, slots=slots)

    async def dma_queue_start(self, channel, transfers=()):
        """Start ``channel`` as a register-mode queue (``CH_CTRL.queue``, docs/dma.md, "Queue
        mode") with ``transfers`` (0..4) in slots 0.. : it runs them, then what
        :meth:`dma_append` adds, and waits (busy) when none is left, until :meth:`dma_stop`.
        Return the number of slots started."""
        channel = self._channel(channel)
        n = await self._slots_set(channel, _slot_list(transfers, 0, "a queue starts with"))
        await self.write_reg("CH_CTRL", index=channel, reg_start=1, queue=1, slots=n)
        self._queue[channel] = {"tail": n % N_DMA_SLOTS, "held": n}
        return n

    async def dma_append(self, channel, transfers, *, max_polls=None, pause=None,
                         timeout_ns=DMA_WAIT_NS):
        """Append ``transfers`` (1..4) to ``channel``'s running queue: write them into the
        slots after the last appended (wrapping after slot 3), then one ``CH_CTRL.append``.
        Waits (polling ``CH_STATUS.held``) until the queue has room for them, so an append
        through this method is never refused; one the chip refuses (the channel no longer
        runs a queue, or too many slots) leaves the queue as it was and shows in
        :meth:`dma_status` (``append_refused``, ``slot_refused``).  The wait is bounded as
        :meth:`dma_wait`'s (``max_polls``, ``pause``, ``timeout_ns``).  Raises
        :class:`~peach2.sim.driver.errors.DriverError` if the queue has ended (a fault, an
        abort) while it waited for room, or if there is still no room at the bound."""
        channel = self._channel(channel)
        transfers = _slot_list(transfers, 1, "an append takes")
        q = self._queue.get(channel)
        if q is None:
            raise DriverError(f"DMA channel {channel} was not started as a queue "
                              f"(dma_queue_start)")
        room = N_DMA_SLOTS - len(transfers)        # at most this many held before the append
        if q["held"] > room:
            st = await self._poll_status(
                channel, lambda st: st["busy"] and st["held"] > room, max_polls=max_polls,
                pause=pause, timeout_ns=timeout_ns,
                what=f"has no room for {len(transfers)} slots")
            if not st["busy"]:
                raise DriverError(f"DMA channel {channel}'s queue has ended: "
                                  f"{await self.dma_status(channel)}")
            q["held"] = st["held"]
        n = await self._slots_set(channel, transfers, first=q["tail"])
        await self.write_reg("CH_CTRL", index=channel, append=1, slots=n)
        q["tail"] = (q["tail"] + n) % N_DMA_SLOTS
        q["held"] += n

    async def _slots_set(self, channel, transfers, first=0):
        """Write ``transfers`` into ``channel``'s slots from ``first`` on (wrapping after slot
        3); return how many."""
        for i, t in enumerate(transfers):
            await self.dma_slot_set(channel, (first + i) % N_DMA_SLOTS, t)
        return len(transfers)

    async def _poll_status(self, channel, waiting, *, max_polls, pause, timeout_ns, what):
        """Read ``channel``'s ``CH_STATUS`` until ``waiting(fields)`` is false and return those
        fields; ``pause`` awaited between reads; after ``max_polls`` reads, or ``timeout_ns``
        of simulated time, :class:`~peach2.sim.driver.errors.DriverError` ("DMA channel c
        ``what`` after ...", with its :meth:`dma_status`)."""
        polls = 0
        start = _sim_ns()
        while waiting(st := await self.read_fields("CH_STATUS", channel)):
            polls += 1
            waited = None if start is None else _sim_ns() - start
            if (max_polls is not None and polls >= max_polls) or (
                    timeout_ns is not None and waited is not None and waited >= timeout_ns):
                status = await self.dma_status(channel)
                after = f"{polls} polls" + ("" if waited is None else f", {waited:.0f} ns")
                raise DriverError(f"DMA channel {channel} {what} after {after}: {status}")
            if pause is not None:
                await pause()
        return st

    async def dma_stop(self, channel):
        """Stop ``channel``'s queue once what was appended is done (busy then falls, no
        error; :meth:`dma_wait` waits for it)."""
        channel = self._channel(channel)
        await self.write_reg("CH_CTRL", index=channel, stop=1)
        self._queue.pop(channel, None)

    async def dma_abort(self, channel):
        """Stop ``channel``'s chain (it ends with error ABORTED once its reads are done)."""
        await self.write_reg("CH_CTRL", index=self._channel(channel), abort=1)

    async def dma_status(self, channel):
        """Return ``channel``'s state.

        A dict: ``busy``, ``start_ignored``, ``append_refused``, ``slot_refused`` (bool),
        ``error`` (:class:`DmaError`), ``held``, ``tail`` (register mode, a queue: slots held,
        the next append's slot), ``desc_done``, ``bytes``, ``desc_addr`` (ints).
        """
        channel = self._channel(channel)
        st = await self.read_fields("CH_STATUS", channel)
        return {"busy": bool(st["busy"]), "start_ignored": bool(st["start_ignored"]),
                "append_refused": bool(st["append_refused"]),
                "slot_refused": bool(st["slot_refused"]), "held": st["held"],
                "tail": st["tail"], "error": DmaError(st["error"]),
                "desc_done": await self.read_reg("CH_DESC_DONE", channel),
                "bytes": await self.read_wide("CH_BYTES", channel),
                "desc_addr": await self.read_wide("CH_DESC_ADDR", channel)}

    async def dma_wait(self, channel, *, max_polls=None, pause=None, timeout_ns=DMA_WAIT_NS):
        """Poll ``channel`` until it is idle; return its :meth:`dma_status` (``tcaWaitDMADesc``).

        Completion is detected by polling ``CH_STATUS`` (002 section 4.1 polls: 1 us faster than
        the interrupt).  ``pause`` is an optional coroutine function awaited between polls
        (e.g. a few clock cycles); ``max_polls`` bounds the number of polls and, inside a
        cocotb simulation, ``timeout_ns`` the simulated time (default :data:`DMA_WAIT_NS`;
        ``None``: no bound).

        Raises
        ------
        DmaFault
            The channel stopped with an error (its code, ``CH_DESC_ADDR`` and counts attached).
        DriverError
            Still busy after ``max_polls`` polls or ``timeout_ns`` (its status attached).
        """
        channel = self._channel(channel)
        await self._poll_status(channel, lambda st: st["busy"], max_polls=max_polls,
                                pause=pause, timeout_ns=timeout_ns, what="still busy")
        st = await self.dma_status(channel)
        if st["error"] != DmaError.NONE:
            raise DmaFault(channel, st["error"], st["desc_addr"], st["desc_done"], st["bytes"])
        return st

    async def dma_run(self, chain, **wait_args):
        """Register ``chain``, start it and wait for it; return the final :meth:`dma_status`."""
        await self.dma_desc_set(chain)
        await self.dma_start(chain.channel)
        return await self.dma_wait(chain.channel, **wait_args)
