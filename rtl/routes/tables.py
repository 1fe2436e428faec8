"""One chip's route table: next hops by destination merged into first-match entries.

Every chip forwards a posted write by the first route entry ``lower <= (address & mask) <=
upper``; so a chip's output port depends on the destination node only, never on the port the
packet came in by, and there are no virtual channels.  :func:`routes_for` builds one node's
table from shortest next hops, :func:`table_entries` from any next hops (:class:`RouteSet` of
:mod:`peach2.routes.route_set` builds every node's), :func:`match_route` is the reference of the
router's matching rule.  The errors of route tables and route sets are defined here too.
"""

from .topology import LINK_PORTS, PORT_NAMES, port_number

__all__ = ["RouteTableFull", "RoutingError", "routes_for", "match_route", "table_entries",
           "merged_ranges"]


class RouteTableFull(ValueError):
    """A node needs more route entries than the chip has."""


class RoutingError(ValueError):
    """Next hops that do not take every node to every other node."""


def merged_ranges(ports):
    """Fewest first-match-wins ranges painting ``ports``; return ``[(lo, hi, port)]``, top first.

    The "strange printer" dynamic programme: ``cost[i][j]`` is the fewest ranges that give
    nodes ``i..j`` their ports when later ranges cover earlier ones.
    """
    n = len(ports)
    cost = [[0] * (n + 1) for _ in range(n + 1)]
    pick = [[None] * (n + 1) for _ in range(n + 1)]

    def c(i, j):
        return cost[i][j] if i <= j else 0

    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            best, how = c(i + 1, j) + 1, None
            for k in range(i + 1, j + 1):
                if ports[k] == ports[i]:
                    v = c(i + 1, k - 1) + c(k, j)
                    if v < best:
                        best, how = v, k
            cost[i][j], pick[i][j] = best, how

    def build(i, j):            # bottom-to-top; the first range starts at i
        if i > j:
            return []
        k = pick[i][j]
        if k is None:
            return [[i, i, ports[i]]] + build(i + 1, j)
        sub = build(k, j)
        sub[0][0] = i
        return sub + build(i + 1, k - 1)

    return [tuple(r) for r in reversed(build(0, n - 1))]


def routes_for(topology, address_map, node, *, n_routes=None, prefer=LINK_PORTS):
    """Return ``node``'s route table as ``[(mask, lower, upper, port)]``, first match first.

    Each destination node gets the next-hop port of :meth:`Topology.next_hop` (port 0, N, for
    ``node`` itself); runs of nodes are merged into the fewest first-match-wins entries.
    ``port`` is the port number (0 N, 1 E, 2 W, 3 S).

    Raises
    ------
    RouteTableFull
        More than ``n_routes`` entries would be needed.
    """
    ports = [topology.next_hop(node, dst, prefer=prefer) for dst in range(topology.n_nodes)]
    return table_entries(address_map, ports, node, n_routes)


def table_entries(address_map, ports, node, n_routes=None):
    """Merge next hops by destination (port names or numbers) into first-match entries."""
    ports = [port_number(p) for p in ports]
    address_map.region(len(ports) - 1)                # the whole space must fit 64 bits
    entries = []
    for lo, hi, port in merged_ranges(ports):
        lower, _ = address_map.region(lo)
        upper, _ = address_map.region(hi)
        entries.append((address_map.mask, lower, upper, port))
    if n_routes is not None and len(entries) > n_routes:
        raise RouteTableFull(
            f"node {node} needs {len(entries)} route entries, the chip has {n_routes}; next "
            f"hops by destination: {''.join(PORT_NAMES[p] for p in ports)}.  Build the chip "
            f"with more routes or renumber the nodes so that equal next hops are contiguous")
    return entries


def match_route(entries, address):
    """Return the port of the first entry matching ``address`` (``None``: unroutable).

    ``entries`` as returned by :func:`routes_for` or read back with :meth:`Driver.routes`
    (enabled entries only); the reference of the router's matching rule.
    """
    for mask, lower, upper, port in entries:
        if lower <= (address & mask) <= upper:
            return port
    return None
