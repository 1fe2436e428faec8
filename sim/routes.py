"""Route sets: every chip's next hops, route table and N offset for a whole cluster.

:class:`RouteSet` holds one next hop per (node, destination) for a whole cluster, the merged
table entries of every chip, their N offsets, hop statistics and the deadlock check;
``peach2 routes`` prints it (``docs/routes.md``).  Its parts: one chip's table
(:mod:`peach2.sim.route_tables`), the channel dependency graph (:mod:`peach2.sim.deadlock`), the
``safe`` and ``shortest`` policies (:mod:`peach2.sim.route_search`) and the output formats
(:mod:`peach2.sim.route_output`).  :func:`cost_table` compares both policies' hops.
"""

from .cluster_layout import _MASK64, PORT_NAMES, Topology, _port_number, _u64, default_address_map
from .deadlock import _dependencies, _find_cycle, channel_name
from .route_output import RouteSetFormats
from .route_search import _next_hops
from .route_tables import RouteTableFull, RoutingError, _table, match_route

__all__ = ["RouteSet", "cost_table"]


def _trace(topology, next_hops, src, dst):
    """Follow the next hops from ``src``; return the nodes visited, ending at ``dst``."""
    path, node = [src], src
    while node != dst:
        port = next_hops[node][dst]
        if port == "N":
            raise RoutingError(f"node {node} delivers packets for node {dst} to its own host "
                               f"(route from node {src}: {' -> '.join(map(str, path))})")
        node = topology.links[(node, port)]
        if node in path:
            raise RoutingError(f"the route from node {src} to node {dst} loops: "
                               f"{' -> '.join(map(str, path + [node]))}")
        path.append(node)
    return path


