"""The machine's synchronisation in one process (no simulator, no MPI): the window bound, the
partitioned fabric against the unpartitioned :class:`Fabric`, ties, exact cross-partition
times, independence from the window length, attached models, and the time kept at edges.

Expected times come from :class:`Params` fields or from a :class:`Fabric` run of the same
sends, never from numbers copied out of a run.
"""

import time

import pytest

from peach2.sim.infiniband import Fabric, Params
from peach2.sim.machine import Layout, LocalTransport, Machine, Transport
from peach2.sim.machine.traffic import alltoall_sends, install, random_sends, record, run_fabric

P = Params()
LOOKAHEAD = P.cable_ps + P.switch_ps


def machine_run(sends, n_partitions, ports, **kwargs):
    machine = Machine(n_partitions, ports, **kwargs)
    install(machine, sends)
    machine.run()
    return record(machine)


def by_message(records):
    return {(r[1], r[2]): r for r in records}


# -- (a) the window bound ---------------------------------------------------------------------

def test_lookahead_is_cable_plus_switch():
    machine = Machine(2, 2)
    assert machine.lookahead_ps == P.cable_ps + P.switch_ps == 115_000
    assert machine.window_ps == machine.lookahead_ps
    assert machine.lookahead_ps < P.lookahead_ps()         # the whole path is longer


@pytest.mark.parametrize("window", [LOOKAHEAD + 1, P.lookahead_ps(), 10 * LOOKAHEAD])
def test_a_window_longer_than_the_lookahead_is_refused(window):
    with pytest.raises(ValueError, match="longer than the lookahead"):
        Machine(2, 2, window_ps=window)


@pytest.mark.parametrize("window", [0, -5, 1.5, True])
def test_a_window_that_is_no_length_is_refused(window):
    with pytest.raises(ValueError, match="window_ps"):
        Machine(2, 2, window_ps=window)


def test_no_lookahead_cannot_be_partitioned():
    with pytest.raises(ValueError, match="no lookahead"):
        Machine(2, 2, Params(cable_m=0.0, switch_ps=0))


def test_layout_and_placement():
    layout = Layout(3, [2, 1, 3])
    assert [list(layout.ports(p)) for p in range(3)] == [[0, 1], [2], [3, 4, 5]]
    assert [layout.partition_of(q) for q in range(6)] == [0, 0, 1, 2, 2, 2]
    with pytest.raises(ValueError, match="not on the switch"):
        layout.partition_of(6)
    with pytest.raises(ValueError, match="at least one port"):
        Layout(2, [2, 0])

    class TwoRanks(Transport):
        rank, size = 1, 2
    assert TwoRanks().placement(4) == [0, 0, 1, 1]
    assert TwoRanks().placement(3) == [0, 1, 1]
    machine = Machine(4, 2, transport=TwoRanks())
    assert [p.index for p in machine.partitions] == [2, 3]
    with pytest.raises(ValueError, match="runs on rank 0"):
        machine.partition(1)
    with pytest.raises(ValueError, match="every rank needs at least one partition"):
        TwoRanks().placement(1)


# -- (b) against the unpartitioned Fabric ---------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_partition_is_the_fabric_event_for_event(seed):
    sends = random_sends(16, 250, seed, 20_000_000, sizes=(0, 8, 300, 2048, 9000, 30000))
    assert machine_run(sends, 1, 16) == run_fabric(16, sends)


def test_permutation_traffic_equals_the_fabric():
    sends = [(t, s, (s + 5) % 16, n) for s in range(16)
             for t, n in ((0, 100_000), (30_000_000, 8), (30_000_000, 4096))]
    sends = [(t, s, d, n, k) for k, (t, s, d, n) in enumerate(sorted(sends))]
    assert machine_run(sends, 4, 4) == run_fabric(16, sends)


def test_sparse_traffic_equals_the_fabric():
    # messages rarely overlap: no contention, so no difference
    sends = random_sends(16, 60, 7, 6_000_000_000, sizes=(0, 8, 300, 9000, 30000))
    assert machine_run(sends, 4, 4) == run_fabric(16, sends)


