"""The output formats of :class:`~peach2.sim.routes.RouteSet`: JSON, Markdown and a C header.

:class:`RouteSetFormats` is a mixin that :class:`~peach2.sim.routes.RouteSet` inherits, so its
methods are the route set's own (``rs.to_json()``, ``RouteSet.from_json(text)``,
``rs.to_markdown()``, ``rs.to_c_header()``, ``rs.cost_line(other)``); they read the route set's
tables, offsets, statistics and CDG verdict.  ``peach2 routes`` prints them
(``docs/routes.md``).  The hop table of both policies over several topologies,
:func:`~peach2.sim.routes.cost_table`, is in :mod:`peach2.sim.routes` (it builds route sets).
"""

import json

from .cluster_layout import PORT_NAMES, AddressMap, Topology, _port_number
from .route_tables import RoutingError

__all__ = ["RouteSetFormats", "JSON_FORMAT", "JSON_VERSION"]

JSON_FORMAT = "peach2-routes"
JSON_VERSION = 1


def _int(value):
    return int(value, 0) if isinstance(value, str) else int(value)


class RouteSetFormats:
    """JSON, Markdown and C header of a route set (the methods of :class:`RouteSet`)."""

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
                            _port_number(e["port"])) for e in s["entries"]]
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
               f"bytes (route mask {amap.mask:#x}); host window {amap.host_size:#x} bytes.", ""]
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

    def to_c_header(self, nodes=None):
        """Return a C header with an initialiser of every chip's (or ``nodes``') table.

        Bring-up code writes, for its node: ``ROUTE_TARGET[i] = 0`` for every entry, then
        ``ROUTE_MASK/LOWER/UPPER[i]`` and ``ROUTE_TARGET[i] = port | enable`` for each entry
        listed, ``OFFSET``, ``NODE`` and finally ``CONTROL`` (what ``Driver.program_routes``
        does; register offsets in the header of ``peach2 regmap --format c``).
        """
        nodes = range(self.n_nodes) if nodes is None else [self._node(i) for i in nodes]
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
            "of N. */",
            "#ifndef PEACH2_ROUTES_H", "#define PEACH2_ROUTES_H", "", "#include <stdint.h>", "",
            f"#define PEACH2_ROUTES_N_NODES {len(nodes)}u",
            f"#define PEACH2_ROUTES_MAX_ENTRIES {width}u", "",
            "struct peach2_route_entry {", "    uint64_t mask, lower, upper;",
            "    uint8_t port;", "};", "",
            "struct peach2_node_routes {", "    uint8_t node, n_entries;",
            "    uint64_t offset, phys_base;",
            "    struct peach2_route_entry entry[PEACH2_ROUTES_MAX_ENTRIES];", "};", "",
            "static const struct peach2_node_routes "
            "peach2_routes[PEACH2_ROUTES_N_NODES] = {"]
        for i in nodes:
            lines.append(f"    {{ {i}, {len(self._tables[i])}, {self.offset(i):#018x}ull, "
                         f"{self._phys[i]:#x}ull, {{")
            for m, lo, hi, p in self._tables[i]:
                lines.append(f"        {{ {m:#018x}ull, {lo:#018x}ull, {hi:#018x}ull, {p} }}, "
                             f"/* {PORT_NAMES[p]} */")
            lines.append("    } },")
        lines += ["};", "", "#endif /* PEACH2_ROUTES_H */"]
        return "\n".join(lines) + "\n"
