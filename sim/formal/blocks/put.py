"""Harness: :class:`~peach2.put.engine.PutEngine` (inline puts, ``docs/put.md``)."""

from peach2.put.engine import PutEngine
from peach2.router.common import RouteEntry
from peach2.tlp.stream import TLPBeat

from ..contract import RULES, StreamContract
from ..harness import Harness

__all__ = ["PutHarness"]


class PutHarness(Harness):
    """Any writes into BAR 4 that obey the stream contract (well-formed puts, malformed writes,
    any descriptor), any route table, node offset and link states, any back-pressure: the
    engine's writes obey the stream contract, and its input is never refused inside a packet
    (a write once started always fits the queue)."""

    PROPERTIES = {**{f"out_{rule}": text for rule, text in RULES.items()},
                  "in_ready": "i_req.ready is 1 for every beat of a packet after its first"}

    def __init__(self, prop, *, mutant=None, n_routes=1, depth=2):
        super().__init__(prop, mutant=mutant)
        self.n_routes, self.depth = n_routes, depth

    def build(self, m, platform):
        dut = self.add_block(m, "dut", PutEngine(n_routes=self.n_routes, depth=self.depth),
                             platform)
        i, o = dut.i_req, dut.o_wr
        m.d.comb += [
            i.valid.eq(self.anyseq(m, 1, "in_valid")),
            i.p.eq(self.anyseq(m, TLPBeat, "in_p")),
            o.ready.eq(self.anyseq(m, 1, "out_ready")),
            dut.route_down.eq(self.anyseq(m, self.n_routes, "route_down")),
            dut.node_offset.eq(self.constant(m, 64, "node_offset")),
            dut.requester_id.eq(self.constant(m, 16, "requester_id")),
            dut.clear.eq(self.anyseq(m, 1, "clear")),
        ]
        for k in range(self.n_routes):
            m.d.comb += dut.routes[k].eq(self.constant(m, RouteEntry, f"route_{k}"))
        before = StreamContract(i, "in")
        before.assume(m)
        after = StreamContract(o, "out")
        after.assert_into(self, m, prefix="out_")
        in_pkt = before.state[0]
        self.claim(m, "in_ready", ~in_pkt | i.ready)
