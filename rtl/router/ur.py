"""Unsupported Request completions for rejected non-posted requests."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..tlp.layouts import CplStatus, Fmt, TLPHeader, Type
from ..tlp.stream import TLPStream
from ..util import RegisterSlice
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

    A request is answered two cycles after it is taken from ``i_req`` at the earliest (FIFO,
    then the output register).  The output is a :class:`~peach2.util.RegisterSlice`, so which
    request is taken next never depends on ``o_tlp.ready`` in the same cycle.

    Members
    -------
    i_req : In(stream.Signature(URRequest)).array(n)
    o_tlp : Out(TLPStream())
    o_dest : Out(6)
        One-hot crossbar output (the port the request came from), valid with ``o_tlp``.
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

        # The completion goes into a register slice (the output register, with a skid
        # register behind it): a request is taken when the slice's ``ready``, a register, says
        # so, never on the crossbar's ``ready`` of this cycle.
        # Only what varies goes through it: ``data``, ``dw_en``, ``bar`` and ``err`` of a
        # header-only completion stay 0 (undriven).
        out_layout = data.StructLayout({"hdr": TLPHeader, "first": 1, "last": 1,
                                        "dest": len(OUTPUTS)})
        m.submodules.out = out = RegisterSlice(out_layout)
        m.d.comb += [
            o.valid.eq(out.o.valid), o.p.hdr.eq(out.o.p.hdr), o.p.first.eq(out.o.p.first),
            o.p.last.eq(out.o.p.last), self.o_dest.eq(out.o.p.dest), out.o.ready.eq(o.ready),
        ]

        last = Signal(range(max(self.n, 2)))
        found, winner = round_robin(m, [q.r_rdy for q in queues], last)
        r = URRequest(Signal(URRequest.size))
        for k, q in enumerate(queues):
            take = found & out.i.ready & (winner == k)
            m.d.comb += q.r_en.eq(take)
            with m.If(winner == k):
                m.d.comb += r.as_value().eq(q.r_data)
            with m.If(take):
                m.d.sync += last.eq(k)
        dw0 = Cat(Const(0, 10), Const(0, 2), r.attr[:2], Const(0, 2), Const(0, 2),
                  r.attr[2], r.tag[8], r.tc, r.tag[9],
                  Mux(r.locked, Const(Type.CPL_LOCKED.value, 5), Const(Type.CPL.value, 5)),
                  Const(Fmt.DW3_NO_DATA.value, 3))
        dw1 = Cat(Const(4, 12), Const(0, 1), Const(CplStatus.UR.value, 3), self.completer_id)
        dw2 = Cat(Const(0, 8), r.tag[:8], r.requester_id)
        m.d.comb += [
            out.i.valid.eq(found),
            out.i.p.hdr.eq(Cat(dw0, dw1, dw2, Const(0, 32))),
            out.i.p.first.eq(found),        # 1 whenever valid (a one-beat packet)
            out.i.p.last.eq(found),
        ]
        for p in Port:
            with m.If(r.port == p):
                m.d.comb += out.i.p.dest.eq(1 << OUTPUTS.index(p.name))
        return m
