"""Harness: :class:`~peach2.util.RegisterSlice` of TLP beats (the output stage of the crossbar,
the packet buffers and the UR generator)."""

from peach2.tlp.stream import TLPBeat
from peach2.util import RegisterSlice

from ..contract import RULES, StreamContract
from ..harness import Harness
from ..tracker import BeatTracker

__all__ = ["SliceHarness"]


class SliceHarness(Harness):
    """A register slice passes the stream contract on, and every beat once, unchanged and in
    order (``rtl/util.py``: "capacity: two beats"; ``docs/stream.md`` section 2)."""

    PROPERTIES = {**RULES,
                  "order": "every beat leaves once, unchanged, in the order it came",
                  "bound": "at most two beats inside (its capacity), none leaves an empty one"}

    def build(self, m, platform):
        dut = self.add_block(m, "dut", RegisterSlice(TLPBeat), platform)
        i, o = dut.i, dut.o
        m.d.comb += [i.valid.eq(self.anyseq(m, 1, "in_valid")),
                     i.p.eq(self.anyseq(m, TLPBeat, "in_p")),
                     o.ready.eq(self.anyseq(m, 1, "out_ready"))]
        before = StreamContract(i, "in")
        before.assume(m)
        after = StreamContract(o, "out")
        after.assert_into(self, m)
        pick = self.anyseq(m, 1, "pick")
        # Mutant ``lose_skid``, for the flow's own test: the tracker wrongly takes every beat
        # offered as entered, as if the slice dropped the beat it refuses.
        in_ready = i.ready if self.mutant != "lose_skid" else 1
        tracker = BeatTracker("track", 2, i.valid, in_ready, i.p, o.valid, o.ready, o.p, pick)
        for prop, test in tracker.add(m).items():
            self.claim(m, prop, test)
        skid, skid_valid = TLPBeat(self.internal("skid")), self.internal("skid_valid")
        slots = [(o.valid, o.p), (skid_valid, skid)]
        if self.mutant is None:
            for test in tracker.lemmas(slots) + before.chain(after, slots):
                self.lemma(m, test)
