"""Topologies: which chip is cabled to which, and by which cables.

A PEACH2 sub-cluster is a set of chips cabled port to port (:class:`Topology`: rings, lines and
the 2xK double ring of the papers); :func:`cable_plan` pairs each link with the port at its far
end.  Also here: the port names (``N``, ``E``, ``W``, ``S``) and the 64-bit checks that the
route modules and the host driver model share (:func:`port_number`, :func:`check_u64`).
"""

import re
from collections import deque

__all__ = ["Topology", "cable_plan", "PORT_NAMES", "LINK_PORTS", "MAX_NODES", "MAX_RING",
           "MAX_DOUBLE_RING", "MASK64", "port_number", "check_u64"]

MASK64 = (1 << 64) - 1
PORT_NAMES = ("N", "E", "W", "S")
LINK_PORTS = ("E", "W", "S")
#: Limits of :meth:`Topology.parse` (a sub-cluster has at most 16 nodes).
MAX_NODES = 16
MAX_RING = 16
MAX_DOUBLE_RING = 8


def port_number(port):
    """Return a port's number 0..3 from its name (``"N"``, ``"E"``, ``"W"``, ``"S"``) or number."""
    if isinstance(port, str):
        if port not in PORT_NAMES:
            raise ValueError(f"port must be one of {PORT_NAMES} or 0..3, not {port!r}")
        return PORT_NAMES.index(port)
    port = int(port)
    if not 0 <= port < 4:
        raise ValueError(f"port must be 0..3 (N, E, W, S), not {port}")
    return port


def check_u64(name, value):
    """Return ``value`` as an int, or raise ``ValueError`` naming ``name`` if it does not fit 64 bits."""
    value = int(value)
    if not 0 <= value <= MASK64:
        raise ValueError(f"{name} must fit 64 bits, not {value:#x}")
    return value


