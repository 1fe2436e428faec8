"""The tuned network: a table of which network a collective takes per machine and size, built
from measured times as MPI libraries build theirs (:mod:`.table`), the sweeps that measure
them (:mod:`.sweep`) and their runs cut short once slower than the fastest (:mod:`.cutoff`).
"""

from .table import CHOICES, TABLE_FILE, build_table, choose, fastest_times, load_table, table_rows

__all__ = ["CHOICES", "TABLE_FILE", "build_table", "choose", "fastest_times", "load_table",
           "table_rows"]
