"""A first-in first-out queue whose first entry is readable the cycle after its write.

The DMA writer's stages are joined by queues; with ``amaranth.lib.fifo.SyncFIFOBuffered`` an
entry written into an empty queue is readable two cycles later (a cycle into its storage, one
into its output register), which every memory write pays at each queue on its way out.
"""

from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib.fifo import SyncFIFOBuffered

__all__ = ["BypassFIFO"]


class BypassFIFO(Elaboratable):
    """``SyncFIFOBuffered``'s interface and capacity, with an output register that an entry
    written while the queue is empty (or its only entry is read in the same cycle) enters
    directly: readable the next cycle.  Otherwise entries wait in a ``SyncFIFOBuffered``
    behind the output register, in order.  ``r_data`` and ``r_rdy`` are registers, as with
    ``SyncFIFOBuffered``; ``w_rdy`` is high exactly while fewer than ``depth`` entries are
    inside, and unlike ``SyncFIFOBuffered``'s it is a promise asked of the writer, not a
    guard: ``w_en`` only while ``w_rdy`` (the DMA writer writes only with room it counted
    from ``level``), so no gate on ``w_rdy`` lies between ``w_en`` and the storage.  (The
    inner queue has room for ``depth`` of its own: one of ``depth - 1`` can refuse a write
    while the whole holds fewer, its storage full and its output register not yet loaded.)

    Parameters
    ----------
    width : int
    depth : int
        Entries held at most (the output register's one included), 3 or more.

    Members
    -------
    w_data, w_en, w_rdy, r_data, r_en, r_rdy, level
        As ``SyncFIFOBuffered``'s (``level`` counts the output register's entry too).
    """

    def __init__(self, *, width, depth):
        if depth < 3:
            raise ValueError(f"depth must be 3 or more, not {depth}")
        self.width, self.depth = width, depth
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.w_rdy = Signal()
        self.r_data = Signal(width)
        self.r_en = Signal()
        self.r_rdy = Signal()
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = SyncFIFOBuffered(width=self.width, depth=self.depth)
        # The entries inside, kept in a register of its own (the inner queue's ``level`` is a
        # sum behind its registers): ``w_rdy`` and whether the inner queue is empty are then
        # one LUT each on registers.
        get = self.r_rdy & self.r_en
        m.d.sync += self.level.eq(self.level + self.w_en - get)
        m.d.comb += self.w_rdy.eq(self.level != self.depth)
        # The output register is free this cycle (empty, or read now).
        take = ~self.r_rdy | self.r_en
        # An entry bypasses the inner queue only when nothing waits there (order kept): the
        # entries inside are then the output register's alone.  Worked out without ``w_en``,
        # which only chooses between the two places.
        to_out = Signal()
        m.d.comb += to_out.eq(take & (self.level == self.r_rdy))
        m.d.comb += [
            inner.w_data.eq(self.w_data),
            inner.w_en.eq(self.w_en & ~to_out),
            inner.r_en.eq(take),
        ]
        with m.If(take):
            m.d.sync += [self.r_data.eq(Mux(inner.r_rdy, inner.r_data, self.w_data)),
                         self.r_rdy.eq(inner.r_rdy | to_out & self.w_en)]
        return m
