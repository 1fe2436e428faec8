"""The links' utilisation trace (``peach2.sim.system.link_trace``) without a simulator: the
binning, the cable counters' wrap and rate bound, and the fabric's watch hooks (they change no
time).  The trace on the co-simulated machine: ``tb/hybrid/test_heatmap.py``."""

from types import SimpleNamespace

from peach2.sim.infiniband import Fabric
from peach2.sim.system.link_trace import LINK_BYTES_PER_S, LinkTrace, spread

W = 112_000                             # the machine's window (ps)
PER_WINDOW = W * LINK_BYTES_PER_S // 10 ** 12


def test_spread_keeps_every_byte_and_the_rate():
    # a 2 KiB packet at 4 GB/s is 512 ns on the wire: over bins of 100 ns
    ps = 2048 * 250
    got = spread([(50_000, 50_000 + ps, 2048), (50_000 + ps, 50_000 + 2 * ps, 2048)], 0,
                 100_000, 12)
    assert sum(got) == 4096
    assert max(got) <= 100_000 * LINK_BYTES_PER_S / 1e12       # never above the link's rate
    assert got[0] == 200 and got[1] == 400                       # half a bin, then a whole one
    assert spread([(0, 10, 7)], 0, 100, 3) == [7, 0, 0]
    assert spread([(250, 260, 7)], 0, 100, 2) == [0, 7]        # past the last bin: the last


class _Signal:
    def __init__(self):
        self.value = 0


def _fake_sim(fabric):
    """A MachineSim's surface as LinkTrace reads it: one 2-node sub-cluster (a ring of two,
    two cables), the driver's watchers, one partition (the whole fabric)."""
    from peach2.sim.system import MachinePlan
    plan = MachinePlan("ring:2", 1)
    dut = SimpleNamespace(**{f"cable{j}_{d}_bytes": _Signal() for j in range(2)
                             for d in ("a2b", "b2a")})
    part = SimpleNamespace(fabric=fabric, ports=range(2))
    return SimpleNamespace(plan=plan, local=[0], dut=dut,
                           driver=SimpleNamespace(window_ps=W, watchers=[]),
                           machine=SimpleNamespace(partitions=[part]),
                           transport=SimpleNamespace(allgather=lambda x: [x]))


def test_cable_counters_wrap_and_are_sent_at_the_link_rate():
    fabric = Fabric(2)
    sim = _fake_sim(fabric)
    a2b = sim.dut.cable0_a2b_bytes
    a2b.value = (1 << 32) - 100                  # the counter wraps during the run
    trace = LinkTrace(sim)
    trace.begin(0)
    assert sim.driver.watchers and fabric.on_wire is not None
    edges = [W * (k + 1) for k in range(6)]
    for k, edge in enumerate(edges):
        if k == 0:
            a2b.value = 1000                       # 1100 bytes in one window: more than 448
        for watch in sim.driver.watchers:
            watch(edge)
    got = trace.finish(edges[-1], bins=6)
    assert not sim.driver.watchers and fabric.on_wire is None
    assert got["bin_ps"] == W and got["bins"] == 6
    link = next(x for x in got["links"] if x["name"] == "0.E->1.W")
    assert link["total"] == 1100 == sum(link["bytes"])
    assert link["bytes"][:4] == [PER_WINDOW, PER_WINDOW, 1100 - 2 * PER_WINDOW, 0]
    assert [x["kind"] for x in got["links"]].count("ib") == 4     # 2 ports, up and down
    assert all(sum(x["bytes"]) == 0 for x in got["links"] if x["name"] != "0.E->1.W")


def _traffic(fabric):
    fabric.send(0, 0, 1, 10_000)
    fabric.send(1_000, 1, 0, 3_000)
    fabric.send(2_000, 0, 1, 100)
    fabric.run()
    return [(m.src, m.seq, m.t_deliver_ps) for m in fabric.delivered()]


def test_fabric_hooks_see_every_packet_and_change_no_time():
    plain = _traffic(Fabric(2))
    watched = Fabric(2)
    seen, delivered = [], []
    watched.on_wire = lambda link, port, t0, t1, pkt: seen.append((link, port, t0, t1,
                                                                    pkt.payload_bytes))
    watched.on_delivered = delivered.append
    assert _traffic(watched) == plain
    up0 = sorted((t0, t1) for link, port, t0, t1, _ in seen if (link, port) == ("up", 0))
    assert all(a[1] <= b[0] for a, b in zip(up0, up0[1:]))      # one packet at a time
    assert sum(b for link, port, *_, b in seen if (link, port) == ("up", 0)) == 10_100
    assert sum(b for link, port, *_, b in seen if (link, port) == ("down", 0)) == 3_000
    assert sorted(m.nbytes for m in delivered) == [100, 3_000, 10_000]
    p = watched.params
    assert all(t1 - t0 == p.serialize_ps(p.wire_bytes(b)) for *_, t0, t1, b in seen)