class Topology:
    """Which node each link port (E, W, S) of each node is cabled to.

    Parameters
    ----------
    n_nodes : int
    links : dict
        ``{(node, port): neighbour}`` with port ``"E"``, ``"W"`` or ``"S"``.  Links are
        bidirectional: if ``(a, p)`` reaches ``b``, some port of ``b`` must reach ``a``.
    name : str or None
        How :meth:`parse` spells it (``"ring:4"``, ``"line:3"``, ``"2x8"``); set by the
        constructors below.

    Members
    -------
    n_nodes : int
    links : dict
    name : str or None
    """

    def __init__(self, n_nodes, links, *, name=None):
        if n_nodes < 1:
            raise ValueError(f"a topology needs at least one node, not {n_nodes}")
        self.n_nodes = n_nodes
        self.links = dict(links)
        self.name = name
        for (node, port), peer in self.links.items():
            if port not in LINK_PORTS:
                raise ValueError(f"link port must be one of {LINK_PORTS}, not {port!r}")
            for n in (node, peer):
                if not 0 <= n < n_nodes:
                    raise ValueError(f"node {n} out of range 0..{n_nodes - 1}")
            if not any(p == peer and nb == node for (p, _), nb in self.links.items()):
                raise ValueError(f"link {node}.{port} -> {peer} has no way back from node "
                                 f"{peer}")
        self._nbs = [{p: self.links[(n, p)] for p in LINK_PORTS if (n, p) in self.links}
                     for n in range(n_nodes)]
        self._dist = [self._bfs(src) for src in range(n_nodes)]

    @classmethod
    def ring(cls, n):
        """Return a ring of ``n`` nodes: E of node i goes to i+1, W to i-1 (modulo n)."""
        if n < 2:
            raise ValueError(f"a ring needs at least 2 nodes, not {n}")
        links = {}
        for i in range(n):
            links[(i, "E")] = (i + 1) % n
            links[(i, "W")] = (i - 1) % n
        return cls(n, links, name=f"ring:{n}")

    @classmethod
    def line(cls, n):
        """Return a line of ``n`` nodes: E of node i goes to i+1, W of node i+1 to i."""
        if n < 2:
            raise ValueError(f"a line needs at least 2 nodes, not {n}")
        links = {}
        for i in range(n - 1):
            links[(i, "E")] = i + 1
            links[(i + 1, "W")] = i
        return cls(n, links, name=f"line:{n}")

    @classmethod
    def double_ring(cls, k):
        """Return the 2xK double ring of the papers (2x4, 2x8 sub-clusters).

        Nodes ``0..k-1`` form ring A and ``k..2k-1`` ring B, E/W around each ring; S connects
        node ``i`` of ring A with node ``k+i`` of ring B.
        """
        if k < 2:
            raise ValueError(f"each ring needs at least 2 nodes, not {k}")
        links = {}
        for ring in (0, k):
            for i in range(k):
                links[(ring + i, "E")] = ring + (i + 1) % k
                links[(ring + i, "W")] = ring + (i - 1) % k
        for i in range(k):
            links[(i, "S")] = k + i
            links[(k + i, "S")] = i
        return cls(2 * k, links, name=f"2x{k}")

    @classmethod
    def parse(cls, text):
        """Return the topology named ``"ring:K"``, ``"line:K"`` (K 2..16) or ``"2xK"`` (K 2..8).

        Raises
        ------
        ValueError
            With a message saying what is wrong and what is accepted.
        """
        spec = str(text).strip().lower()
        kinds = "ring:K or line:K (K 2..16) or 2xK (K 2..8)"
        if spec.startswith(("ring:", "line:")):
            kind, _, k = spec.partition(":")
            limit = MAX_RING
        elif spec.startswith("2x"):
            kind, k, limit = "2x", spec[2:], MAX_DOUBLE_RING
        else:
            raise ValueError(f"topology {text!r} is not {kinds}")
        if not k.isdigit():
            raise ValueError(f"topology {text!r}: K must be a whole number, not {k!r} "
                             f"({kinds})")
        k = int(k)
        if not 2 <= k <= limit:
            what = "2xK double ring" if kind == "2x" else f"{kind}:K"
            nodes = f" ({2 * k} nodes; a sub-cluster has at most {MAX_NODES})" \
                if kind == "2x" else ""
            raise ValueError(f"topology {text!r}: a {what} needs K in 2..{limit}, not {k}"
                             f"{nodes}")
        return {"ring": cls.ring, "line": cls.line, "2x": cls.double_ring}[kind](k)

    @property
    def label(self):
        """:attr:`name`, or ``"custom (n nodes)"``."""
        return self.name or f"custom ({self.n_nodes} nodes)"

    def __eq__(self, other):
        return (isinstance(other, Topology) and self.n_nodes == other.n_nodes
                and self.links == other.links)

    def __hash__(self):
        return hash((self.n_nodes, tuple(sorted(self.links.items()))))

    def __repr__(self):
        return f"Topology({self.label})"

    def to_dict(self):
        """Return a JSON-able description (:meth:`from_dict` reads it back).

        Links are listed as ``"node.port->neighbour"`` (``"0.E->1"``).
        """
        return {"name": self.name, "n_nodes": self.n_nodes,
                "links": [f"{n}.{p}->{peer}" for (n, p), peer in sorted(self.links.items())]}

    @classmethod
    def from_dict(cls, data):
        """Return the topology of :meth:`to_dict`."""
        links = {}
        for link in data["links"]:
            m = re.fullmatch(r"\s*(\d+)\.([EWS])->(\d+)\s*", str(link))
            if m is None:
                raise ValueError(f"link {link!r} is not written as node.port->neighbour "
                                 f"(\"0.E->1\")")
            links[(int(m[1]), m[2])] = int(m[3])
        return cls(int(data["n_nodes"]), links, name=data.get("name"))

    def neighbours(self, node):
        """Return ``{port: node}`` of the links of ``node``."""
        return dict(self._nbs[node])

    def _bfs(self, src):
        dist = [None] * self.n_nodes
        dist[src] = 0
        queue = deque([src])
        while queue:
            n = queue.popleft()
            for nb in self._nbs[n].values():
                if dist[nb] is None:
                    dist[nb] = dist[n] + 1
                    queue.append(nb)
        return dist

    def hops(self, src, dst):
        """Return the number of links on a shortest path from ``src`` to ``dst``."""
        d = self._dist[src][dst]
        if d is None:
            raise ValueError(f"node {dst} cannot be reached from node {src}")
        return d

    @property
    def diameter(self):
        """The largest number of hops between two nodes."""
        return max(self.hops(a, b) for a in range(self.n_nodes) for b in range(self.n_nodes))

    def next_hop(self, src, dst, *, prefer=LINK_PORTS):
        """Return the port by which ``src`` sends towards ``dst`` (``"N"`` when equal).

        The port leads to a neighbour one hop closer to ``dst``; among several such ports the
        first in ``prefer`` wins, so every node decides the same way.
        """
        if src == dst:
            return "N"
        d = self.hops(src, dst)
        nbs = self._nbs[src]
        for port in prefer:
            if port in nbs and self.hops(nbs[port], dst) == d - 1:
                return port
        raise AssertionError("unreachable: a shortest path always has a next hop")


_OPPOSITE = {"E": "W", "W": "E", "S": "S"}


def cable_plan(topology):
    """Return the cables of ``topology`` as ``[(a, port_a, b, port_b)]`` (ports upper-case).

    Each link ``(a, p) -> b`` is paired with a port of ``b`` leading back to ``a``; among
    several, the opposite port of ``p`` (E-W, S-S) wins, then E, W, S order.  A ring of two
    nodes (``Topology.ring(2)``) is thus two cables, 0.E-1.W and 0.W-1.E.
    """
    free = dict(topology.links)
    cables = []
    for (a, p), b in sorted(topology.links.items()):
        if (a, p) not in free:
            continue
        back = [q for q in LINK_PORTS if free.get((b, q)) == a and (b, q) != (a, p)]
        if not back:
            raise ValueError(f"link {a}.{p} -> {b}: no free port of node {b} leads back")
        q = _OPPOSITE[p] if _OPPOSITE[p] in back else back[0]
        del free[(a, p)], free[(b, q)]
        cables.append((a, p, b, q))
    return cables
