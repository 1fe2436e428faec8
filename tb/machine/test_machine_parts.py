"""The machine's pieces that need no simulator: node memory backed by foreign bytes, MPI ranks
of a partition on the partitioned switch, the sub-cluster plan."""

import pytest

from peach2.sim.machine import Machine
from peach2.sim.mpi import MPIError
from peach2.sim.node import Node
from peach2.sim.system import WINDOW_PS, MachinePlan, MpiAllToAll, PartitionWorld, back


def test_backed_memory_reads_and_writes_the_window_and_keeps_the_rest():
    node = Node()
    window = bytearray(100)
    host0 = back(node.memory("host0"), window, 100)
    host0.store(host0.base + 95, b"0123456789")          # straddles the window's end
    assert window[95:] == b"01234"
    assert host0.load(host0.base + 90, 20) == bytes(5) + b"0123456789" + bytes(5)
    # the HCA's path to it (across QPI from CPU1) moves the window's bytes
    window[0:4] = b"abcd"
    t, data = node.dma("hca").read(1_000, host0.base, 4)
    assert data == b"abcd" and t > 1_000
    assert node.dma("hca").kind(host0.base) == "host"
    assert node.dma("hca").kind(node.memory("gpu0").base) == "qpi"
    with pytest.raises(ValueError):
        host0.load(host0.base + host0.size - 2, 4)


def test_plan_cables_stay_inside_each_subcluster():
    plan = MachinePlan("2x2", 3)
    assert (plan.n, plan.n_nodes) == (4, 12)
    for a, _, b, _ in plan.cables(3):
        assert plan.subcluster_of(a) == plan.subcluster_of(b)
    assert len(plan.cables(3)) == 3 * len(plan.cables(1))
    with pytest.raises(ValueError):
        MachinePlan("2x2", 0)


def _mpi_machine(window_ps):
    plan = MachinePlan("2x2", 2)
    machine = Machine(2, 4, window_ps=window_ps)
    traffic = MpiAllToAll(plan, 5, 2048)
    worlds = []
    for part in machine.partitions:
        world = PartitionWorld(part, {g: Node() for g in part.ports}, traffic.peers)
        world.start(traffic.setup(world), 1_000_000)
        worlds.append(world)
    t = 0
    while not all(w.finished for w in worlds):
        t += WINDOW_PS
        machine.run_until(t - 1)
    assert sum(traffic.check(g) for g in range(8)) > 0
    return {g: w.results[g] for w in worlds for g in w.ranks}


def test_mpi_all_to_all_across_partitions_is_byte_exact_and_window_independent():
    results = _mpi_machine(WINDOW_PS)
    assert len(results) == 8 and all(len(v) == 8 for v in results.values())
    assert _mpi_machine(1_000) == results            # any window <= lookahead: same times


def test_a_rank_without_a_queue_pair_to_a_peer_is_refused():
    machine = Machine(2, 2)
    part = machine.partition(0)
    world = PartitionWorld(part, {g: Node() for g in part.ports},
                           lambda g: [h for h in range(4) if h // 2 != g // 2])
    buf = world.rank(0).alloc(8)
    with pytest.raises(ValueError, match="no queue pair"):
        world.rank(0).isend(buf, 1, 0)                  # same partition: not a peer
        machine.run_until(10_000_000)
    with pytest.raises(MPIError):
        world.rank(0).isend(buf, 9, 0)                  # no such rank
