"""Which nodes talk TCA to each other: the machine's nodes split into TCA groups, MPI between.

::

    MachinePlan("2x2", 2), per_subcluster=1       MachinePlan("2x4", 1), per_subcluster=2
    group 0 = sub-cluster 0: nodes 0 1 2 3        group 0: nodes 0 1 2 3 ┐ one sub-cluster,
    group 1 = sub-cluster 1: nodes 4 5 6 7        group 1: nodes 4 5 6 7 ┘ split "virtually"

A group is a sub-cluster, or a part of one: "TCA/InfiniBand hybrid communication in
XcalableACC" (section 6, Figure 11) could not use two sub-clusters and split one 16-node
sub-cluster "virtually" into two groups that never use TCA with each other.  Both are here:
``per_subcluster=1`` is the real machine (groups joined only by InfiniBand), ``2`` the paper's
virtual split.  Groups are blocks of consecutive global nodes, so node ``g`` is member
``g % size`` of group ``g // size`` and the blocks of a recursive-doubling Allgather that one
group gathers are contiguous.
"""

from dataclasses import dataclass
from functools import cache

from peach2.routes import RouteSet, Topology, default_address_map

__all__ = ["Groups"]


@cache
def _routes(shape):
    """The safe routes of one sub-cluster (hop counts do not depend on the addresses)."""
    topology = Topology.parse(shape)
    return RouteSet.build(topology, default_address_map(topology.n_nodes), "safe")


@dataclass(frozen=True)
class Groups:
    """The TCA groups of ``plan`` (a :class:`~peach2.sim.system.MachinePlan`).

    Members
    -------
    size : int
        Nodes per group.
    count : int
        Groups in the machine.
    """

    plan: object
    per_subcluster: int = 1

    def __post_init__(self):
        k = self.per_subcluster
        if isinstance(k, bool) or not isinstance(k, int) or k < 1 or self.plan.n % k:
            raise ValueError(f"per_subcluster must divide the sub-cluster's {self.plan.n} "
                             f"nodes, not {k!r}")

    @property
    def size(self):
        return self.plan.n // self.per_subcluster

    @property
    def count(self):
        return self.plan.subclusters * self.per_subcluster

    def of(self, g):
        """The group of global node ``g``."""
        return g // self.size

    def members(self, k):
        """Global nodes of group ``k``, in order."""
        return list(range(k * self.size, (k + 1) * self.size))

    def subcluster(self, k):
        """The sub-cluster group ``k`` lies in."""
        return k // self.per_subcluster

    def local(self, k):
        """Group ``k``'s nodes as node ids of its sub-cluster (its chips)."""
        first = (k % self.per_subcluster) * self.size
        return list(range(first, first + self.size))

    @property
    def ring(self):
        """Nodes of each ring of the sub-cluster (``ring:K``, ``2xK``: ``K``) when every group
        is made of whole rings, else None (a line, or a group that is part of a ring)."""
        shape = self.plan.shape
        kind, _, k = shape.partition(":")
        k = int(k) if kind == "ring" else int(kind.split("x")[1]) if "x" in kind else None
        return k if k and self.size % k == 0 else None

    def within(self, hops):
        """The largest groups (a power of two of nodes dividing this group) whose TCA steps all
        cross at most ``hops`` links of the sub-cluster's routes (``peach2 routes``' safe
        routing): every node's recursive-doubling partners (``r xor d``) and binomial-tree
        children (``r + d``) at the distances ``d`` inside the group.  Steps farther away are
        left to MPI: a per-step choice by hop count (000 section 6.2)."""
        if isinstance(hops, bool) or not isinstance(hops, int) or hops < 1:
            raise ValueError(f"hops must be a positive integer, not {hops!r}")
        n, g = self.plan.n, 1
        routes = _routes(self.plan.shape)
        while self.size % (2 * g) == 0 and 2 * g <= self.size:
            if any(routes.hops(r, b) > hops for r in range(n) for b in
                   (r ^ g, (r // (2 * g)) * 2 * g + (r % (2 * g) + g) % (2 * g))):
                break
            g *= 2
        return Groups(self.plan, self.per_subcluster * (self.size // g))

    def leader(self, k, root=0):
        """The node that receives group ``k``'s data over MPI: ``root`` in its own group, the
        first node elsewhere."""
        return root if self.of(root) == k else k * self.size
