"""The HA-PACS/TCA machine with real sub-clusters: PEACH2 chips co-simulated in cocotb inside
each sub-cluster, the InfiniBand switch and MPI of :mod:`peach2.sim.machine` across.

See ``docs/machine.md`` ("Sub-clusters in the machine").

- :class:`MachinePlan`: sub-clusters, global node numbers, the HDL top of one or all of them;
- :func:`bridged_node`, :class:`WindowMemory`: the node model with the cocotb models' bytes;
- :class:`PartitionWorld`: one partition's MPI ranks on its share of the switch;
- :class:`MachineDriver`: steps the machine one window at a time from a cocotb test;
- :class:`MachineSim`: this process's sub-clusters, node models, MPI ranks and driver, put
  together inside a cocotb test;
- :class:`TcaAllToAll`, :class:`MpiAllToAll`: the traffic and its models;
- :class:`LinkTrace`: every TCA cable's and InfiniBand port's bytes over a run (opt-in);
- :mod:`.launch`: ``run``, ``prebuild``, ``ranks_command`` (``python -m peach2.sim.system.launch``).
"""

from .assembly import MachineSim
from .bridge import WindowMemory, back, bridged_node
from .endpoint_dma import EndpointDMA, endpoint_dma, hca_params
from .link_trace import LinkTrace
from .machine_driver import MachineDriver
from .mpi_traffic import MpiAllToAll
from .plan import CLOCK_PS, WINDOW_PS, MachinePlan
from .world import PartitionWorld

__all__ = ["MachineSim", "MachineDriver", "EndpointDMA", "endpoint_dma", "hca_params", "MachinePlan", "WINDOW_PS", "CLOCK_PS", "WindowMemory", "back", "bridged_node",
           "PartitionWorld", "MpiAllToAll", "LinkTrace"]
