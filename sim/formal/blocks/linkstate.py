"""Harnesses: :class:`~peach2.router.linkstate.LinkState` and :class:`LinkGate` (link loss,
``docs/errors.md`` "Reset and link loss")."""

import importlib.util
import subprocess
import sys

from amaranth.hdl import Assume, Signal

from peach2.router.common import Port
from peach2.router.linkstate import HOLD, LTSSM_L0, LinkGate, LinkState
from peach2.tlp.stream import TLPBeat

from ..contract import RULES, StreamContract
from ..harness import Harness

__all__ = ["LinkStateHarness", "LinkGateHarness", "linkstate_at"]


def linkstate_at(commit, root="."):
    """The :class:`LinkState` class of ``rtl/router/linkstate.py`` at git ``commit`` (for the
    check that the property fails before the reset fix); None when git or the commit is
    missing."""
    try:
        text = subprocess.run(["git", "-C", str(root), "show", f"{commit}:rtl/router/linkstate.py"],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    name = f"peach2.router.linkstate_{commit}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "peach2.router"
    sys.modules[name] = module
    exec(compile(text, f"linkstate.py@{commit}", "exec"), module.__dict__)
    return module.LinkState


class LinkStateHarness(Harness):
    """N's link in L0 from the reset on (never lost), any ``queued``/``busy`` inputs and any
    LTSSM states of the other ports.

    ``answered``: two cycles after the first cycle in which nothing is held for N (no packet
    bound for it in a buffer, its gate idle), N stops dropping, and never drops again while
    its link stays up; so the completion of a non-posted request accepted on N (sent through
    N's gate, whose ``dropping`` discards it) is never discarded from then on, and the wait
    is bounded by the time N's traffic takes to leave, not by ``HOLD`` (``docs/errors.md``,
    "Reset and link loss": the hold is skipped until the first loss).  ``block_class`` replaces the
    block (the parent commit's, without the fix, fails).
    """

    PROPERTIES = {"answered": "with N's link up since reset, N stops dropping two cycles after "
                              "nothing is held for it and never drops again"}

    def __init__(self, prop, *, mutant=None, block_class=None):
        super().__init__(prop, mutant=mutant)
        self.block_class = block_class

    def build(self, m, platform):
        dut = self.add_block(m, "dut", (self.block_class or LinkState)(), platform)
        n = Port.N.value
        for p in range(len(dut.ltssm)):
            m.d.comb += dut.ltssm[p].eq(self.anyseq(m, 5, f"ltssm_{p}"))
        m.d.comb += [dut.queued.eq(self.anyseq(m, len(dut.queued), "queued")),
                     dut.busy.eq(self.anyseq(m, len(dut.busy), "busy")),
                     Assume(dut.ltssm[n] == LTSSM_L0)]
        empty_now = ~dut.queued[n] & ~dut.busy[n]
        seen1 = Signal(name="seen_empty_1")     # N was empty in some earlier cycle
        seen2 = Signal(name="seen_empty_2")     # ... at least two cycles ago
        m.d.sync += [seen1.eq(seen1 | empty_now), seen2.eq(seen1)]
        self.claim(m, "answered", ~seen2 | ~dut.dropping[n])
        if self.block_class is None and self.mutant is None:
            started = Signal(name="started")
            m.d.sync += started.eq(1)
            quiet, fresh = self.internal(f"quiet_{n}"), self.internal(f"fresh_{n}")
            empty = self.internal(f"empty_{n}")
            self.lemma(m, ~started | (dut.link_up[n] & (quiet == HOLD) & fresh))
            self.lemma(m, ~(seen1 & ~seen2) | empty)
            self.lemma(m, started | ~seen1)


class LinkGateHarness(Harness):
    """A port's gate with any traffic that obeys the stream contract and a ``dropping`` that
    rises at any time and falls only between packets (what :class:`LinkState` guarantees: it
    waits for the gate's ``busy`` to be 0).  Its output obeys the contract, counted afresh
    while ``dropping`` holds the TX adapter in reset (``rtl/router/linkstate.py``)."""

    PROPERTIES = dict(RULES)

    def build(self, m, platform):
        dut = self.add_block(m, "dut", LinkGate(), platform)
        i, o = dut.i_tlp, dut.o_tlp
        dropping = self.anyseq(m, 1, "dropping")
        m.d.comb += [i.valid.eq(self.anyseq(m, 1, "in_valid")),
                     i.p.eq(self.anyseq(m, TLPBeat, "in_p")),
                     o.ready.eq(self.anyseq(m, 1, "out_ready")), dut.dropping.eq(dropping)]
        was_dropping = Signal(init=1, name="was_dropping")
        was_busy = Signal(name="was_busy")
        m.d.sync += [was_dropping.eq(dropping), was_busy.eq(dut.busy)]
        m.d.comb += Assume(~(was_dropping & ~dropping & was_busy))
        before = StreamContract(i, "in")
        before.assume(m)
        after = StreamContract(o, "out", restart=dropping)
        after.assert_into(self, m)
        if self.mutant is None:
            # Lemmas: the gate's packet state is the input's; a packet passed whole so far
            # (dropping not high in the last cycle: it cannot fall inside a packet) has left
            # the output observer where the input one is; outside a packet, or inside one
            # being discarded, the output observer is outside a packet.
            in_pkt, held = self.internal("in_pkt"), self.internal("held")
            self.lemma(m, in_pkt == before.state[0])
            self.lemma(m, ~(in_pkt & ~held & ~was_dropping)
                       | _same(after.state, before.state))
            self.lemma(m, (in_pkt & ~held) | ~after.state[0])


def _same(a, b):
    """Two stream observers' states ``(in_pkt, beat, want)`` agree."""
    return (a[0] == b[0]) & (a[1] == b[1]) & (a[2] == b[2])
