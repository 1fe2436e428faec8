"""The sections of ``docs/benchmarks.md`` drawn from the hybrid measurements, one module each:
:mod:`.collectives` (the ``hybrid`` section, 000 Figures 12-15: Broadcast and Allgather from
saved sweeps beside what the paper states) and :mod:`.halo` (the ``halo`` section, 000 Figures
6 and 9-10: Himeno's halo exchange from ``halo_bench``'s saved rows).

The names below are :mod:`.collectives`'s, re-exported so ``from peach2.sim.hybrid import
figures`` and ``from peach2.sim.hybrid.figures import X`` keep working.
"""

from .collectives import (
    HEATMAPS,
    MACHINES,
    NOTES,
    PLOTS,
    REAL_MACHINES,
    STATEMENTS,
    compare,
    heat_lines,
    machine_entry,
    plot,
    plot_name,
    section,
    size_text,
)

__all__ = ["STATEMENTS", "plot_name", "compare", "plot", "section", "MACHINES", "REAL_MACHINES",
           "PLOTS", "machine_entry", "size_text", "HEATMAPS", "NOTES", "heat_lines"]
