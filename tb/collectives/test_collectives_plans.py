"""The collectives' plans without a simulator: every descriptor executed in Python, in an order
the flags allow, must give the reference result; the shapes 000 describes (one chain per
forwarding node, log2(p) steps, one sender per receiver per halo phase) are checked."""

import random
import subprocess
import sys

import pytest

from peach2.routes import default_address_map
from peach2.sim.collectives import (
    INLINE_MAX,
    HaloGrid,
    Memories,
    Place,
    allgather,
    allgather_reference,
    broadcast,
    broadcast_reference,
    direct_allgather,
    direct_broadcast,
    halo_exchange,
    halo_local,
    halo_reference,
    log2_exact,
    puts,
    ring_allgather,
)

HOST = 1 << 20
BUS = 0x4_0000_0000          # node n's host window memory sits at BUS * (n + 1) on its host


class _Cluster:
    """Just what ``Memories`` asks of a cluster: the map, the node count, the host memories."""

    def __init__(self, n):
        self.n_nodes = n
        self.address_map = default_address_map(n, host_size=HOST)
        self.mem = [bytearray(random.Random(n * 100 + i).randbytes(HOST)) for i in range(n)]

    def memory(self, node):
        return BUS * (node + 1), self.mem[node]


def execute(coll, cluster):
    """Run every step whose flags are set, descriptor by descriptor, until none is left;
    return the order of (node, step) run.  Completion writes set the receiver's flag."""
    amap = cluster.address_map
    for place in coll.flags:
        cluster.mem[place.node][place.offset:place.offset + 4] = bytes(4)
    pending = {(p.node, i): s for p in coll.programs for i, s in enumerate(p.steps)}
    done_steps, order = set(), []
    while pending:
        ready = [k for k, s in sorted(pending.items())
                 if (k[0], k[1] - 1) not in pending
                 and all(int.from_bytes(cluster.mem[pl.node][pl.offset:pl.offset + 4],
                                        "little") == v for pl, v in s.wait)]
        assert ready, f"no step can start: {sorted(pending)} wait forever"
        for key in ready:
            node = key[0]
            for t in pending.pop(key).transfers:
                src = t.src - BUS * (node + 1)
                for b in range(t.bursts):
                    s0 = src + b * (t.length + t.src_gap)
                    d = t.dst + b * (t.length + t.dst_gap)
                    dn, doff = amap.node_of(d), d - amap.window(amap.node_of(d), "host")[0]
                    cluster.mem[dn][doff:doff + t.length] = cluster.mem[node][s0:s0 + t.length]
                dn = amap.node_of(t.seq_addr)
                off = t.seq_addr - amap.window(dn, "host")[0]
                cluster.mem[dn][off:off + 4] = t.seq_value.to_bytes(4, "little")
            done_steps.add(key)
            order.append(key)
    for p in coll.programs:
        for pl, v in p.done:
            assert int.from_bytes(cluster.mem[pl.node][pl.offset:pl.offset + 4], "little") == v
    return order


@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("root", [0, 3])
def test_broadcast_plan(p, root):
    cluster = _Cluster(p)
    mem = Memories(cluster)
    root %= p
    buf, size = mem.symmetric(333), 333
    data = random.Random(p).randbytes(size)
    mem.write(Place(root, "host", buf), data)
    coll = broadcast(mem, list(range(p)), buf, size, root=root)
    chains = [len(s.transfers) for prog in coll.programs for s in prog.steps]
    assert sum(chains) == p - 1                         # every node but the root gets one
    assert all(len(prog.steps) <= 1 for prog in coll.programs)      # one chain per node
    assert max(chains) == log2_exact(p)                 # the root's chain: log2(p) sends
    assert max(step for step, _, _ in coll.info["sends"]) == log2_exact(p)
    execute(coll, cluster)
    for node, want in enumerate(broadcast_reference(data, p)):
        assert mem.read(Place(node, "host", buf), size) == want


