"""Routes for PEACH2 chips: topologies, the TCA address map, route tables, deadlock check.

Host software, not simulation: ``peach2 routes`` prints what a driver programs into real chips,
and the simulated host driver (``docs/sim/driver.md``) programs the same.  Nothing here needs
cocotb.

- :mod:`.topology`: :class:`Topology` (rings, lines, the 2xK double ring), :func:`cable_plan`.
- :mod:`.address_map`: :class:`AddressMap`, :func:`default_address_map`.
- :mod:`.tables`: one chip's route table from its next hops (:func:`routes_for`,
  :func:`match_route`).
- :mod:`.deadlock`: the channel dependency graph and its cycle.
- :mod:`.search`: the ``safe`` (deadlock-free) and ``shortest`` next-hop policies.
- :mod:`.route_set`: :class:`RouteSet`, every chip's table and N offset, with its checks and
  output formats (JSON, Markdown, C header).
"""

from .address_map import (
                          DEFAULT_HOST_SIZE,
                          DEFAULT_NODE_SIZE,
                          DEFAULT_TCA_BASE,
                          AddressMap,
                          default_address_map,
)
from .deadlock import channel_name
from .route_set import JSON_FORMAT, JSON_VERSION, RouteSet, cost_table
from .search import POLICIES
from .tables import RouteTableFull, RoutingError, match_route, routes_for
from .topology import (
                          LINK_PORTS,
                          MASK64,
                          MAX_DOUBLE_RING,
                          MAX_NODES,
                          MAX_RING,
                          PORT_NAMES,
                          Topology,
                          cable_plan,
                          check_u64,
                          port_number,
)

__all__ = ["Topology", "cable_plan", "AddressMap", "default_address_map", "DEFAULT_TCA_BASE",
           "DEFAULT_NODE_SIZE", "DEFAULT_HOST_SIZE", "RouteSet", "cost_table", "JSON_FORMAT",
           "JSON_VERSION", "POLICIES", "RouteTableFull", "RoutingError", "match_route",
           "routes_for", "channel_name", "PORT_NAMES", "LINK_PORTS", "MAX_NODES", "MAX_RING",
           "MAX_DOUBLE_RING", "MASK64", "port_number", "check_u64"]
