"""The garbage collector's thresholds in a simulation's embedded Python.

:func:`~.runner.run_cocotb` names this module ahead of every cocotb test module, so it is
imported first in each simulator process; it holds no tests.  A co-simulation allocates
millions of short-lived objects (cocotb's tasks and triggers, TLPs), and with CPython's
default thresholds (700, 10, 10) the collector ran every 700 net allocations: a third of a
hybrid collective's wall time was the collector's (py-spy on ``python -m
peach2.sim.hybrid.launch --shape 2x8 --subclusters 2 --run allgather:hybrid:4096``; the run's
simulation took 105.7 s of wall time, 84.8 s with these thresholds, 78.8 s with the collector
off, whose memory then grew to 1.7 GB).  Reference counting still frees every object that is
not in a cycle at once; only cycles wait longer.  Simulated times do not depend on it.
"""

import gc
import warnings

#: Generation 0 collected after this many net allocations, generation 1 after this many
#: collections of 0, generation 2 after this many of 1 (and CPython's own rule: only once the
#: objects waiting for it are a quarter of those it holds).
THRESHOLDS = (100_000, 50, 1000)

gc.set_threshold(*THRESHOLDS)

# cocotb warns of a test module without tests; this one has none on purpose.
warnings.filterwarnings("ignore", message=f"No tests were discovered in module: {__name__}$")