def _blocks(p, size):
    """A cluster of ``p`` nodes with node ``r``'s random block at ``buf + r * size``:
    ``(cluster, mem, buf, blocks)``."""
    cluster = _Cluster(p)
    mem = Memories(cluster)
    buf = mem.symmetric(p * size)
    blocks = [random.Random(k).randbytes(size) for k in range(p)]
    for r in range(p):
        mem.write(Place(r, "host", buf + r * size), blocks[r])
    return cluster, mem, buf, blocks


def _gathered(coll, cluster, mem, buf, blocks):
    """Execute ``coll``; every node holds every block."""
    execute(coll, cluster)
    for node, want in enumerate(allgather_reference(blocks)):
        assert mem.read(Place(node, "host", buf), len(want)) == want


@pytest.mark.parametrize("p,size", [(2, 1), (4, 3), (8, 16), (16, 5)])
def test_allgather_plan(p, size):
    cluster, mem, buf, blocks = _blocks(p, size)
    coll = allgather(mem, list(range(p)), buf, size)
    assert all(len(prog.steps) == log2_exact(p) for prog in coll.programs)
    _gathered(coll, cluster, mem, buf, blocks)


def _reads_only_what_it_waited_for(coll, cluster, buf, size):
    """Every descriptor sends only bytes its node held at the start or that arrived with a
    completion write the node waited for before this step (a step's chain runs on its own
    channel, so nothing else orders it after earlier arrivals); ``done`` covers every byte."""
    amap = cluster.address_map
    delivered = {}                  # (node, flag offset) -> block indices it brings
    for prog in coll.programs:
        for step in prog.steps:
            for t in step.transfers:
                dn = amap.node_of(t.seq_addr)
                first = (t.dst - amap.window(dn, "host")[0] - buf) // size
                delivered[(dn, t.seq_addr - amap.window(dn, "host")[0])] = set(
                    range(first, first + t.length // size))
    for g, prog in enumerate(coll.programs):
        held = {g}
        for step in prog.steps:
            for place, _ in step.wait:
                held |= delivered[(place.node, place.offset)]
            for t in step.transfers:
                first = (t.src - BUS * (prog.node + 1) - buf) // size
                assert set(range(first, first + t.length // size)) <= held, (g, first)
        for place, _ in prog.done:
            held |= delivered[(place.node, place.offset)]
        assert held == set(range(len(coll.programs))), (g, sorted(held))


@pytest.mark.parametrize("p,ring,steps", [(2, None, 1), (3, None, 1), (5, None, 2),
                                          (8, None, 4), (8, 4, 3), (16, 8, 5), (8, 2, 3),
                                          (4, 1, 2), (16, 4, 4)])
def test_ring_allgather_plan(p, ring, steps):
    """The ring Allgather gives the reference result in ``ceil((K-1)/2) + log2(p/K)`` steps;
    a ring step sends one block to each ring neighbour, nothing else; every byte sent was
    waited for."""
    size = 7
    cluster, mem, buf, blocks = _blocks(p, size)
    coll = ring_allgather(mem, list(range(p)), buf, size, ring=ring)
    assert coll.info["steps"] == steps
    assert all(len(prog.steps) == steps for prog in coll.programs)
    k = ring or p
    amap = cluster.address_map
    for g, prog in enumerate(coll.programs):
        j, i = divmod(g, k)
        neighbours = {j * k + (i + 1) % k, j * k + (i - 1) % k} - {g}
        for s, step in enumerate(prog.steps):
            dests = [amap.node_of(t.dst) for t in step.transfers]
            assert len(dests) == len(set(dests))
            if s < steps - (p // k).bit_length() + 1:
                assert set(dests) <= neighbours and all(t.length == size
                                                        for t in step.transfers)
    _reads_only_what_it_waited_for(coll, cluster, buf, size)
    _gathered(coll, cluster, mem, buf, blocks)


def test_recursive_doubling_reads_only_what_it_waited_for():
    cluster = _Cluster(16)
    mem = Memories(cluster)
    buf = mem.symmetric(16 * 5)
    _reads_only_what_it_waited_for(allgather(mem, list(range(16)), buf, 5), cluster, buf, 5)


def test_ring_allgather_refusals():
    mem = Memories(_Cluster(12))
    with pytest.raises(ValueError, match="ring must divide"):
        ring_allgather(mem, list(range(12)), 0, 8, ring=5)
    with pytest.raises(ValueError, match="not a power of two"):
        ring_allgather(mem, list(range(12)), 0, 8, ring=4)
    with pytest.raises(ValueError, match="at least 1 byte"):
        ring_allgather(mem, list(range(12)), 0, 0)
    with pytest.raises(ValueError, match="ring must divide"):
        ring_allgather(mem, list(range(12)), 0, 8, ring=True)


@pytest.mark.parametrize("n,px,py", [(8, 2, 2), (16, 2, 4), (12, 3, 2), (8, 4, 2)])
@pytest.mark.parametrize("order", ["pairwise", "naive"])
def test_halo_plan(n, px, py, order):
    grid = HaloGrid(n, px, py)
    cluster = _Cluster(px * py)
    mem = Memories(cluster)
    buf = mem.symmetric(grid.local_bytes)
    whole = random.Random(n).randbytes(n ** 3 * 8)
    before = []
    for r in range(px * py):
        before.append(halo_local(grid, whole, r, mem.read(Place(r, "host", buf),
                                                          grid.local_bytes)))
        mem.write(Place(r, "host", buf), before[-1])
    coll = halo_exchange(mem, grid, list(range(px * py)), buf, order=order)
    strided = [t for prog in coll.programs for s in prog.steps for t in s.transfers
               if t.count is not None]
    assert strided and all(t.count == grid.ni and t.length == n * 8 for t in strided)
    if order == "pairwise":     # in each phase (chain position by phase) one sender per receiver
        by_phase = {}
        for prog in coll.programs:
            for t in prog.steps[0].transfers if prog.steps else []:
                phase = (t.seq_addr - mem.tca(Place(0, "host", 0))) % (1 << 32)
                by_phase.setdefault(phase, []).append(cluster.address_map.node_of(t.dst))
        for receivers in by_phase.values():
            assert len(receivers) == len(set(receivers))
    execute(coll, cluster)
    for r in range(px * py):
        assert mem.read(Place(r, "host", buf), grid.local_bytes) == \
            halo_reference(grid, whole, r, before[r])


def test_halo_plan_of_a_box():
    """Himeno's shapes are not cubes (000 section 6.1: 64 x 64 x 128): a 4 x 8 x 12 array of
    4-byte elements over 2 x 2, every block-stride descriptor a row of Nk elements."""
    grid = HaloGrid.box((4, 8, 12), 2, 2, elem=4)
    assert (grid.ni, grid.nj, grid.nk, grid.shape) == (2, 4, 12, (4, 6, 12))
    assert grid.plane(0, 2) == (grid.offset(2, 1), 4 * 12 * 4, 1, 0)
    assert grid.plane(1, 4) == (grid.offset(1, 4), 12 * 4, 2, 5 * 12 * 4)
    cluster = _Cluster(4)
    mem = Memories(cluster)
    buf = mem.symmetric(grid.local_bytes)
    whole = random.Random(3).randbytes(4 * 8 * 12 * 4)
    before = [halo_local(grid, whole, r, random.Random(r).randbytes(grid.local_bytes))
              for r in range(4)]
    for r in range(4):
        mem.write(Place(r, "host", buf), before[r])
    execute(halo_exchange(mem, grid, list(range(4)), buf), cluster)
    for r in range(4):
        after = mem.read(Place(r, "host", buf), grid.local_bytes)
        assert after == halo_reference(grid, whole, r, before[r]) and after != before[r]
    with pytest.raises(ValueError, match="4 x 8 x 12 array does not divide into 3 x 2"):
        HaloGrid.box((4, 8, 12), 3, 2)
    with pytest.raises(ValueError, match="dims must be"):
        HaloGrid.box((4, 8), 1, 1)
    with pytest.raises(ValueError, match="global array has 7 bytes"):
        halo_local(grid, b"1234567", 0, bytes(grid.local_bytes))


def test_refusals():
    cluster = _Cluster(4)
    mem = Memories(cluster)
    with pytest.raises(ValueError, match="power-of-two"):
        broadcast(mem, [0, 1, 2], 0, 8)
    with pytest.raises(ValueError, match="at least 1 byte"):
        allgather(mem, [0, 1, 2, 3], 0, 0)
    with pytest.raises(ValueError, match="do not fit"):
        allgather(mem, [0, 1, 2, 3], HOST - 8, 4)
    with pytest.raises(ValueError, match="divide"):
        HaloGrid(10, 3, 2)
    with pytest.raises(ValueError, match="overlap"):
        puts(mem, [(Place(1, "host", 0), Place(1, "host", 4), 8)])
    with pytest.raises(ValueError, match="GPU window"):
        mem.local(Place(1, ("gpu", 0), 0))


def test_gpu_windows_from_the_cluster():
    """A place in a GPU window: TCA address in the node's GPU window, DMA source at the GPU's
    BAR as the cluster's ``gpu_memory`` gives it; an Allgather over GPU memory executes."""
    from dataclasses import replace
    cluster = _Cluster(4)
    cluster.address_map = replace(cluster.address_map, n_gpus=1)
    gpus = [bytearray(HOST) for _ in range(4)]
    cluster.gpu_memory = lambda node, i: (0x9_0000_0000 * (node + 1), gpus[node])
    mem = Memories(cluster)
    place = Place(2, ("gpu", 0), 0x40)
    assert mem.local(place) == 0x9_0000_0000 * 3 + 0x40
    assert mem.tca(place) == cluster.address_map.window(2, ("gpu", 0))[0] + 0x40
    mem.write(place, b"gpu!")
    assert gpus[2][0x40:0x44] == b"gpu!"
    coll = allgather(mem, [0, 1, 2, 3], 0x100, 8, window=("gpu", 0))
    assert all(t.src >= 0x9_0000_0000 for p in coll.programs for s in p.steps
               for t in s.transfers)


OFFLINE = r"""
import sys
sys.modules["cocotb"] = None            # any import of cocotb or cocotbext now fails
sys.modules["cocotbext"] = None
from peach2.routes import default_address_map
from peach2.sim.collectives import Memories, Place, broadcast

class Cluster:
    n_nodes = 8
    address_map = default_address_map(8, host_size=1 << 20)
    def memory(self, node):
        return 0x4_0000_0000 * (node + 1), bytearray(1 << 20)

mem = Memories(Cluster())
buf = mem.symmetric(4096)
coll = broadcast(mem, list(range(8)), buf, 4096)
print(coll.info["steps"], sum(len(s.transfers) for p in coll.programs for s in p.steps))
print(sorted(m for m in sys.modules if m.split(".")[0] in ("cocotb", "cocotbext")
             and sys.modules[m] is not None))
"""


def test_plans_build_without_cocotb():
    """A collective's plan is built offline: with cocotb blocked, importing the collectives and
    building an 8-node Broadcast works (cocotb is imported only by what runs on a simulator)."""
    run = subprocess.run([sys.executable, "-c", OFFLINE], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["3 7", "[]"]


@pytest.mark.parametrize("p", [2, 3, 8, 16])
def test_direct_plans(p):
    """The one-step Broadcast and Allgather give the reference results for any node count;
    one step per sender, a flag per sender at every receiver."""
    cluster = _Cluster(p)
    mem = Memories(cluster)
    buf, size = mem.symmetric(77), 77
    data = random.Random(p).randbytes(size)
    mem.write(Place(1 % p, "host", buf), data)
    coll = direct_broadcast(mem, list(range(p)), buf, size, root=1 % p)
    assert [len(s.transfers) for prog in coll.programs for s in prog.steps] == [p - 1]
    execute(coll, cluster)
    for node, want in enumerate(broadcast_reference(data, p)):
        assert mem.read(Place(node, "host", buf), size) == want
    cluster, mem, buf, blocks = _blocks(p, 5)
    coll = direct_allgather(mem, list(range(p)), buf, 5)
    assert all(len(prog.steps) == 1 and len(prog.done) == p - 1 for prog in coll.programs)
    _gathered(coll, cluster, mem, buf, blocks)
    with pytest.raises(ValueError):
        direct_allgather(mem, [0], buf, 5)


def test_step_path_picks_the_path_by_size_and_source():
    """``run(paths="auto")``'s choice (002 section 4.2): PIO when every transfer is one aligned
    8-byte store from the node's host memory, inline puts up to INLINE_MAX bytes a step from
    there, register mode up to four transfers from anywhere (a GPU), the chained DMA beyond;
    a forced path a step cannot take is refused with its reason."""
    from peach2.params import N_DMA_SLOTS
    from peach2.sim.collectives import PIO_MAX, step_path
    from peach2.sim.collectives.plan import Step
    from peach2.sim.driver import memcpy
    cluster = _Cluster(2)
    mem = Memories(cluster)
    src = mem.local(Place(0, "host", 0x100), INLINE_MAX)
    dst = mem.tca(Place(1, "host", 0x100), INLINE_MAX)

    def step(*transfers):
        return Step(0, list(transfers))

    def path(*transfers, paths="auto"):
        return step_path(mem, 0, step(*transfers), paths)
    assert path(memcpy(src, dst, PIO_MAX)) == "pio"
    assert path(memcpy(src, dst, 1), memcpy(src, dst + 4, 4)) == "pio"
    assert path(memcpy(src, dst + 4, 8)) == "inline"           # two 8-byte words: two stores
    assert path(memcpy(src, dst, PIO_MAX, irq=True)) == "inline"     # a store raises no MSI
    assert path(memcpy(src, dst, 8), memcpy(src, dst, INLINE_MAX - 8)) == "inline"
    assert path(memcpy(src, dst, 8), memcpy(src, dst, INLINE_MAX - 7)) == "register"
    assert path(memcpy(src, dst, 8, count=2, src_gap=8, dst_gap=8)) == "register"
    assert path(memcpy(BUS * 9, dst, 8)) == "register"     # not in node 0's host memory
    assert path(memcpy(src + HOST - 0x100 - 4, dst, 8)) == "register"   # runs past its end
    many = [memcpy(src, dst, INLINE_MAX)] * (N_DMA_SLOTS + 1)
    assert path(*many) == "dma"
    assert path(*many[:N_DMA_SLOTS]) == "register"
    assert path(memcpy(src, dst, 8), paths="dma") == "dma"
    assert path(memcpy(src, dst, 4096), paths="inline") == "inline"
    for paths, transfers, why in (
            ("pio", [memcpy(src, dst, 16)], "not one 8-byte store"),
            ("pio", [memcpy(BUS * 9, dst, 8)], "outside node 0's host memory"),
            ("inline", [memcpy(src, dst, 8, count=2, src_gap=8, dst_gap=8)], "block-stride"),
            ("register", many, "register mode has 4 slots")):
        with pytest.raises(ValueError, match=why):
            path(*transfers, paths=paths)
    with pytest.raises(ValueError, match="paths must be one of"):
        path(memcpy(src, dst, 8), paths="fast")


def test_auto_picks_a_fastest_measured_path_at_every_size():
    """The thresholds of ``paths="auto"`` against the saved kick-to-flag times of every path
    (docs/benchmarks.md, "Paths by size"; ``peach2 bench calibration``): at every measured size
    the path "auto" picks for one transfer host to neighbour host is within 5% of the fastest."""
    from peach2.sim.bench.calibration_doc import auto_path, best_paths
    from peach2.sim.bench.results import load
    measured = best_paths(load("calibration")["tca"]["paths"])
    assert len(measured) >= 8 and max(measured) >= 4096
    for size, (best, ns, times) in measured.items():
        pick = auto_path(size)
        assert times[pick] <= 1.05 * ns, (size, pick, times)
