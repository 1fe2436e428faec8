"""Which sub-cluster, which node: the machine's numbering, and the HDL top of its sub-clusters.

::

    global node g = s * n + i          s: sub-cluster (a partition of the machine, an MPI rank)
                                       i: node inside it (its PEACH2 node id, 0 .. n - 1)
    one process:  one ClusterTop of S * n chips, the cables of S copies of the sub-cluster's
                  topology (none between copies), chip g's pins c<g>_*
    one rank:     one ClusterTop of n chips (sub-cluster s), chip i's pins c<i>_*

Every model is seeded by the global node index, so a sub-cluster runs the same in either top.
The InfiniBand switch port of node ``g`` is ``g``, and its MPI rank is ``g`` too.
"""

from dataclasses import dataclass

from peach2.routes import Topology, cable_plan
from peach2.sim.hdl import ClusterTop
from peach2.sim.pcie import HARDIP_PIPELINE_NS, pipeline_cycles

__all__ = ["MachinePlan", "WINDOW_PS", "CLOCK_PS"]

#: The clock period of every chip (250 MHz).
CLOCK_PS = 4_000
#: The window of the co-simulated machine: 28 clock cycles, the longest whole number of cycles
#: within the switch's 115 ns lookahead (``cable_ps + switch_ps``).
WINDOW_PS = 28 * CLOCK_PS


@dataclass(frozen=True)
class MachinePlan:
    """``subclusters`` copies of the sub-cluster ``shape`` (``"2x2"``, ``"2x8"``, ``"ring:4"``).

    Members
    -------
    topology : Topology
        One sub-cluster's PEACH2 topology (node ids 0 .. n - 1 inside it).
    n : int
        Nodes per sub-cluster.
    n_nodes : int
        Nodes of the machine (``subclusters * n``): switch ports and MPI ranks.
    """

    shape: str
    subclusters: int

    def __post_init__(self):
        if isinstance(self.subclusters, bool) or not isinstance(self.subclusters, int) \
                or self.subclusters < 1:
            raise ValueError(f"subclusters must be a positive integer, not {self.subclusters!r}")
        if self.subclusters * self.n < 2:
            raise ValueError("the machine needs at least two nodes on its switch")

    @property
    def topology(self):
        return Topology.parse(self.shape)

    @property
    def n(self):
        return self.topology.n_nodes

    @property
    def n_nodes(self):
        return self.subclusters * self.n

    def nodes(self, s):
        """Global node numbers of sub-cluster ``s``."""
        return range(s * self.n, (s + 1) * self.n)

    def subcluster_of(self, g):
        """The sub-cluster of global node ``g``."""
        return g // self.n

    def cables(self, copies):
        """Cables of ``copies`` sub-clusters side by side, chip ``k * n + i`` for node ``i``
        of the ``k``-th: :func:`cable_plan` of the topology, repeated, never between copies."""
        one = cable_plan(self.topology)
        n = self.n
        return [(a + k * n, pa, b + k * n, pb) for k in range(copies) for a, pa, b, pb in one]

    def top(self, copies, *, chip=None, cable=None, pipeline_ns=HARDIP_PIPELINE_NS):
        """The :class:`ClusterTop` holding ``copies`` sub-clusters (1 for one rank, all of them
        for one process); the cables' hard-IP pipelines are those of ``pipeline_ns``."""
        cycles = pipeline_cycles(pipeline_ns)
        cable = {"tx_pipeline": cycles, "rx_pipeline": cycles, **(cable or {})}
        return ClusterTop(copies * self.n, self.cables(copies), chip=chip, cable=cable)
