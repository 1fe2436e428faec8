"""Unsupported Request completions for rejected non-posted requests."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..tlp.layouts import CplStatus, Fmt, Type
from ..tlp.stream import TLPStream
from .arbiter import round_robin
from .common import Port, URRequest
from .ingress import OUTPUTS

__all__ = ["URGenerator"]


class URGenerator(wiring.Component):
    """Answer every rejected non-posted request with a UR completion on its own port.

    So that no requester waits for a completion that never comes (PCIe base specification,
    Unsupported Request).  Each ingress's requests first enter a two-entry FIFO of their own,
    so that ``i_req[k].ready`` is "that FIFO is not full", a register, and never depends on
    the other ingresses' requests or on the output (the ingresses' handshakes are not chained
    through the arbitration).  Two entries let one ingress hand over a request every cycle.
    Requests are then taken from the FIFOs in round robin; each becomes
    one header-only completion (CplLk for a locked read): status UR, byte count 4, lower
    address 0, the request's requester ID, tag, traffic class and attributes, completer ID from
    ``completer_id``.

    Members
    -------
    i_req : In(stream.Signature(URRequest)).array(n)
    o_tlp : Out(TLPStream())
    o_dest : Out(6)
        One-hot crossbar output (the port the request came from), valid with ``o_tlp``.

    A request is answered two cycles after it is taken from ``i_req`` at the earliest (FIFO,
    then the output register).
    completer_id : In(16)
    """

    def __init__(self, n=4):
        self.n = n
        super().__init__({
            "i_req":        In(stream.Signature(URRequest)).array(n),
            "o_tlp":        Out(TLPStream()),
            "o_dest":       Out(len(OUTPUTS)),
            "completer_id": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        o = self.o_tlp
        queues = []
        for k, req in enumerate(self.i_req):
            q = fifo.SyncFIFO(width=URRequest.size, depth=2)
            m.submodules[f"queue{k}"] = q
            m.d.comb += [
                q.w_data.eq(req.p),
                q.w_en.eq(req.valid),
                req.ready.eq(q.w_rdy),
            ]
            queues.append(q)

        last = Signal(range(max(self.n, 2)))
        found, winner = round_robin(m, [q.r_rdy for q in queues], last)
        room = ~o.valid | o.ready
        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        for k, q in enumerate(queues):
            take = found & room & (winner == k)
            m.d.comb += q.r_en.eq(take)
            with m.If(take):
                r = URRequest(q.r_data)
                dw0 = Cat(Const(0, 10), Const(0, 2), r.attr[:2], Const(0, 2), Const(0, 2),
                          r.attr[2], r.tag[8], r.tc, r.tag[9],
                          Mux(r.locked, Const(Type.CPL_LOCKED.value, 5),
                              Const(Type.CPL.value, 5)),
                          Const(Fmt.DW3_NO_DATA.value, 3))
                dw1 = Cat(Const(4, 12), Const(0, 1), Const(CplStatus.UR.value, 3),
                          self.completer_id)
                dw2 = Cat(Const(0, 8), r.tag[:8], r.requester_id)
                m.d.sync += [
                    o.valid.eq(1),
                    o.p.hdr.eq(Cat(dw0, dw1, dw2, Const(0, 32))),
                    o.p.dw_en.eq(0),
                    o.p.first.eq(1),
                    o.p.last.eq(1),
                    o.p.err.eq(0),
                    o.p.bar.eq(0),
                    last.eq(k),
                ]
                for p in Port:
                    with m.If(r.port == p):
                        m.d.sync += self.o_dest.eq(1 << OUTPUTS.index(p.name))
        return m
