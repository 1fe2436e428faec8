"""Route sets: every chip's next hops, route table and N offset for a whole cluster.

:class:`RouteSet` holds one next hop per (node, destination) for a whole cluster, the merged
table entries of every chip, their N offsets, hop statistics and the deadlock check;
``peach2 routes`` prints it (``docs/routes.md``).  Its parts: one chip's table
(:mod:`peach2.routes.tables`), the channel dependency graph (:mod:`peach2.routes.deadlock`), the
``safe`` and ``shortest`` policies (:mod:`peach2.routes.search`); the output formats (JSON,
Markdown, a C header, each with every node's phys_base and N offset) are its methods.
:func:`cost_table` compares both policies' hops.
"""


import json

from .address_map import AddressMap, default_address_map
from .deadlock import channel_name, dependencies, find_cycle
from .search import next_hops as search_next_hops
from .tables import RouteTableFull, RoutingError, match_route, table_entries
from .topology import MASK64, PORT_NAMES, Topology, check_u64, port_number

__all__ = ["RouteSet", "cost_table", "JSON_FORMAT", "JSON_VERSION"]

JSON_FORMAT = "peach2-routes"
JSON_VERSION = 1


def _int(value):
    return int(value, 0) if isinstance(value, str) else int(value)


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


class RouteSet:
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
            self._phys = tuple(check_u64("phys_base", p) for p in phys_base)
        else:
            self._phys = (check_u64("phys_base", phys_base),) * n
        self._paths = [[_trace(topology, self.next_hops, s, d) for d in range(n)]
                       for s in range(n)]
        self._tables = [table_entries(address_map, hops, x) for x, hops in enumerate(self.next_hops)]
        for x, table in enumerate(self._tables):      # the merged entries say the same
            for d in range(n):
                base, size = address_map.region(d)
                want = port_number(self.next_hops[x][d])
                if not match_route(table, base) == match_route(table, base + size - 1) == want:
                    raise AssertionError(f"node {x}: table entries disagree with the next hop "
                                         f"for node {d}")
        self._cycle = False                  # not computed yet

    @classmethod
    def build(cls, topology, address_map, policy="safe", *, n_routes=None, phys_base=0):
        """Return the route set of ``policy`` (``"safe"`` or ``"shortest"``, described in
        :mod:`peach2.routes.search`).

        Raises
        ------
        RouteTableFull
            Some node needs more than ``n_routes`` entries (the first such node is named).
        """
        rs = cls(topology, address_map, search_next_hops(topology, policy, n_routes), policy=policy,
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
        return (base - self._phys[node]) & MASK64

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
        return dependencies(self.topology, self.next_hops)

    def cycle(self):
        """Return a cycle of the CDG as a list of channels ``(node, port)``, or ``None``."""
        if self._cycle is False:
            self._cycle = find_cycle(self.dependencies())
        return None if self._cycle is None else list(self._cycle)

    @property
    def deadlock_free(self):
        """True when the CDG is acyclic."""
        return self.cycle() is None

    def cycle_names(self):
        """Return :meth:`cycle` as channel names (``["0.E->1", "1.E->2", ...]``) or ``None``."""
        cycle = self.cycle()
        return None if cycle is None else [channel_name(self.topology, c) for c in cycle]

    # -- JSON -------------------------------------------------------------------------------------

    def to_dict(self, nodes=None):
        """Return the JSON document as a dict (``nodes``: the node sections to include)."""
        nodes = range(self.n_nodes) if nodes is None else [self._node(i) for i in nodes]
        st = self.stats()
        return {
            "format": JSON_FORMAT, "version": JSON_VERSION,
            "topology": self.topology.to_dict(),
            "address_map": {k: hex(v) if k != "n_gpus" else v
                            for k, v in self.address_map.to_dict().items()},
            "policy": self.policy,
            "next_hops": list(self.next_hops),
            "nodes": [{"node": i, "phys_base": hex(self._phys[i]), "offset": hex(self.offset(i)),
                       "entries": [{"mask": hex(m), "lower": hex(lo), "upper": hex(hi),
                                    "port": PORT_NAMES[p]}
                                   for m, lo, hi, p in self._tables[i]]}
                      for i in nodes],
            "stats": {"max_hops": st["max_hops"], "mean_hops": round(st["mean_hops"], 4),
                      "entries": st["entries"]},
            "deadlock_free": self.deadlock_free,
            "cycle": self.cycle_names(),
        }

    def to_json(self, nodes=None, **extra):
        """Return the JSON document (:meth:`from_json` reads it; ``extra`` keys are added)."""
        return json.dumps({**self.to_dict(nodes), **extra}, indent=2) + "\n"

    @classmethod
    def from_dict(cls, data):
        """Return the route set of a :meth:`to_dict` document, checking its node sections.

        The next hops rebuild the whole set (every route is traced again); each node section
        present must list exactly the entries and offset they give, so a document edited by
        hand in one place only is refused rather than half applied.

        Raises
        ------
        ValueError
            Not a route-set document, or its parts disagree (:class:`RoutingError`).
        """
        if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
            raise ValueError(f"not a {JSON_FORMAT} document (its \"format\" must be "
                             f"{JSON_FORMAT!r})")
        if data.get("version") != JSON_VERSION:
            raise ValueError(f"{JSON_FORMAT} version {data.get('version')!r} is not supported "
                             f"(this is version {JSON_VERSION})")
        try:
            topology = Topology.from_dict(data["topology"])
            amap = AddressMap(**{k: _int(v) for k, v in data["address_map"].items()})
            sections = {int(s["node"]): s for s in data.get("nodes", [])}
            phys = [_int(sections[i]["phys_base"]) if i in sections else 0
                    for i in range(topology.n_nodes)]
            rs = cls(topology, amap, data["next_hops"], policy=data.get("policy", "custom"),
                     phys_base=phys)
            for i, s in sections.items():
                entries = [(_int(e["mask"]), _int(e["lower"]), _int(e["upper"]),
                            port_number(e["port"])) for e in s["entries"]]
                if entries != rs.entries(i):
                    raise RoutingError(f"node {i}: the entries listed are not the ones its next "
                                       f"hops {rs.next_hops[i]} give; regenerate the document")
                if "offset" in s and _int(s["offset"]) != rs.offset(i):
                    raise RoutingError(f"node {i}: offset {s['offset']} is not region base - "
                                       f"phys_base = {rs.offset(i):#x}")
        except (KeyError, TypeError) as error:
            raise ValueError(f"malformed {JSON_FORMAT} document: {error!r}") from None
        return rs

    @classmethod
    def from_json(cls, text):
        """Return the route set of a :meth:`to_json` document (see :meth:`from_dict`)."""
        return cls.from_dict(json.loads(text))

    # -- printouts --------------------------------------------------------------------------------

    def _summary_rows(self, others):
        rows = []
        for rs in [self, *others]:
            st = rs.stats()
            rows.append((rs.policy, st["max_hops"], st["mean_hops"], st["max_entries"],
                         "acyclic" if rs.deadlock_free else "cyclic (deadlock possible)"))
        return rows

    def cost_line(self, other):
        """One line comparing this set's hops with ``other``'s (e.g. safe against shortest)."""
        a, b = self.stats(), other.stats()
        extra = (a["mean_hops"] / b["mean_hops"] - 1) * 100 if b["mean_hops"] else 0.0
        return (f"cost of {self.policy} against {other.policy} routing: max hops "
                f"{a['max_hops']} vs {b['max_hops']} ({a['max_hops'] - b['max_hops']:+d}), "
                f"mean hops {a['mean_hops']:.3f} vs {b['mean_hops']:.3f} ({extra:+.1f}%), "
                f"entries per node at most {a['max_entries']} vs {b['max_entries']}")

    def to_markdown(self, nodes=None, others=()):
        """Return the tables, N offsets, hop statistics and CDG verdict as Markdown.

        ``others``: route sets of other policies for the same cluster, compared in the summary.
        """
        nodes = range(self.n_nodes) if nodes is None else [self._node(i) for i in nodes]
        amap, st = self.address_map, self.stats()
        out = [f"# PEACH2 routes: {self.topology.label}, {self.policy} routing", "",
               f"Address map: TCA base {amap.tca_base:#x}; node regions of {amap.node_size:#x} "
               f"bytes (route mask {amap.mask:#x}); host window {amap.host_size:#x} bytes, at "
               f"{self._phys_text()} in its own host's memory (N offset = region base - "
               f"phys_base).", ""]
        cycle = self.cycle_names()
        if cycle is None:
            out.append("Channel dependency graph: **acyclic**, the routes cannot deadlock.")
        else:
            out.append("Channel dependency graph: **cyclic**, deadlock possible; cycle: "
                       + " -> ".join(cycle) + f" -> {cycle[0]}")
        out += ["", "| routing | max hops | mean hops | entries per node (max) | CDG |",
                "| --- | ---: | ---: | ---: | --- |"]
        for policy, mx, mean, ent, verdict in self._summary_rows(others):
            out.append(f"| {policy} | {mx} | {mean:.3f} | {ent} | {verdict} |")
        out.append("")
        for other in others:
            out += [self.cost_line(other) + ".", ""]
        out += ["| node | entries | max hops from it | mean hops from it |",
                "| ---: | ---: | ---: | ---: |"]
        for i in nodes:
            out.append(f"| {i} | {st['entries'][i]} | {st['node_max_hops'][i]} | "
                       f"{st['node_mean_hops'][i]:.3f} |")
        for i in nodes:
            base, _ = amap.region(i)
            out += ["", f"## Node {i}", "",
                    f"N offset (OFFSET): {self.offset(i):#x} = region base {base:#x} - "
                    f"phys_base {self._phys[i]:#x}.  Next hops for destinations "
                    f"0..{self.n_nodes - 1}: `{self.next_hops[i]}`.", "",
                    "| entry | mask | lower | upper | port |", "| ---: | --- | --- | --- | --- |"]
            for k, (m, lo, hi, p) in enumerate(self._tables[i]):
                out.append(f"| {k} | {m:#018x} | {lo:#018x} | {hi:#018x} | {PORT_NAMES[p]} |")
        return "\n".join(out) + "\n"

    def _phys_text(self):
        """Where the host windows land, in words: one address for all, or one per node."""
        if len(set(self._phys)) == 1:
            return f"physical address {self._phys[0]:#x}"
        return ("physical addresses " + ", ".join(f"{p:#x}" for p in self._phys)
                + " (node 0 first)")

    def to_c_header(self, nodes=None):
        """Return a C header with an initialiser of every chip's (or ``nodes``') table.

        Every node: ``peach2_routes[PEACH2_ROUTES_N_NODES]``, indexed by node.  Some nodes
        (``nodes``): one ``peach2_routes_node<I>`` per node listed, so that no array index can
        be taken for a node number; a single node also gets ``PEACH2_ROUTES_NODE`` (its number)
        and ``peach2_routes_this`` (a pointer to its tables).  ``PEACH2_ROUTES_N_NODES`` is the
        cluster's node count in both.

        Bring-up code writes, for its node: ``ROUTE_TARGET[i] = 0`` for every entry, then
        ``ROUTE_MASK/LOWER/UPPER[i]`` and ``ROUTE_TARGET[i] = port | enable`` for each entry
        listed, ``OFFSET``, ``NODE`` and finally ``CONTROL`` (what ``Driver.program_routes``
        does; register offsets in the header of ``peach2 regmap --format c``).
        """
        every = nodes is None
        nodes = range(self.n_nodes) if every else [self._node(i) for i in nodes]
        if not every and not nodes:
            raise ValueError("no node to write")
        width = max(len(t) for t in self._tables)
        st = self.stats()
        cycle = self.cycle_names()
        lines = [
            f"/* PEACH2 route tables: {self.topology.label}, {self.policy} routing.",
            f" * Generated by `peach2 routes`; max {st['max_hops']} hops, mean "
            f"{st['mean_hops']:.3f}; channel dependency graph "
            + ("acyclic (deadlock-free)." if cycle is None else
               "CYCLIC, deadlock possible: " + " -> ".join(cycle) + "."),
            " * An address A goes to the port of the first entry with lower <= (A & mask) <= "
            "upper;",
            " * port: 0 N (own host), 1 E, 2 W, 3 S.  offset: subtracted from A on the way out "
            "of N,",
            f" * offset = region base - phys_base: the host window lands at "
            f"{self._phys_text()}.",
            (" * peach2_routes[i] is node i's tables. */" if every else
             " * Nodes " + ", ".join(map(str, nodes)) + f" of {self.n_nodes} only: "
             "peach2_routes_node<i> is node i's tables. */"),
            "#ifndef PEACH2_ROUTES_H", "#define PEACH2_ROUTES_H", "", "#include <stdint.h>", "",
            f"#define PEACH2_ROUTES_N_NODES {self.n_nodes}u",
            f"#define PEACH2_ROUTES_MAX_ENTRIES {width}u"]
        if not every and len(nodes) == 1:
            lines.append(f"#define PEACH2_ROUTES_NODE {nodes[0]}u")
        lines += [
            "", "struct peach2_route_entry {", "    uint64_t mask, lower, upper;",
            "    uint8_t port;", "};", "",
            "struct peach2_node_routes {", "    uint8_t node, n_entries;",
            "    uint64_t offset, phys_base;",
            "    struct peach2_route_entry entry[PEACH2_ROUTES_MAX_ENTRIES];", "};", ""]

        def node_lines(i, indent):
            pad = " " * indent
            out = [f"{pad}{{ {i}, {len(self._tables[i])}, {self.offset(i):#018x}ull, "
                   f"{self._phys[i]:#x}ull, {{"]
            for m, lo, hi, p in self._tables[i]:
                out.append(f"{pad}    {{ {m:#018x}ull, {lo:#018x}ull, {hi:#018x}ull, {p} }}, "
                           f"/* {PORT_NAMES[p]} */")
            return out

        if every:
            lines.append("static const struct peach2_node_routes "
                         "peach2_routes[PEACH2_ROUTES_N_NODES] = {")
            for i in nodes:
                lines += node_lines(i, 4) + ["    } },"]
            lines.append("};")
        else:
            for i in nodes:
                body = node_lines(i, 0)
                body[0] = f"static const struct peach2_node_routes peach2_routes_node{i} = " \
                          + body[0]
                lines += body + ["} };", ""]
            if len(nodes) == 1:
                lines.append(f"static const struct peach2_node_routes *const "
                             f"peach2_routes_this = &peach2_routes_node{nodes[0]};")
        lines += ["", "#endif /* PEACH2_ROUTES_H */"]
        return "\n".join(lines) + "\n"


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
