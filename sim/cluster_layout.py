"""Cluster layout: which chip is cabled to which, and where each node's region lies.

A PEACH2 sub-cluster is a set of chips cabled port to port (:class:`Topology`: rings, lines and
the 2xK double ring of the papers).  Every node owns an aligned region of one shared TCA address
space (:class:`AddressMap`); :func:`default_address_map` is the layout ``peach2 routes`` uses.
Also here: the port names (``N``, ``E``, ``W``, ``S``) and the 64-bit checks that the route
modules (:mod:`peach2.sim.routes` and its parts) and the host driver model share.
"""

import re
from collections import deque
from dataclasses import asdict, dataclass

__all__ = ["Topology", "AddressMap", "PORT_NAMES", "LINK_PORTS", "default_address_map"]

_MASK64 = (1 << 64) - 1
PORT_NAMES = ("N", "E", "W", "S")
LINK_PORTS = ("E", "W", "S")
#: Limits of :meth:`Topology.parse` (a sub-cluster has at most 16 nodes).
MAX_NODES = 16
MAX_RING = 16
MAX_DOUBLE_RING = 8


def _port_number(port):
    if isinstance(port, str):
        if port not in PORT_NAMES:
            raise ValueError(f"port must be one of {PORT_NAMES} or 0..3, not {port!r}")
        return PORT_NAMES.index(port)
    port = int(port)
    if not 0 <= port < 4:
        raise ValueError(f"port must be 0..3 (N, E, W, S), not {port}")
    return port


def _u64(name, value):
    value = int(value)
    if not 0 <= value <= _MASK64:
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


@dataclass(frozen=True)
class AddressMap:
    """The shared TCA address space: one region per node, with host and GPU windows.

    Every node's region has the same layout (002 section 3.5): the host window at offset 0, then
    GPU window ``i`` at ``gpu_start + i * gpu_size``, where ``gpu_start`` is ``host_size``
    rounded up to ``gpu_size``.  Node ``n``'s region starts at ``tca_base + n * node_size``, so
    the address bits above ``node_size`` pick the node.

    Parameters
    ----------
    tca_base : int
        Bus address of node 0's region (the TCA BAR), aligned to ``node_size``.
    node_size : int
        Bytes of one node's region; a power of two.
    host_size, gpu_size : int
        Bytes of the host window and of each GPU window; powers of two.
    n_gpus : int
        GPU windows per node.
    """
    tca_base: int
    node_size: int
    host_size: int
    gpu_size: int
    n_gpus: int = 0

    def __post_init__(self):
        for name in ("node_size", "host_size", "gpu_size"):
            v = getattr(self, name)
            if v <= 0 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two, not {v:#x}")
        if self.n_gpus < 0:
            raise ValueError(f"n_gpus must not be negative, not {self.n_gpus}")
        if self.tca_base % self.node_size:
            raise ValueError(f"tca_base {self.tca_base:#x} must be aligned to node_size "
                             f"{self.node_size:#x} so that upper address bits pick the node")
        if self.used > self.node_size:
            raise ValueError(f"host window + {self.n_gpus} GPU windows need {self.used:#x} "
                             f"bytes, more than node_size {self.node_size:#x}")
        _u64("tca_base", self.tca_base)

    @property
    def gpu_start(self):
        """Offset of GPU window 0 in a node's region."""
        return -(-self.host_size // self.gpu_size) * self.gpu_size

    @property
    def used(self):
        """Bytes of a region covered by windows."""
        return self.gpu_start + self.n_gpus * self.gpu_size if self.n_gpus else self.host_size

    @property
    def mask(self):
        """The route-entry mask that keeps the node-selecting address bits."""
        return ~(self.node_size - 1) & _MASK64

    def region(self, node):
        """Return ``(base, size)`` of ``node``'s region."""
        if node < 0:
            raise ValueError(f"node must not be negative, not {node}")
        base = self.tca_base + node * self.node_size
        _u64(f"region of node {node}", base + self.node_size - 1)
        return base, self.node_size

    def window(self, node, window):
        """Return ``(base, size)`` of a window: ``"host"`` or ``("gpu", i)``."""
        base, _ = self.region(node)
        if window == "host":
            return base, self.host_size
        if isinstance(window, tuple) and len(window) == 2 and window[0] == "gpu":
            i = window[1]
            if not 0 <= i < self.n_gpus:
                raise ValueError(f"GPU window {i} out of range 0..{self.n_gpus - 1}")
            return base + self.gpu_start + i * self.gpu_size, self.gpu_size
        raise ValueError(f'window must be "host" or ("gpu", i), not {window!r}')

    def gpu_base(self, node, i):
        """Return the TCA address of GPU window ``i`` of ``node`` (a DMA or PIO destination)."""
        return self.window(node, ("gpu", i))[0]

    def node_of(self, address):
        """Return the node whose region holds ``address`` (``None`` below ``tca_base``)."""
        if address < self.tca_base:
            return None
        return (address - self.tca_base) // self.node_size

    def to_dict(self):
        """Return the fields as a JSON-able dict (``AddressMap(**d)`` reads it back)."""
        return asdict(self)


DEFAULT_TCA_BASE = 0x8000_0000_0000_0000
DEFAULT_NODE_SIZE = 1 << 32
DEFAULT_HOST_SIZE = 1 << 20


def default_address_map(*, tca_base=DEFAULT_TCA_BASE, node_size=DEFAULT_NODE_SIZE,
                        host_size=DEFAULT_HOST_SIZE):
    """The layout of ``peach2 routes`` (that of ``peach2.sim.cluster.default_address_map``)."""
    return AddressMap(tca_base=tca_base, node_size=node_size, host_size=host_size,
                      gpu_size=host_size)
