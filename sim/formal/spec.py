"""One property of one block, as ``peach2 prove`` runs it."""

from dataclasses import dataclass, field

__all__ = ["Property"]


@dataclass(frozen=True)
class Property:
    """What to prove and how.

    ``mode`` is ``"prove"`` (k-induction of length ``depth``, with the base case checked to the
    same depth: ``proved`` when the induction closes, else ``bounded to depth cycles``) or
    ``"bmc"`` (bounded model checking to ``depth`` cycles, for a property whose induction does
    not close; ``why`` says why in one sentence).  ``slow`` properties run in the test suite
    only under ``-m slow``.
    """

    block: str
    name: str
    harness: type
    mode: str
    depth: int
    doc: str
    kwargs: dict = field(default_factory=dict)
    slow: bool = False
    why: str = ""

    @property
    def label(self):
        return f"{self.block}.{self.name}"

    def make(self, mutant=None):
        """The harness for this property (with a deliberate defect ``mutant``, for tests)."""
        return self.harness(self.name, mutant=mutant, **self.kwargs)
