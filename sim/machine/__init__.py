"""The HA-PACS/TCA machine's distributed simulation engine: partitions of the flat InfiniBand
switch, synchronised conservatively in fixed windows, in one process or over MPI ranks.

Pure Python (plus mpi4py for :class:`MpiTransport`); time in integer picoseconds; the same
calls give the same bytes at the same times with one process and with any number of ranks.
See ``docs/machine.md``.

- :class:`Machine`: the partitions and the window loop (``run_until``, ``run``, ``gather``);
- :class:`Partition`: one partition's driver API (``send``, ``on_deliver``, ``delivered``,
  ``schedule``, ``attach_model`` for a co-simulated sub-cluster stepped one window at a time);
- :class:`PartitionFabric`: a partition's share of the switch, :class:`Fabric`'s rules cut
  where partitions meet;
- :class:`Layout`: ports per partition;
- :class:`LocalTransport`, :class:`MpiTransport`: one process, or mpi4py's all-to-all;
- :class:`SyncStats`: windows, crossings, and the wall time spent at window edges.
"""

from .layout import Layout
from .local_transport import LocalTransport
from .machine import Machine
from .mpi_transport import MpiTransport
from .partition import Partition
from .partition_fabric import PartitionFabric
from .stats import SyncStats
from .transport import Transport

__all__ = ["Machine", "Partition", "PartitionFabric", "Layout", "Transport", "LocalTransport",
           "MpiTransport", "SyncStats"]
