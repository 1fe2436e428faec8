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

What the collector still costs is the cycles themselves, which no threshold removes: on 64
nodes (``python -m peach2.sim.hybrid.launch --shape 2x8 --subclusters 4 --gpu-read 2.8e9
--run allgather:hybrid:4096``, 2026-12-02) it took 20% of the simulation's CPU time (63.5 s:
gen0 collections 47 s, gen1 9.6, one gen2 6.6), and 70 of every 100 thousand objects allocated
ended in cycles (a census of one gen0 collection with ``gc.DEBUG_SAVEALL``).  Nearly all of them
are cocotb 2.1 tasks, about 18 objects each (a task and its coroutine, completion trigger,
callbacks and, when cancelled, the exception's traceback): ``First`` starts a task for each
awaitable and cancels the losers, and cocotbext-pcie's port transmit loop waits on a ``First``
of three events whenever its queue runs empty (2208 of the census's 3808 tasks), besides one
task per packet for the wire (``SimPort._transmit``, 1024); the hard IP model's own tasks
(``_rx_after_pipeline``, ``_sleep`` and its ``First``) are 576.  Thresholds of (10 000, 100, 1000)
collected the same garbage in 58.2 s instead of 63.5.
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
