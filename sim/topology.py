"""Topologies, the shared address map, route tables and their deadlock check.

A PEACH2 sub-cluster is a set of chips cabled port to port (:class:`Topology`: rings, lines and
the 2xK double ring of the papers).  Every node owns an aligned region of one shared TCA address
space (:class:`AddressMap`), and every chip forwards a posted write by the first route entry
``lower <= (address & mask) <= upper``; so a chip's output port depends on the destination node
only, never on the port the packet came in by, and there are no virtual channels.
:class:`RouteSet` holds one next hop per (node, destination) for a whole cluster, the merged
table entries of every chip, their N offsets, hop statistics and the deadlock check;
``peach2 routes`` prints it (``docs/routes.md``).

This module gathers the public names; the code lives in:

- :mod:`peach2.sim.cluster_layout`: :class:`Topology`, :class:`AddressMap`, the port names and
  :func:`default_address_map`.
- :mod:`peach2.sim.route_tables`: one chip's first-match table (:func:`routes_for`,
  :func:`match_route`), :class:`RouteTableFull` and :class:`RoutingError`.
- :mod:`peach2.sim.deadlock`: the channel dependency graph and its cycle search (the deadlock
  check, :func:`channel_name`).
- :mod:`peach2.sim.route_search`: the routing policies (:data:`POLICIES`: ``shortest``, and
  ``safe``, the deadlock-free rip-up-and-reroute search), with what ``safe`` costs.
- :mod:`peach2.sim.routes`: :class:`RouteSet` and :func:`cost_table`.
- :mod:`peach2.sim.route_output`: the JSON, Markdown and C header formats of :class:`RouteSet`.

Example
-------
::

    topo = Topology.parse("2x4")
    amap = AddressMap(tca_base=0x8000_0000_0000_0000, node_size=1 << 32, host_size=1 << 20,
                      gpu_size=1 << 20)
    rs = RouteSet.build(topo, amap, "safe", n_routes=8)
    assert rs.deadlock_free
    rs.entries(3)              # [(mask, lower, upper, port), ...] first match first
    text = rs.to_json()        # RouteSet.from_json(text) == rs; Driver.program_routes(rs, ...)
"""

from .cluster_layout import LINK_PORTS, PORT_NAMES, AddressMap, Topology
from .cluster_layout import default_address_map  # noqa: F401  (imported from here before)
from .deadlock import channel_name
from .route_search import POLICIES
from .route_tables import RouteTableFull, RoutingError, match_route, routes_for
from .routes import RouteSet, cost_table

__all__ = ["Topology", "AddressMap", "RouteSet", "RouteTableFull", "RoutingError", "POLICIES",
           "routes_for", "match_route", "channel_name", "cost_table", "PORT_NAMES",
           "LINK_PORTS"]