def test_all_to_all_64_ports_equals_the_fabric():
    # each step of the rotation is a permutation: contention-free, also across partitions
    sends = alltoall_sends(64, 1024)
    assert machine_run(sends, 4, 16) == run_fabric(64, sends)


def test_output_contention_across_partitions_with_mtu_packets_equals_the_fabric():
    # two inputs of two partitions share output 5 until their buffers fill: an MTU packet's
    # own serialisation exceeds the lookahead, so even the credits come back on time
    sends = [(0, 0, 5, 100_000, 0), (0, 12, 5, 100_000, 0), (0, 13, 6, 8, 0)]
    got = machine_run(sends, 4, 4)
    assert got == run_fabric(16, sends)
    a, b = [r for r in got if r[3] == 5]
    assert abs(a[0] - b[0]) <= P.serialize_ps(P.wire_bytes(P.mtu))   # shared to the end


def test_head_of_line_blocking_across_partitions_is_not_modelled():
    # port 0's packets for port 5 (partition 1) wait behind port 12's at output 5; on one
    # switch input FIFO its later message to port 13 (partition 3) waits behind them; split
    # by destination partition it does not.  Everything else is as on the Fabric.
    sends = [(0, 0, 5, 100_000, 0), (0, 12, 5, 100_000, 0), (1_000, 0, 13, 4096, 1)]
    fabric = by_message(run_fabric(16, sends))
    parted = by_message(machine_run(sends, 4, 4))
    assert parted[(0, 0)] == fabric[(0, 0)] and parted[(12, 0)] == fabric[(12, 0)]
    assert parted[(0, 1)][0] < fabric[(0, 1)][0]
    # one partition owning all ports keeps the FIFO whole
    assert machine_run(sends, 1, 16) == run_fabric(16, sends)


# -- (d) ties and (e) exact times across partitions ------------------------------------------------

def test_ties_at_one_picosecond_across_partitions():
    # ports 0 (partition 0) and 4 (partition 1) send the same size at the same picosecond to
    # port 8 (partition 2); ports 1 and 5 to ports 12 and 13 (partition 3)
    sends = [(1_000, 0, 8, 64, 0), (1_000, 4, 8, 64, 0), (1_000, 1, 12, 64, 0),
             (1_000, 5, 13, 64, 0)]
    got = machine_run(sends, 4, 4)
    assert got == run_fabric(16, sends)
    first, second = [r for r in got if r[3] == 8]
    assert (first[1], second[1]) == (0, 4)                 # round robin starts at port 0
    assert second[0] == first[0] + P.serialize_ps(P.wire_bytes(64))
    same = [r for r in got if r[3] in (12, 13)]
    assert same[0][0] == same[1][0] and [r[1] for r in same] == [1, 5]   # (time, src, seq)


@pytest.mark.parametrize("seed", [4, 5])
def test_many_ties_same_result_for_every_window_and_copying(seed):
    sends = random_sends(16, 300, seed, 30_000_000, grid_ps=1_000_000)
    results = [machine_run(sends, 4, 4, window_ps=w) for w in (LOOKAHEAD, 40_000, 1_000, 1)]
    results.append(machine_run(sends, 4, 4, transport=LocalTransport(copy=False)))
    assert all(r == results[0] for r in results)


def test_a_message_to_another_partition_arrives_at_the_single_process_time():
    machine = Machine(2, 2)
    t = 12_345
    message = machine.partition(0).send(t, 1, 3, 8, b"8 bytes!")
    machine.run()
    [got] = machine.partition(1).delivered()
    wire = P.wire_bytes(8)
    assert got.t_deliver_ps == t + (P.hca_tx_ps + P.cable_ps + P.switch_ps
                                    + P.serialize_ps(wire) + P.cable_ps + P.hca_rx_ps)
    fabric = Fabric(4)
    fabric.send(t, 1, 3, 8, b"8 bytes!")
    fabric.run()
    [ref] = fabric.delivered()
    assert got.t_deliver_ps == ref.t_deliver_ps and got.packet_times == ref.packet_times
    assert got.payload == b"8 bytes!" and got.payload is not message.payload   # a copy
    assert (got.src, got.seq, got.t_first_wire_ps, got.t_last_wire_ps) == \
        (ref.src, ref.seq, ref.t_first_wire_ps, ref.t_last_wire_ps)


