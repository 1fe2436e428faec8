"""Ingress: classify every TLP arriving on one port and decide where it goes."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..tlp.layouts import Type
from ..tlp.stream import TLPStream
from .common import Port, Reason, RouteEntry, URRequest
from .table import request_address, route_lookup

__all__ = ["Ingress", "OUTPUTS"]


#: Crossbar outputs an ingress can choose, in one-hot bit order of ``o_dest``.
OUTPUTS = ("N", "E", "W", "S", "CSR", "DMA")


class Ingress(wiring.Component):
    """Classify the TLPs received on one port (002 sections 3.3 and 3.5, 000 section 2.2).

    Decided on the header of the first beat, registered with the beat (one cycle):

    ======================================  =========================================
    TLP                                      where it goes
    ======================================  =========================================
    N: completion (poisoned or not)          DMA (it matches the tag; a completion for no
                                             outstanding read is counted there as
                                             UNEXPECTED_CPL; a poisoned one fails its read)
    poisoned (``ep``)                        dropped, POISONED
    E/W/S: completion                        dropped, UNEXPECTED_CPL (the chip reads only
                                             through N)
    N: memory request hitting the register   CSR
    BAR
    N: memory write into the TCA window      routed, if CONTROL.PIO_ENABLE (else
                                             WINDOW_CLOSED)
    N: memory read into the TCA window       dropped, READ_REJECTED (remote reads are not
                                             part of TCA)
    E/W/S: memory write                      routed, if CONTROL.ROUTE_ENABLE (else
                                             WINDOW_CLOSED)
    E/W/S: memory read                       dropped, READ_REJECTED
    configuration, I/O, message, other BAR   dropped, UNSUPPORTED
    routed, but no table entry matches       dropped, UNROUTABLE
    ======================================  =========================================

    Every dropped non-posted request is answered: its requester ID, tag, traffic class and
    attributes go to ``o_ur`` for an Unsupported Request completion on this port.  A dropped
    TLP is counted and answered on its last beat, and only if that beat carries no ``err``
    (a TLP the RX adapter found bad after its first beat is counted there, as MALFORMED or
    RX_ERR, and not answered).  Dropped TLPs are consumed at one beat per cycle and disturb
    nothing else.  Locked reads are UNSUPPORTED.

    Members
    -------
    i_tlp : In(TLPStream())
        From the port's RX adapter.
    o_tlp : Out(TLPStream())
        Forwarded TLPs, one cycle later.
    o_dest : Out(6)
        One-hot crossbar output (bit order :data:`OUTPUTS`), valid with the first beat of
        ``o_tlp``.
    o_ur : Out(stream.Signature(URRequest))
        Requests to answer with UR.
    routes : In(ArrayLayout(RouteEntry, n_routes))
    pio_enable, route_enable : In(1)
        CONTROL register bits.
    events : Out(ArrayLayout(1, len(Reason)))
        One-cycle strobes indexed by :class:`~peach2.router.common.Reason`.
    """

    def __init__(self, port, *, n_routes=8, csr_bar=0, tca_bar=2):
        self.port = Port(port)
        self.csr_bar = csr_bar
        self.tca_bar = tca_bar
        super().__init__({
            "i_tlp":        In(TLPStream()),
            "o_tlp":        Out(TLPStream()),
            "o_dest":       Out(len(OUTPUTS)),
            "o_ur":         Out(stream.Signature(URRequest)),
            "routes":       In(data.ArrayLayout(RouteEntry, n_routes)),
            "pio_enable":   In(1),
            "route_enable": In(1),
            "events":       Out(data.ArrayLayout(1, len(Reason))),
        })

    def elaborate(self, platform):
        m = Module()
        i, o = self.i_tlp, self.o_tlp
        h = i.p.hdr
        fmt = h.common.fmt.as_value()
        typ = h.common.type.as_value()
        has_data = fmt[1]
        # Locked requests (MRdLk) are not memory requests here: they are UNSUPPORTED (and get
        # a locked UR completion).
        is_mem = typ == Type.MEM.value
        is_mwr = has_data & (typ == Type.MEM.value)
        is_mrd = is_mem & ~has_data
        is_cpl = typ[1:] == (Type.CPL.value >> 1)      # CPL, CPL_LOCKED
        is_msg = typ[3:] == (Type.MSG.value >> 3)
        posted = is_mwr | is_msg

        hit, port = route_lookup(m, request_address(h), self.routes)

        # -- the decision for a first beat ------------------------------------------------------
        forward = Signal()
        dest = Signal(len(OUTPUTS))
        reason = Signal(Reason)
        routed_ok = Signal()
        window_open = self.pio_enable if self.port == Port.N else self.route_enable
        m.d.comb += routed_ok.eq(0)
        with m.If(is_cpl & (self.port == Port.N)):
            # Poisoned ones too: the DMA fails the read they answer (CPL_POISONED).
            m.d.comb += [forward.eq(1), dest.eq(1 << OUTPUTS.index("DMA"))]
        with m.Elif(h.common.ep):
            m.d.comb += reason.eq(Reason.POISONED)
        with m.Elif(is_cpl):
            m.d.comb += reason.eq(Reason.UNEXPECTED_CPL)
        with m.Elif(is_mem & (self.port == Port.N) & i.p.bar[self.csr_bar]):
            m.d.comb += [forward.eq(1), dest.eq(1 << OUTPUTS.index("CSR"))]
        with m.Elif(is_mem & ((self.port != Port.N) | i.p.bar[self.tca_bar])):
            with m.If(is_mrd):
                m.d.comb += reason.eq(Reason.READ_REJECTED)
            with m.Elif(~window_open):
                m.d.comb += reason.eq(Reason.WINDOW_CLOSED)
            with m.Elif(~hit):
                m.d.comb += reason.eq(Reason.UNROUTABLE)
            with m.Else():
                m.d.comb += [forward.eq(1), routed_ok.eq(1)]
        with m.Else():
            m.d.comb += reason.eq(Reason.UNSUPPORTED)
        with m.If(routed_ok):
            for p in Port:
                with m.If(port == p):
                    m.d.comb += dest.eq(1 << OUTPUTS.index(p.name))

        # -- datapath: one register stage; dropped packets are consumed here --------------------
        # A dropped packet is counted, and answered with UR, on its last beat, and only when that
        # beat carries no `err`: a packet the RX adapter found bad after its first beat is its
        # MALFORMED or RX_ERR, not a request to answer.
        dropping = Signal()
        in_pkt = Signal()
        room = ~o.valid | o.ready
        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)

        start = i.valid & i.p.first & ~in_pkt & ~dropping
        ur_now = Signal(URRequest)
        m.d.comb += [
            ur_now.requester_id.eq(h.mem32.requester_id),
            ur_now.tag.eq(h.mem32.tag | (h.common.t8 << 8) | (h.common.t9 << 9)),
            ur_now.tc.eq(h.common.tc),
            ur_now.attr.eq(h.common.attr | (h.common.attr2 << 2)),
            ur_now.port.eq(self.port),
            ur_now.locked.eq(typ == Type.MEM_LOCKED.value),
        ]
        ur_held = Signal(URRequest)
        reason_held = Signal(Reason)
        answer_held = Signal()

        # Where the drop decision is taken from: this cycle's header, or the one held.
        deciding = Signal()
        drop_reason = Signal(Reason)
        answer = Signal()
        m.d.comb += [
            deciding.eq(start & ~forward),
            drop_reason.eq(Mux(deciding, reason, reason_held)),
            answer.eq(Mux(deciding, ~posted & ~is_cpl, answer_held)),
            self.o_ur.p.eq(Mux(deciding, ur_now, ur_held)),
        ]

        with m.If(dropping | deciding):
            end = i.valid & i.p.last
            good_end = end & ~i.p.err
            m.d.comb += [
                self.o_ur.valid.eq(good_end & answer),
                i.ready.eq(~(good_end & answer) | self.o_ur.ready),
            ]
            with m.If(i.valid & i.ready):
                with m.If(deciding):
                    m.d.comb += self.events[Reason.RX_TLPS.value].eq(1)
                    m.d.sync += [reason_held.eq(reason), answer_held.eq(~posted & ~is_cpl),
                                 ur_held.eq(ur_now)]
                m.d.sync += dropping.eq(~i.p.last)
                with m.If(good_end):
                    m.d.comb += self.events[Reason.UR_SENT.value].eq(answer)
                    for r in Reason:
                        with m.If(drop_reason == r):
                            m.d.comb += self.events[r.value].eq(1)
        with m.Else():
            # Forwarding (a new packet, or the rest of one).
            m.d.comb += i.ready.eq(room)
            with m.If(i.valid & room):
                m.d.sync += [o.valid.eq(1), o.p.eq(i.p)]
                with m.If(start):
                    m.d.sync += self.o_dest.eq(dest)
                    m.d.comb += self.events[Reason.RX_TLPS.value].eq(1)
                m.d.sync += in_pkt.eq(~i.p.last)
        return m
