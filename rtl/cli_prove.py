"""``peach2 prove [BLOCK ...]``: formal proofs of the router's blocks (``docs/verification.md``).

The harnesses and the SymbiYosys flow are verification code, in ``peach2.sim.formal``; the
gateware package never imports the simulation platform at import time (``tb/layout``), so this
command loads it by name when it runs, as ``peach2 bench`` loads its benchmarks.  Every option is
``peach2.sim.formal.command``'s (``peach2 prove --help``).
"""

import importlib
import sys

__all__ = ["HELP", "main"]

HELP = ("prove the router blocks' properties with SymbiYosys (k-induction or bounded model "
        "checking; a failure leaves a waveform under build/formal/)")


def main(argv):
    """Run ``peach2.sim.formal.command.main`` with ``argv``; return the exit status."""
    try:
        command = importlib.import_module("peach2.sim.formal.command")
    except ImportError as exc:
        print(f"error: peach2 prove needs the test extras ({exc.name or exc} is missing): "
              "pip install -e \".[test]\"", file=sys.stderr)
        return 2
    return command.main(list(argv), prog="peach2 prove")