# -- the driver API -------------------------------------------------------------------------------

class Recorder:
    """A model that records its windows and, at 1 us, sends to port 3 and polls for the reply."""

    def __init__(self, partition, probe=True):
        self.partition = partition
        self.calls = []
        self.replies = []
        if probe:
            self.next_event_ps = lambda: 1_000_000 if not self.calls else None

    def advance(self, until_ps):
        self.calls.append(until_ps)
        p = self.partition
        if p.now < 1_000_000 <= until_ps - 1:
            p.run_until(1_000_000)
            p.send(1_000_000, 0, 3, 16, b"ping")
        p.run_until(until_ps - 1)
        self.replies += p.delivered()


def test_a_model_is_advanced_once_per_window_and_interleaves_with_the_fabric():
    machine = Machine(2, 2)
    here, there = machine.partitions
    model = Recorder(here, probe=False)
    here.attach_model(model)
    there.on_deliver(3, lambda m: there.send(there.now, 3, m.src, 4, b"pong"))
    machine.run_until(4_000_000)
    w = machine.window_ps
    assert model.calls == list(range(w, 4_000_001, w)) + ([4_000_001] * (4_000_001 % w != 0))
    [reply] = model.replies
    hop = P.hca_tx_ps + 2 * P.cable_ps + P.switch_ps + P.hca_rx_ps
    first = 1_000_000 + hop + P.serialize_ps(P.wire_bytes(16))
    assert reply.payload == b"pong" and reply.t_deliver_ps == \
        first + hop + P.serialize_ps(P.wire_bytes(4))
    with pytest.raises(ValueError, match="never reports idle"):
        machine.run()


def test_idle_windows_are_skipped_when_models_say_when_they_act():
    machine = Machine(2, 2)
    model = Recorder(machine.partition(0))
    machine.partition(0).attach_model(model)
    machine.run()
    assert len(model.calls) == machine.stats.windows < 40     # not 1 us / 115 ns of windows
    assert model.calls[0] == 1_000_000 + machine.window_ps


def test_the_window_bounds_what_a_partition_may_do():
    machine = Machine(2, 2)
    errors = []

    class Greedy:
        def advance(self, until_ps):
            for action in (lambda: part.run_until(until_ps),
                           lambda: part.send(max(0, until_ps - machine.window_ps - 1), 0, 2,
                                             8)):
                try:
                    action()
                except ValueError as error:
                    errors.append(str(error))
    part = machine.partition(0)
    part.attach_model(Greedy())
    machine.run_until(2 * machine.window_ps - 1)
    assert len(errors) == 3 and "window ends at" in errors[0] and "window ends at" in errors[1]
    assert "before partition 0's window, which starts at" in errors[2]
    with pytest.raises(ValueError, match="belongs to partition 1"):
        part.send(machine.now, 2, 0, 8)
    with pytest.raises(ValueError, match="not before the machine's time"):
        machine.run_until(machine.now - 1)


# -- (f) the time kept at window edges -----------------------------------------------------------

class SlowTransport(LocalTransport):
    """One process whose exchange takes a millisecond, as a rank waiting for a slower one."""

    def exchange(self, outgoing):
        time.sleep(0.001)
        return super().exchange(outgoing)


def test_time_at_window_edges_is_measured():
    sends = random_sends(8, 40, 9, 5_000_000)
    machine = Machine(2, 4, transport=SlowTransport())
    install(machine, sends)
    machine.run()
    stats = machine.stats
    assert stats.exchanges == stats.windows + 1
    assert stats.exchange_s >= 0.001 * stats.exchanges
    assert stats.exchange_s + stats.step_s <= stats.wall_s
    assert 0 < stats.exchange_fraction < 1 and stats.rate_ns_per_s > 0
    assert stats.crossings_sent == stats.crossings_received > 0
    assert stats.simulated_ps == machine.now
    assert record(machine) == machine_run(sends, 2, 4)
