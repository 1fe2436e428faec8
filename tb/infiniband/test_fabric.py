"""Unit tests of the InfiniBand fabric model (no simulator): latency, bandwidth, contention,
credits, sizes, tie-breaking, bad inputs and determinism.

Expected values are computed here from :class:`Params` fields, not copied from a run.
"""

import random

import pytest

from peach2.sim.infiniband import Fabric, Params

P = Params()
MIB = 1 << 20


def ser(nbytes):
    """Serialisation time of ``nbytes`` wire bytes, from the link rate (exact for QDR)."""
    return P.serialize_ps(nbytes)


def run(fabric):
    fabric.run()
    return fabric.delivered()


def throughput(message):
    """Data bytes per second from hand-over to delivery."""
    return message.nbytes / ((message.t_deliver_ps - message.t_send_ps) / 1e12)


def bound(params=P):
    """Link data rate times the payload share of a full packet (SEND, no immediate)."""
    return float(params.data_bytes_per_s * params.payload_efficiency())


# -- parameters ---------------------------------------------------------------------------------

def test_defaults_are_4x_qdr():
    assert P.data_bytes_per_s == 4 * 10 ** 9                  # 40 Gb/s, 8b/10b
    assert P.ps_per_byte == 250
    assert P.base_header_bytes == 8 + 12 + 4 + 2              # LRH BTH ICRC VCRC
    assert P.wire_bytes(2048) == 2048 + 26 + 2
    assert P.wire_bytes(2048, P.reth_bytes) == 2048 + 42 + 2  # RDMA write, first packet
    assert P.blocks(P.packet_bytes(2048)) == -(-(2048 + 26) // 64)
    assert P.cable_ps == 15_000


@pytest.mark.parametrize("field, value, words", [
    ("mtu", 3000, "mtu"),
    ("lanes", 3, "lanes"),
    ("switch_ps", -1, "switch_ps"),
    ("hca_tx_ps", 1.5, "hca_tx_ps"),
    ("lane_gbaud", 0, "lane_gbaud"),
    ("encoding", (10, 8), "encoding"),
    ("cable_m", -2.0, "cable_m"),
    ("hca_credits", 32, "hca_credits"),
    ("switch_credits", 0, "switch_credits"),
    ("max_message_bytes", 2 ** 31 + 1, "max_message_bytes"),
    ("rnr_retry", 8, "rnr_retry"),
    ("credit_bytes", 0, "credit_bytes"),
])
def test_nonsense_parameters_are_refused(field, value, words):
    with pytest.raises(ValueError, match=words):
        Params(**{field: value})


# -- latency --------------------------------------------------------------------------------------

def test_small_message_latency_is_the_sum_of_its_parts():
    fabric = Fabric(4)
    message = fabric.send(1_000, 0, 3, 8)
    [got] = run(fabric)
    assert got is message
    wire = P.lrh_bytes + P.bth_bytes + 8 + P.icrc_bytes + P.vcrc_bytes + P.delimiter_bytes
    parts = (P.hca_tx_ps + P.cable_ps + P.switch_ps + ser(wire) + P.cable_ps + P.hca_rx_ps)
    assert message.t_deliver_ps == 1_000 + parts
    assert message.t_first_wire_ps == 1_000 + P.hca_tx_ps
    assert message.t_last_wire_ps == 1_000 + P.hca_tx_ps + ser(wire)


def test_zero_byte_message_is_one_header_packet_at_the_lookahead():
    fabric = Fabric(2)
    message = fabric.send(0, 1, 0, 0)
    assert run(fabric) == [message]
    assert message.packet_times == [message.t_deliver_ps]
    assert message.latency_ps == fabric.lookahead_ps() == P.lookahead_ps()


def test_no_delivery_beats_the_lookahead():
    rng = random.Random(7)
    fabric = Fabric(6)
    for _ in range(200):
        src, dst = rng.sample(range(6), 2)
        fabric.send(rng.randrange(0, 2_000_000), src, dst, rng.choice([0, 4, 100, 3000, 9000]))
    messages = run(fabric)
    assert len(messages) == 200
    assert min(m.latency_ps for m in messages) >= fabric.lookahead_ps()


def test_pipelined_message_latency():
    """Unloaded: one switch latency and two cables, then the packets back to back."""
    fabric = Fabric(2)
    nbytes = 3 * P.mtu + 100
    message = fabric.send(0, 0, 1, nbytes)
    run(fabric)
    sizes = [P.mtu] * 3 + [100]
    wire = sum(ser(P.wire_bytes(s)) for s in sizes)
    assert message.t_deliver_ps == (P.hca_tx_ps + 2 * P.cable_ps + P.switch_ps + wire
                                    + P.hca_rx_ps)


# -- bandwidth and contention --------------------------------------------------------------------

def test_large_message_approaches_the_header_bound():
    fabric = Fabric(2)
    message = fabric.send(0, 0, 1, 8 * MIB)
    run(fabric)
    rate = throughput(message)
    assert rate <= bound()
    assert rate >= 0.998 * bound()


def test_rdma_write_headers_cost_bandwidth_on_first_packets_only():
    fabric = Fabric(2)
    plain = fabric.send(0, 0, 1, 64 * P.mtu)
    run(fabric)
    write = fabric.send(fabric.now, 0, 1, 64 * P.mtu, first_extra=P.reth_bytes)
    run(fabric)
    extra = write.latency_ps - plain.latency_ps
    assert extra == ser(P.wire_bytes(P.mtu, P.reth_bytes)) - ser(P.wire_bytes(P.mtu))


def test_two_senders_into_one_port_each_get_half():
    fabric = Fabric(4)
    a = fabric.send(0, 0, 2, 4 * MIB)
    b = fabric.send(0, 1, 2, 4 * MIB)
    run(fabric)
    for m in (a, b):
        assert throughput(m) == pytest.approx(bound() / 2, rel=0.01)
    assert abs(a.t_deliver_ps - b.t_deliver_ps) <= ser(P.wire_bytes(P.mtu))


def test_unequal_messages_share_packet_by_packet():
    """Round robin per packet: the short message is not stuck behind the long one."""
    fabric = Fabric(4)
    long = fabric.send(0, 0, 2, 4 * MIB)
    short = fabric.send(0, 1, 2, 64 * P.mtu)
    run(fabric)
    alone = 64 * ser(P.wire_bytes(P.mtu))
    assert short.latency_ps == pytest.approx(2 * alone, rel=0.02)
    assert long.t_deliver_ps > short.t_deliver_ps


def test_disjoint_pairs_do_not_interfere():
    fabric = Fabric(4)
    a = fabric.send(0, 0, 2, 2 * MIB)
    b = fabric.send(0, 1, 3, 2 * MIB)
    run(fabric)
    assert a.latency_ps == b.latency_ps
    assert throughput(a) >= 0.997 * bound()


# -- credits -------------------------------------------------------------------------------------

def test_slow_receiver_throttles_the_sender_and_loses_nothing():
    fabric = Fabric(3)
    drain = 1e9                                        # wire bytes per second at port 1
    fabric.set_drain_rate(1, drain)
    sent = [fabric.send(0, 0, 1, MIB, payload=k) for k in range(4)]
    lowest = [P.switch_credits, P.hca_credits]
    t = 0
    while not fabric.idle():
        t += 50_000_000
        fabric.run_until(t)
        up, down = fabric.credits(0)[0], fabric.credits(1)[1]
        lowest = [min(lowest[0], up), min(lowest[1], down)]
    got = fabric.delivered()
    assert [m.payload for m in got] == [0, 1, 2, 3]
    expected_rate = drain * float(P.payload_efficiency())
    total = 4 * MIB / ((got[-1].t_deliver_ps - sent[0].t_send_ps) / 1e12)
    assert total == pytest.approx(expected_rate, rel=0.01)
    # back-pressure reached the sender: its buffers filled and it sent at the drain rate
    assert lowest[1] < P.blocks(P.packet_bytes(P.mtu))
    assert lowest[0] < P.blocks(P.packet_bytes(P.mtu))
    assert sent[0].t_last_wire_ps > 0.9 * MIB / drain * 1e12
    assert fabric.credits(0) == (P.switch_credits, P.hca_credits)
    assert fabric.credits(1) == (P.switch_credits, P.hca_credits)


def test_the_last_credit():
    """Downlink buffer of exactly one full packet: the second waits for the first's credit."""
    full = P.blocks(P.packet_bytes(P.mtu))
    params = Params(hca_credits=full)
    fabric = Fabric(2, params)
    message = fabric.send(0, 0, 1, 2 * P.mtu)
    run(fabric)
    s = ser(P.wire_bytes(P.mtu))
    first_out = P.hca_tx_ps + P.cable_ps + P.switch_ps               # starts on the downlink
    first_in = first_out + s + P.cable_ps + P.hca_rx_ps               # drained at once
    second_out = first_in + P.cable_ps                                # credit back at the switch
    assert message.packet_times == [first_in, second_out + s + P.cable_ps + P.hca_rx_ps]
    with pytest.raises(ValueError, match="hca_credits"):
        Params(hca_credits=full - 1)


def test_one_credit_short_of_two_packets_still_sends_one_at_a_time():
    full = P.blocks(P.packet_bytes(P.mtu))
    fabric = Fabric(2, Params(switch_credits=2 * full - 1, hca_credits=2 * full - 1))
    messages = [fabric.send(0, 0, 1, 8 * P.mtu, payload=k) for k in range(3)]
    assert [m.payload for m in run(fabric)] == [0, 1, 2]
    assert all(m.delivered for m in messages)


# -- sizes -----------------------------------------------------------------------------------------

def test_the_largest_message():
    params = Params(max_message_bytes=MIB)
    fabric = Fabric(2, params)
    payload = bytes(range(256)) * (MIB // 256)
    message = fabric.send(0, 0, 1, MIB, payload=payload)
    assert run(fabric) == [message]
    assert len(message.packet_times) == MIB // P.mtu
    with pytest.raises(ValueError, match="exceeds the maximum"):
        fabric.send(fabric.now, 0, 1, MIB + 1)
    assert Fabric(2).params.max_message_bytes == 2 ** 31


def test_packets_carry_the_message_slices():
    fabric = Fabric(2)
    payload = bytes(random.Random(3).randbytes(5000))
    seen = []
    fabric.attach(1, on_packet=lambda t, pkt: seen.append(pkt.data()))
    fabric.send(0, 0, 1, len(payload), payload=payload)
    fabric.run()
    assert [len(s) for s in seen] == [2048, 2048, 904]
    assert b"".join(seen) == payload
    assert fabric.delivered() == []                       # the handler consumed them


# -- ordering and determinism ------------------------------------------------------------------

def test_simultaneous_deliveries_are_ordered_by_source_port():
    results = []
    for order in ((1, 0), (0, 1)):
        fabric = Fabric(4)
        for src in order:
            fabric.send(500, src, src + 2, 64, payload=src)
        got = run(fabric)
        assert got[0].t_deliver_ps == got[1].t_deliver_ps
        results.append([(m.t_deliver_ps, m.src, m.payload) for m in got])
    assert results[0] == results[1]
    assert [src for _, src, _ in results[0]] == [0, 1]


def test_simultaneous_arrivals_at_one_output_are_served_round_robin_from_port_0():
    fabric = Fabric(3)
    b = fabric.send(0, 1, 2, 8, payload="b")
    a = fabric.send(0, 0, 2, 8, payload="a")
    run(fabric)
    assert a.t_deliver_ps < b.t_deliver_ps


def _workload(seed):
    rng = random.Random(seed)
    fabric = Fabric(8)
    for _ in range(300):
        src, dst = rng.sample(range(8), 2)
        fabric.send(rng.randrange(0, 5_000_000), src, dst, rng.randrange(0, 20_000),
                    payload=rng.random())
    return [(m.t_deliver_ps, m.src, m.seq, m.dst, m.nbytes, m.payload, tuple(m.packet_times))
            for m in run(fabric)]


def test_same_inputs_same_outputs():
    first = _workload(11)
    assert len(first) == 300
    assert first == _workload(11)
    assert first == sorted(first, key=lambda r: r[:3])


def test_run_until_and_next_event_time():
    fabric = Fabric(2)
    assert fabric.next_event_time() is None and fabric.idle()
    message = fabric.send(100, 0, 1, 0)
    assert fabric.next_event_time() == 100
    fabric.run_until(message.t_send_ps + fabric.lookahead_ps() - 1)
    assert fabric.delivered() == []
    fabric.run_until(message.t_send_ps + fabric.lookahead_ps())
    assert fabric.delivered() == [message]
    calls = []
    fabric.schedule(fabric.now + 5, 1, calls.append, "x")
    fabric.run()
    assert calls == ["x"] and fabric.idle()
    assert fabric.now == message.t_deliver_ps + P.cable_ps     # the last credit came home


# -- bad inputs --------------------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    ((0, 0, 4, 8), "dst = 4 is not a port"),
    ((0, -1, 1, 8), "src = -1 is not a port"),
    ((0, 0, 1, -1), "must not be negative"),
    ((0, 2, 2, 8), "loopback"),
    ((0, 0, 1, 8.0), "nbytes must be an integer"),
    ((-5, 0, 1, 8), "must not be negative"),
])
def test_bad_sends_are_refused_and_change_nothing(args, words):
    fabric = Fabric(4)
    good = fabric.send(0, 1, 0, 100)
    with pytest.raises(ValueError, match=words):
        fabric.send(*args)
    assert run(fabric) == [good]
    assert good.seq == 0 and fabric.idle()


def test_sending_into_the_past_is_refused():
    fabric = Fabric(2)
    fabric.run_until(1_000)
    with pytest.raises(ValueError, match="before the fabric's time"):
        fabric.send(999, 0, 1, 8)
    with pytest.raises(ValueError, match="ready_ps has 1 times for 2 packets"):
        fabric.send(1_000, 0, 1, 3000, ready_ps=[2_000])
    with pytest.raises(ValueError):
        Fabric(1)
    with pytest.raises(ValueError, match="drain rate"):
        fabric.set_drain_rate(0, 0)
