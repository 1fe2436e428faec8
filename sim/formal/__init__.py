"""Formal verification: harnesses around the router's blocks and the SymbiYosys flow.

``peach2 prove`` (``docs/verification.md``) elaborates a :class:`Harness` (the real block of
``rtl/`` plus assumptions on its inputs and assertions on its outputs, written here and never in
``rtl/``, whose Verilog must not change), converts it to RTLIL with Amaranth, and runs
SymbiYosys (the ``smtbmc`` engine with Yices or Z3) on it: k-induction where it closes, bounded
model checking to a stated depth where it does not.  A failed property leaves its
counterexample as a VCD and a GTKWave save file under ``build/formal/<block>/``.
"""

from .catalog import BLOCKS, properties_of
from .contract import StreamContract
from .harness import Harness
from .job import run_property
from .result import Result
from .spec import Property

__all__ = ["BLOCKS", "properties_of", "StreamContract", "Harness", "run_property", "Result",
           "Property"]
