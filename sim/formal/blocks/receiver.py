"""Harness: the DMA's completion :class:`~peach2.dma.receiver.Receiver` (a completion is
accepted only for an outstanding read's tag)."""

from amaranth.hdl import Assume, Mux, Signal, Value

from peach2.dma.receiver import Receiver
from peach2.tlp.stream import TLPBeat

from ..contract import StreamContract
from ..harness import Harness

__all__ = ["ReceiverHarness"]


class ReceiverHarness(Harness):
    """The real receiver with ``n_tags`` tags and ``rows`` buffer rows; completions obeying the
    stream contract with any header, any tag table contents, any aborts, ``ext_tags``
    constant.  The booking is modelled by its proved behaviour (block ``dma``): a read is
    issued (``clear_en``, with the next tag in issue order) only below the tag limit, and the
    oldest outstanding read is released in issue order; the writer model releases a read only
    once the receiver reports it ``done`` (all its data in, or failed).  A read the writer
    gives up on by its timeout is not covered: ``timeout=True`` lets the writer model free the
    oldest read at any time, and the property then fails (a completion already inside the
    pipeline is accepted after its read was freed).

    ``mutant="stale_window"`` gives the receiver the window of outstanding reads one release
    late (``head_seq`` and ``outstanding`` a cycle old): a completion then lands on a read
    already released.
    """

    PROPERTIES = {
        "accept": "a completion's data is accepted (its tag's DW count advanced, its data "
                  "written) only for a read outstanding in that cycle whose tag on the wire "
                  "is the completion's tag",
    }

    def __init__(self, prop, *, mutant=None, n_tags=4, rows=64, timeout=False):
        super().__init__(prop, mutant=mutant)
        self.n_tags, self.rows, self.timeout = n_tags, rows, timeout

    def build(self, m, platform):
        NT = self.n_tags
        TB = (NT - 1).bit_length()
        dut = self.add_block(m, "dut", Receiver(n_tags=NT, rows=self.rows), platform)
        ext_tags = self.constant(m, 1, "ext_tags")
        i = dut.i_cpl
        m.d.comb += [i.valid.eq(self.anyseq(m, 1, "cpl_valid")),
                     i.p.eq(self.anyseq(m, TLPBeat, "cpl_p")),
                     dut.ext_tags.eq(ext_tags),
                     dut.tag_info.eq(self.anyseq(m, len(Value.cast(dut.tag_info)), "tag_info")),
                     dut.abort.eq(self.anyseq(m, len(dut.abort), "abort"))]
        StreamContract(i, "cpl", ready=1).assume(m, ("frame", "err", "dw_en", "length"))

        # The booking: reads issued and released in order, the window it reports.
        issue_seq = Signal(16, name="issue_seq")
        head_seq = Signal(16, name="head_seq")
        outstanding = (issue_seq - head_seq)[:16]
        issue = self.anyseq(m, 1, "issue")
        release = self.anyseq(m, 1, "release")
        limit = Mux(ext_tags, NT, min(NT, 32))
        head = head_seq[:TB]
        m.d.comb += [Assume(~issue | (outstanding < limit)),
                     Assume(~release | ((outstanding != 0) & (dut.done.bit_select(head, 1)
                                                              | self.timeout)))]
        m.d.sync += [issue_seq.eq(issue_seq + issue), head_seq.eq(head_seq + release)]
        m.d.comb += [dut.clear_en.eq(issue), dut.clear_tag.eq(issue_seq[:TB])]
        seen_head, seen_out = head_seq, outstanding
        if self.mutant == "stale_window":
            seen_head, seen_out = Signal(16, name="stale_head"), Signal(16, name="stale_out")
            m.d.sync += [seen_head.eq(head_seq), seen_out.eq(outstanding)]
        m.d.comb += [dut.head_seq.eq(seen_head), dut.outstanding.eq(seen_out)]

        # A completion accepted in a cycle: stage 2c's decision, ``f2_good`` a cycle later
        # with the tag index in ``s2_idx`` and the header in ``s2``.
        good, idx = self.internal("f2_good"), self.internal("s2_idx")
        beat = TLPBeat(self.internal("s2"))
        was_head, was_out = Signal(16, name="was_head"), Signal(16, name="was_out")
        m.d.sync += [was_head.eq(head_seq), was_out.eq(outstanding)]
        rel = (idx - was_head[:TB])[:TB]
        seq = (was_head + rel)[:16]
        wire = Mux(ext_tags, seq[:8], seq[:5])
        self.claim(m, "accept", ~good | ((rel < was_out)
                                         & (beat.hdr.cpl.tag == wire)))
