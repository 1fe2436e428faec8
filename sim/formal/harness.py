"""The base of every formal harness: the block under proof, its internal signals, claims."""

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Elaboratable, Fragment, Module, ResetSignal, Signal

__all__ = ["Harness"]


class Harness(Elaboratable):
    """A formal harness: the real block of ``rtl/`` with assumptions and assertions around it.

    A subclass writes :meth:`build`, which adds the block with :meth:`add_block` and states each
    property with :meth:`claim` (asserted only in the run of that property, named by
    ``prop``) and each helper invariant with :meth:`lemma` (asserted in every run, so that
    k-induction can close; a lemma is proved with the property it helps).  Every run starts from
    the reset values (the power-up state of the registers) and holds the reset low: a reset in
    the middle of a packet is outside the stream contract (``docs/stream.md``, section 2).

    ``mutant`` names a deliberate defect the subclass may put into its reference or its
    assumptions, so that tests can show the flow reports a broken property as failed.
    """

    #: Property name -> one line saying what it states (and where the behaviour is documented).
    PROPERTIES = {}

    def __init__(self, prop, *, mutant=None):
        if prop not in self.PROPERTIES:
            raise ValueError(f"{type(self).__name__} has no property {prop!r}")
        self.prop = prop
        self.mutant = mutant
        self._fragment = None

    def elaborate(self, platform):
        m = Module()
        m.d.comb += Assume(~ResetSignal())
        self.build(m, platform)
        return m

    def build(self, m, platform):
        raise NotImplementedError

    def add_block(self, m, name, block, platform=None):
        """Add ``block`` to ``m`` as submodule ``name``, elaborated here so that
        :meth:`internal` can find its signals; return ``block``."""
        fragment = Fragment.get(block, platform)
        m.submodules[name] = fragment
        self._fragment = fragment
        self._fragments = {**getattr(self, "_fragments", {}), name: fragment}
        return block

    def internal(self, name, path=(), block=None):
        """The signal named ``name`` driven inside the block (in the sub-block ``path``, a tuple
        of submodule names, if given; in the block added as ``block`` when a harness adds
        several, else the last one added).  Raise LookupError when there is none."""
        fragment = self._fragment if block is None else self._fragments[block]
        for step in path:
            fragment = next(f for f, n, _ in fragment.subfragments if n == step)
        found = list({id(s): s for s in _driven(fragment) if s.name == name}.values())
        if len(found) != 1:
            raise LookupError(f"{len(found)} signals named {name!r} in the block")
        return found[0]

    def submodule(self, path):
        """The elaboratable of the block's sub-block ``path`` (a tuple of submodule names), to
        read its ports (e.g. a FIFO's ``w_en``, driven by the block around it)."""
        fragment = self._fragment
        for step in path:
            fragment = next(f for f, n, _ in fragment.subfragments if n == step)
        return fragment.origins[0]

    def claim(self, m, prop, test):
        """Assert ``test`` when this run proves ``prop``."""
        if prop not in self.PROPERTIES:
            raise ValueError(f"unknown property {prop!r}")
        if prop == self.prop:
            m.d.comb += Assert(test, src_loc_at=1)

    def lemma(self, m, test):
        """Assert ``test`` in every run (a helper invariant for k-induction)."""
        m.d.comb += Assert(test, src_loc_at=1)

    @staticmethod
    def constant(m, shape, name):
        """A value chosen once for the whole run (``AnyConst``): every value is covered."""
        sig = Signal(shape, name=name)
        m.d.comb += sig.eq(AnyConst(sig.shape()))
        return sig

    @staticmethod
    def anyseq(m, shape, name):
        """A signal driven by a new free value every cycle (``AnySeq``)."""
        sig = Signal(shape, name=name)
        m.d.comb += sig.eq(AnySeq(sig.shape()))
        return sig


def _driven(fragment):
    for stmts in fragment.statements.values():
        for stmt in stmts:
            yield from stmt._lhs_signals()
    for sub, _, _ in fragment.subfragments:
        if isinstance(sub, Fragment):
            yield from _driven(sub)
