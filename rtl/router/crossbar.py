"""Non-blocking crossbar with per-output round-robin between packets."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..tlp.stream import TLPStream
from .arbiter import round_robin

__all__ = ["Crossbar"]


class Crossbar(wiring.Component):
    """Every input to every output at once; each output serves whole packets in round robin.

    An output locks to the input whose packet it started until that packet's last beat has
    passed, so packets are never interleaved; different outputs move packets from different
    inputs in the same cycle.  Each output has one register stage.  Packets from one input to
    one output leave in the order they arrived (inputs are FIFOs).

    Members
    -------
    i : In(TLPStream()).array(n_in)
    i_dest : In(n_out).array(n_in)
        One-hot destination of the packet whose first beat is at input ``k``.
    o : Out(TLPStream()).array(n_out)
    """

    def __init__(self, n_in, n_out):
        self.n_in = n_in
        self.n_out = n_out
        super().__init__({
            "i":      In(TLPStream()).array(n_in),
            "i_dest": In(n_out).array(n_in),
            "o":      Out(TLPStream()).array(n_out),
        })

    def elaborate(self, platform):
        m = Module()
        n_in, n_out = self.n_in, self.n_out
        # serving[j][k]: output j moves a beat of input k this cycle.
        serving = [[Signal(name=f"serve_{j}_{k}") for k in range(n_in)] for j in range(n_out)]

        for j in range(n_out):
            o = self.o[j]
            locked = Signal(name=f"locked_{j}")
            owner = Signal(range(max(n_in, 2)), name=f"owner_{j}")
            last = Signal(range(max(n_in, 2)), name=f"last_{j}")
            room = ~o.valid | o.ready
            with m.If(o.ready):
                m.d.sync += o.valid.eq(0)

            requests = [self.i[k].valid & self.i[k].p.first & self.i_dest[k][j]
                        for k in range(n_in)]
            found, winner = round_robin(m, requests, last)
            source = Signal(range(max(n_in, 2)), name=f"source_{j}")
            active = Signal(name=f"active_{j}")
            owner_valid = Signal(name=f"owner_valid_{j}")
            for k in range(n_in):
                with m.If(owner == k):
                    m.d.comb += owner_valid.eq(self.i[k].valid)
            m.d.comb += [source.eq(winner), active.eq(found)]
            with m.If(locked):
                m.d.comb += [source.eq(owner), active.eq(owner_valid)]
            for k in range(n_in):
                m.d.comb += serving[j][k].eq(active & room & (source == k))
                with m.If(serving[j][k]):
                    m.d.sync += [o.valid.eq(1), o.p.eq(self.i[k].p)]
                    with m.If(~locked):
                        m.d.sync += [last.eq(k), owner.eq(k)]
                    m.d.sync += locked.eq(~self.i[k].p.last)

        for k in range(n_in):
            m.d.comb += self.i[k].ready.eq(Cat(serving[j][k] for j in range(n_out)).any())
        return m
