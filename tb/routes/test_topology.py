"""Topology, AddressMap and routes_for of the host driver model (pure Python)."""

import itertools

import pytest

from peach2.csr.regmap import MAX_ROUTES
from peach2.routes import AddressMap, RouteTableFull, Topology, match_route, routes_for
from peach2.routes.tables import merged_ranges

PORT_NUMBER = {"N": 0, "E": 1, "W": 2, "S": 3}
AMAP = AddressMap(tca_base=0x40_0000_0000, node_size=1 << 32, host_size=1 << 30,
                  gpu_size=1 << 28, n_gpus=4)


def walk(topo, src, dst):
    """Follow next hops from src; return the nodes visited (ends at dst or raises)."""
    path, node = [src], src
    for _ in range(topo.n_nodes):
        if node == dst:
            return path
        node = topo.neighbours(node)[topo.next_hop(node, dst)]
        path.append(node)
    raise AssertionError(f"no arrival {src}->{dst}: {path}")


def test_double_ring_2x4():
    topo = Topology.double_ring(4)
    assert topo.n_nodes == 8
    assert topo.neighbours(0) == {"E": 1, "W": 3, "S": 4}
    assert topo.neighbours(6) == {"E": 7, "W": 5, "S": 2}
    assert topo.diameter == 3                               # farthest node: 3 hops
    assert max(topo.hops(0, d) for d in range(8)) == 3
    assert topo.hops(0, 6) == 3 and topo.hops(1, 4) == 2
    for src, dst in itertools.product(range(8), repeat=2):
        path = walk(topo, src, dst)
        assert len(path) - 1 == topo.hops(src, dst) == topo.hops(dst, src)
    for node in range(8):
        assert len(routes_for(topo, AMAP, node, n_routes=8)) <= 8


@pytest.mark.parametrize("topo", [Topology.double_ring(2), Topology.double_ring(3),
                                  Topology.double_ring(4), Topology.double_ring(8),
                                  Topology.ring(2), Topology.ring(5), Topology.ring(16)],
                         ids=["2x2", "2x3", "2x4", "2x8", "ring2", "ring5", "ring16"])
def test_routes_match_next_hops(topo):
    """Every address of every region goes to the next hop; outside the regions nothing does."""
    for node in range(topo.n_nodes):
        entries = routes_for(topo, AMAP, node, n_routes=MAX_ROUTES)
        runs = 1 + sum(topo.next_hop(node, d) != topo.next_hop(node, d + 1)
                       for d in range(topo.n_nodes - 1))
        assert len(entries) <= runs
        for dst in range(topo.n_nodes):
            base, size = AMAP.region(dst)
            want = PORT_NUMBER[topo.next_hop(node, dst)]
            for a in (base, base + 0x1234_5678, base + size - 1):
                assert match_route(entries, a) == want, (node, dst, hex(a))
        assert match_route(entries, AMAP.tca_base - 1) is None
        assert match_route(entries, AMAP.region(topo.n_nodes - 1)[0] + AMAP.node_size) is None
        assert match_route(entries, 0) is None
        assert match_route(entries, AMAP.region(node)[0] + 4) == 0       # own region: N


def test_routes_are_deterministic_and_compact():
    topo = Topology.double_ring(4)
    assert routes_for(topo, AMAP, 2) == routes_for(topo, AMAP, 2)
    # Node 2 next hops E W N E E W S E: a background E entry and four exceptions.
    assert len(routes_for(topo, AMAP, 2)) == 5
    assert all(len(routes_for(Topology.double_ring(8), AMAP, n)) <= 8 for n in range(16))
    # Ties go to the first port of `prefer`.
    assert topo.next_hop(0, 2) == "E"
    assert topo.next_hop(0, 2, prefer=("W", "E", "S")) == "W"
    assert topo.next_hop(0, 5) == "E" and topo.next_hop(0, 5, prefer=("S", "E", "W")) == "S"


def test_printer_is_minimal():
    """The entry compression is optimal (checked exhaustively on short strings)."""
    assert len(merged_ranges(list("aaabbb"))) == 2
    assert len(merged_ranges(list("aba"))) == 2
    assert len(merged_ranges(list("abcabc"))) == 5

    def brute(s):
        n = len(s)
        ranges = [(i, j, c) for i in range(n) for j in range(i, n) for c in set(s)]
        for k in range(1, n + 1):
            for combo in itertools.product(ranges, repeat=k):
                if all(next((c for i, j, c in combo if i <= x <= j), None) == s[x]
                       for x in range(n)):
                    return k
    for s in ["abab", "abcb", "abca", "abba", "aabab"]:
        got = merged_ranges(list(s))
        assert len(got) == brute(s), s
        assert [next(c for i, j, c in got if i <= x <= j) for x in range(len(s))] == list(s)


def test_route_table_full():
    topo = Topology.ring(16)
    with pytest.raises(RouteTableFull, match="needs 3 route entries, the chip has 2"):
        routes_for(topo, AMAP, 5, n_routes=2)


def test_address_map():
    assert AMAP.region(3) == (0x40_0000_0000 + 3 * (1 << 32), 1 << 32)
    assert AMAP.window(3, "host") == (AMAP.region(3)[0], 1 << 30)
    assert AMAP.window(3, ("gpu", 2)) == (AMAP.region(3)[0] + (1 << 30) + 2 * (1 << 28),
                                          1 << 28)
    assert AMAP.node_of(AMAP.window(6, ("gpu", 3))[0] + 5) == 6
    assert AMAP.node_of(0) is None
    assert AMAP.mask == 0xffff_ffff_0000_0000
    odd = AddressMap(tca_base=0, node_size=1 << 20, host_size=1 << 12, gpu_size=1 << 16,
                     n_gpus=2)
    assert odd.window(0, ("gpu", 0))[0] == 1 << 16               # aligned to its size
    with pytest.raises(ValueError, match="power of two"):
        AddressMap(tca_base=0, node_size=3 << 20, host_size=1 << 12, gpu_size=1 << 12)
    with pytest.raises(ValueError, match="aligned"):
        AddressMap(tca_base=0x1000, node_size=1 << 20, host_size=1 << 12, gpu_size=1 << 12)
    with pytest.raises(ValueError, match="more than node_size"):
        AddressMap(tca_base=0, node_size=1 << 20, host_size=1 << 20, gpu_size=1 << 12,
                   n_gpus=1)
    with pytest.raises(ValueError, match="out of range"):
        AMAP.window(0, ("gpu", 4))
    with pytest.raises(ValueError, match="window must be"):
        AMAP.window(0, "gpu")


def test_topology_checks():
    with pytest.raises(ValueError, match="no way back"):
        Topology(2, {(0, "E"): 1})
    with pytest.raises(ValueError, match="link port"):
        Topology(2, {(0, "N"): 1, (1, "N"): 0})
    with pytest.raises(ValueError, match="out of range"):
        Topology(2, {(0, "E"): 2})
    split = Topology(4, {(0, "E"): 1, (1, "W"): 0, (2, "E"): 3, (3, "W"): 2})
    with pytest.raises(ValueError, match="cannot be reached"):
        routes_for(split, AMAP, 0)