class RouteSet(RouteSetFormats):
    """Next hops, route tables and N offsets of every chip of a cluster, with their checks.

    Parameters
    ----------
    topology : Topology
    address_map : AddressMap
    next_hops : sequence of str
        ``next_hops[node][dst]`` is the port (``"N"``, ``"E"``, ``"W"``, ``"S"``) by which
        ``node`` forwards a packet for ``dst``'s region; ``"N"`` exactly when ``node == dst``.
    policy : str
        How they were made: ``"safe"``, ``"shortest"`` (:meth:`build`) or a name of your own.
    phys_base : int or sequence of int
        Where each node's region lands in its own host's memory, one value for all nodes or one
        per node; the N offset is ``region base - phys_base`` modulo 2^64 (:meth:`offset`).

    Raises
    ------
    RoutingError
        A next hop names a port without a link, or a route does not reach its destination.

    Members
    -------
    topology, address_map, policy
    next_hops : tuple of str
    """

    def __init__(self, topology, address_map, next_hops, *, policy="custom", phys_base=0):
        n = topology.n_nodes
        self.topology, self.address_map, self.policy = topology, address_map, str(policy)
        self.next_hops = tuple(str(h) for h in next_hops)
        if len(self.next_hops) != n or any(len(h) != n for h in self.next_hops):
            raise RoutingError(f"next hops must be {n} strings of {n} ports (one per "
                               f"destination), not {list(self.next_hops)}")
        for x, hops in enumerate(self.next_hops):
            for d, port in enumerate(hops):
                if port not in PORT_NAMES:
                    raise RoutingError(f"node {x}, destination {d}: port must be one of "
                                       f"{', '.join(PORT_NAMES)}, not {port!r}")
                if (port == "N") != (x == d):
                    raise RoutingError(f"node {x}, destination {d}: port N (the own host) is "
                                       f"for the node's own region only")
                if port != "N" and (x, port) not in topology.links:
                    raise RoutingError(f"node {x} sends destination {d} by port {port}, which "
                                       f"has no link")
        if isinstance(phys_base, (list, tuple)):
            if len(phys_base) != n:
                raise ValueError(f"phys_base needs one value per node ({n}), not "
                                 f"{len(phys_base)}")
            self._phys = tuple(_u64("phys_base", p) for p in phys_base)
        else:
            self._phys = (_u64("phys_base", phys_base),) * n
        self._paths = [[_trace(topology, self.next_hops, s, d) for d in range(n)]
                       for s in range(n)]
        self._tables = [_table(address_map, hops, x) for x, hops in enumerate(self.next_hops)]
        for x, table in enumerate(self._tables):      # the merged entries say the same
            for d in range(n):
                base, size = address_map.region(d)
                want = _port_number(self.next_hops[x][d])
                if not match_route(table, base) == match_route(table, base + size - 1) == want:
                    raise AssertionError(f"node {x}: table entries disagree with the next hop "
                                         f"for node {d}")
        self._cycle = False                  # not computed yet

    @classmethod
    def build(cls, topology, address_map, policy="safe", *, n_routes=None, phys_base=0):
        """Return the route set of ``policy`` (``"safe"`` or ``"shortest"``, described in
        :mod:`peach2.sim.route_search`).

        Raises
        ------
        RouteTableFull
            Some node needs more than ``n_routes`` entries (the first such node is named).
        """
        rs = cls(topology, address_map, _next_hops(topology, policy, n_routes), policy=policy,
                 phys_base=phys_base)
        if n_routes is not None:
            rs.check(n_routes)
        return rs

    def __eq__(self, other):
        return (isinstance(other, RouteSet) and self.topology == other.topology
                and self.address_map == other.address_map
                and self.next_hops == other.next_hops and self._phys == other._phys)

    def __repr__(self):
        return f"RouteSet({self.topology.label}, {self.policy})"

    @property
    def n_nodes(self):
        return self.topology.n_nodes

    def _node(self, node):
        if not 0 <= node < self.n_nodes:
            raise ValueError(f"node {node} out of range 0..{self.n_nodes - 1}")
        return node

    def entries(self, node):
        """Return ``node``'s table ``[(mask, lower, upper, port number)]``, first match first."""
        return list(self._tables[self._node(node)])

    def phys_base(self, node):
        """Return where ``node``'s region lands in its host's memory."""
        return self._phys[self._node(node)]

    def offset(self, node):
        """Return ``node``'s N offset (the OFFSET register): region base - phys_base."""
        base, _ = self.address_map.region(self._node(node))
        return (base - self._phys[node]) & _MASK64

    def path(self, src, dst):
        """Return the nodes a packet from ``src`` to ``dst`` visits, both included."""
        return list(self._paths[self._node(src)][self._node(dst)])

    def hops(self, src, dst):
        """Return the links a packet from ``src`` to ``dst`` crosses."""
        return len(self._paths[self._node(src)][self._node(dst)]) - 1

    def stats(self):
        """Return hop and table statistics.

        A dict: ``max_hops`` and ``mean_hops`` over every ordered pair of different nodes,
        ``node_max_hops``/``node_mean_hops`` (per source node), ``entries`` (per node) and
        ``max_entries``.
        """
        n = self.n_nodes
        per = [[self.hops(s, d) for d in range(n) if d != s] for s in range(n)]
        every = [h for row in per for h in row]
        entries = [len(t) for t in self._tables]
        return {"max_hops": max(every, default=0),
                "mean_hops": sum(every) / len(every) if every else 0.0,
                "node_max_hops": [max(row, default=0) for row in per],
                "node_mean_hops": [sum(row) / len(row) if row else 0.0 for row in per],
                "entries": entries, "max_entries": max(entries)}

    def check(self, n_routes):
        """Raise :class:`RouteTableFull` if a node needs more than ``n_routes`` entries."""
        for node, table in enumerate(self._tables):
            if len(table) > n_routes:
                raise RouteTableFull(
                    f"node {node} needs {len(table)} route entries, the chip has {n_routes} "
                    f"({self.topology.label}, {self.policy} routing; next hops by destination "
                    f"{self.next_hops[node]})")

    def dependencies(self):
        """Return the channel dependency graph ``{(node, port): {(node, port), ...}}``."""
        return _dependencies(self.topology, self.next_hops)

    def cycle(self):
        """Return a cycle of the CDG as a list of channels ``(node, port)``, or ``None``."""
        if self._cycle is False:
            self._cycle = _find_cycle(self.dependencies())
        return None if self._cycle is None else list(self._cycle)

    @property
    def deadlock_free(self):
        """True when the CDG is acyclic."""
        return self.cycle() is None

    def cycle_names(self):
        """Return :meth:`cycle` as channel names (``["0.E->1", "1.E->2", ...]``) or ``None``."""
        cycle = self.cycle()
        return None if cycle is None else [channel_name(self.topology, c) for c in cycle]


def cost_table(specs=("ring:4", "ring:8", "2x4", "2x8"), n_routes=8):
    """Return a Markdown table of both policies' hops and entries on each topology
    (default address map, ``n_routes`` entries per chip)."""
    out = ["| topology | nodes | shortest: max / mean hops | entries | CDG | "
           "safe: max / mean hops | entries | CDG |",
           "| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |"]
    amap = default_address_map()
    for spec in specs:
        topo = Topology.parse(spec)
        row = [spec, str(topo.n_nodes)]
        for policy in ("shortest", "safe"):
            rs = RouteSet.build(topo, amap, policy, n_routes=n_routes)
            st = rs.stats()
            row += [f"{st['max_hops']} / {st['mean_hops']:.3f}", str(st["max_entries"]),
                    "acyclic" if rs.deadlock_free else "cyclic"]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"
