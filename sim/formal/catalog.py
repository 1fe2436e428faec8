"""Every property ``peach2 prove`` knows, by block (``docs/verification.md``)."""

from dataclasses import replace

from .blocks.buffer import BufferHarness
from .blocks.crossbar import CrossbarHarness
from .blocks.dma import DmaHarness
from .blocks.egress import EgressHarness
from .blocks.fifo import FifoHarness
from .blocks.ingress import IngressHarness
from .blocks.linkstate import LinkGateHarness, LinkStateHarness
from .blocks.put import PutHarness
from .blocks.receiver import ReceiverHarness
from .blocks.slice import SliceHarness
from .contract import RULES
from .spec import Property

__all__ = ["BLOCKS", "properties_of"]


def _block(block, harness, specs, **kwargs):
    """``specs``: ``(name, mode, depth, slow, why)`` per property of ``harness``."""
    return [Property(block, name, harness, mode, depth, harness.PROPERTIES[name],
                     kwargs=kwargs, slow=slow, why=why)
            for name, mode, depth, slow, why in specs]


def _contract(depth, mode="prove", slow=False, why=""):
    return [(rule, mode, depth, slow, why) for rule in RULES]


_WHY_INGRESS = ("the ingress drops packets, so the beats it holds do not lead from the "
                "output observer's state to the input's, and the invariants of stage B's drop "
                "state that would close the induction are not written yet")
_WHY_RAM = ("the FIFOs keep their entries in a block-RAM memory, which no lemma can name "
            "(Amaranth cannot put a memory row in a design), so the induction cannot tie the "
            "stored beats and first flags to the tracker; the same properties are proved with "
            "single-register FIFOs (block buffer)")
_WHY_FIFO = ("the queue behind the output register keeps its entries in a memory, which no "
             "lemma can name, so the induction cannot close; 12 cycles fill and drain the "
             "largest depth proved (4) twice over, with every read and write pattern")
_WHY_PUT = ("the induction needs invariants tying the output registers (header length, beats, "
            "last dw_en) to the descriptor they were made from in the stages before, which are "
            "not written yet; 20 cycles hold a write's four beats, the queue, CHECK, ROUTE, "
            "DECIDE and the longest put's four beats with stalls")
_WHY_RX = ("the invariants of the receiver's four-stage pipeline (the window and done bits "
           "each stage saw, with stage 2c's and 3's forwarding) are not written yet")

#: Block name -> its properties, in the order they run.
BLOCKS = {
    "slice": _block("slice", SliceHarness, [
        *_contract(3), ("order", "prove", 3, False, ""), ("bound", "prove", 3, False, "")]),
    "buffer": _block("buffer", BufferHarness, [
        (name, "prove", 4, False, "") for name in BufferHarness.PROPERTIES]),
    "buffer_ram": _block("buffer_ram", BufferHarness, [
        ("overflow", "prove", 4, True, ""), ("underflow", "bmc", 12, True, _WHY_RAM),
        ("level", "bmc", 12, True, _WHY_RAM), ("order", "bmc", 12, True, _WHY_RAM),
        ("heads", "bmc", 12, True, _WHY_RAM), ("queued", "prove", 4, True, "")],
        depth=4, max_packets=2),
    "fifo": _block("fifo", FifoHarness, [
        (name, "bmc", 12, False, _WHY_FIFO) for name in FifoHarness.PROPERTIES], depth=3),
    "fifo4": _block("fifo4", FifoHarness, [
        (name, "bmc", 12, True, _WHY_FIFO) for name in FifoHarness.PROPERTIES], depth=4),
    "crossbar": _block("crossbar", CrossbarHarness, [
        ("grant", "prove", 3, False, ""), ("packet", "prove", 3, False, ""),
        ("order", "prove", 3, False, ""), ("bound", "prove", 3, False, "")],
        n_in=3, n_out=3),
    "dma": _block("dma", DmaHarness, [
        ("tags", "prove", 2, False, ""), ("credits", "prove", 2, False, ""),
        ("wrap", "prove", 2, False, "")], n_tags=4, rows=64),
    "receiver": _block("receiver", ReceiverHarness, [("accept", "bmc", 30, False, _WHY_RX)],
                       n_tags=4, rows=64),
    "egress": _block("egress", EgressHarness, [("translate", "prove", 1, False, "")]),
    "linkstate": _block("linkstate", LinkStateHarness, [("answered", "prove", 3, False, "")]),
    "gate": _block("gate", LinkGateHarness, [
        ("hold", "prove", 3, False, ""), ("frame", "prove", 3, False, ""),
        ("err", "prove", 3, False, ""), ("dw_en", "prove", 3, False, ""),
        ("length", "prove", 3, False, "")]),
    "put": _block("put", PutHarness, [
        (name, "bmc", 20, False, _WHY_PUT) for name in PutHarness.PROPERTIES]),
    "ingress_e": _block("ingress_e", IngressHarness, [
        ("route", "prove", 6, False, ""), ("forward", "prove", 6, False, ""),
        ("hold", "prove", 4, False, ""), *_contract(10, "bmc", why=_WHY_INGRESS)[1:]],
        port="E", n_routes=2),
    "ingress_n": _block("ingress_n", IngressHarness, [
        ("route", "prove", 6, False, ""), ("forward", "prove", 6, False, ""),
        ("hold", "prove", 4, False, ""), *_contract(10, "bmc", True, _WHY_INGRESS)[1:]],
        port="N", n_routes=2),
}


#: The properties the default test suite runs (a few seconds each, at least one per block but
#: ``dma`` and ``put``, whose proofs take minutes); every other one is marked slow (``-m slow``,
#: ``peach2 prove --quick`` skips them).
QUICK = {"slice.order", "egress.translate", "linkstate.answered", "gate.hold", "gate.frame",
         "ingress_e.hold", "crossbar.order", "buffer.order", "buffer.queued", "receiver.accept",
         "fifo.order", "fifo.next"}
BLOCKS = {block: [replace(p, slow=p.label not in QUICK) for p in props]
          for block, props in BLOCKS.items()}


def properties_of(blocks=None):
    """The properties of ``blocks`` (names of :data:`BLOCKS`; default: every block)."""
    names = list(BLOCKS) if not blocks else blocks
    unknown = [b for b in names if b not in BLOCKS]
    if unknown:
        raise KeyError(unknown[0])
    return [p for b in names for p in BLOCKS[b]]
