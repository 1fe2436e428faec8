"""Harness: the N-port translation :func:`~peach2.router.egress.translate_header`."""

from amaranth.hdl import Assume, Signal

from peach2.router.egress import translate_header
from peach2.tlp.layouts import TLPHeader

from ..harness import Harness
from .reference import translated

__all__ = ["EgressHarness"]


class EgressHarness(Harness):
    """For every header and every DW-aligned offset, the header a request leaves N with is the
    documented one (``docs/architecture.md``, "N translation"; 002 section 3.5)."""

    PROPERTIES = {"translate": "address - offset, 3-DW header below 4 GiB, 4-DW at or above, "
                               "other headers unchanged, for every header and offset"}

    def build(self, m, platform):
        hdr = self.anyseq(m, TLPHeader, "hdr")
        offset = self.anyseq(m, 64, "offset")
        m.d.comb += Assume(offset[:2] == 0)
        got = Signal(128, name="got")
        want = Signal(128, name="want")
        m.d.comb += [got.eq(translate_header(hdr, offset)), want.eq(translated(hdr, offset))]
        if self.mutant == "no_offset":      # a wrong reference: the offset forgotten
            m.d.comb += want.eq(translated(hdr, 0))
        self.claim(m, "translate", got == want)
