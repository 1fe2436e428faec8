"""Harness: :class:`~peach2.dma.fifo.BypassFIFO` (the DMA writer's queue between stages A'
and B)."""

from amaranth.hdl import Assume, Signal

from peach2.dma.fifo import BypassFIFO

from ..harness import Harness
from ..tracker import BeatTracker

__all__ = ["FifoHarness"]


class FifoHarness(Harness):
    """The bypass queue of ``depth`` entries, 4 bits wide, with any reads (one with ``r_rdy``
    low must do nothing) and any writes while ``w_rdy`` is high (the queue's contract: a write
    with ``w_rdy`` low is not allowed).

    ``mutant="small"`` bounds the entries inside by ``depth - 1`` (so ``bound`` fails: the
    queue does hold ``depth``)."""

    PROPERTIES = {
        "order": "every entry written leaves once, unchanged, in the order written (one "
                 "symbolic entry tracked)",
        "bound": "at most depth entries inside, none read from an empty queue",
        "level": "level counts the entries inside",
        "room":  "w_rdy is high whenever level is below depth (the DMA writer's room checks "
                 "count on it)",
        "next":  "an entry written into an empty queue, or into one whose only entry is read "
                 "in the same cycle, is at the output the next cycle",
    }

    def __init__(self, prop, *, mutant=None, depth=3):
        super().__init__(prop, mutant=mutant)
        self.depth = depth

    def build(self, m, platform):
        dut = self.add_block(m, "dut", BypassFIFO(width=4, depth=self.depth), platform)
        m.d.comb += [dut.w_en.eq(self.anyseq(m, 1, "w_en")),
                     dut.w_data.eq(self.anyseq(m, 4, "w_data")),
                     dut.r_en.eq(self.anyseq(m, 1, "r_en")),
                     Assume(~dut.w_en | dut.w_rdy)]
        capacity = self.depth - (self.mutant == "small")
        tracker = BeatTracker("track", capacity, dut.w_en, dut.w_rdy, dut.w_data,
                              dut.r_rdy, dut.r_en, dut.r_data, self.anyseq(m, 1, "pick"))
        for prop, test in tracker.add(m).items():
            self.claim(m, prop, test)
        self.claim(m, "level", dut.level == tracker.inside)
        self.claim(m, "room", (dut.level >= self.depth) | dut.w_rdy)
        # Written into an empty queue (or one emptied by this cycle's read): out next cycle.
        was_quick = Signal()
        m.d.sync += was_quick.eq(dut.w_en & dut.w_rdy & (
            (dut.level == 0) | ((dut.level == 1) & dut.r_rdy & dut.r_en)))
        self.claim(m, "next", ~was_quick | dut.r_rdy)
