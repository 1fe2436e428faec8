"""Ingress: classify every TLP arriving on one port and decide where it goes."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import N_WINDOWS, PUT_BAR
from ..signatures import IngressConfigSignature
from ..tlp.layouts import Type
from ..tlp.stream import TLPBeat, TLPStream
from .common import Port, Reason, URRequest
from .protect import crosses_page, window_verdict
from .table import request_address, route_matches

__all__ = ["Ingress", "OUTPUTS"]


#: The reasons the ingress drops a TLP for (the values of its drop decision).
_DROP_REASONS = (Reason.POISONED, Reason.UNEXPECTED_CPL, Reason.READ_REJECTED,
                 Reason.WINDOW_CLOSED, Reason.UNROUTABLE, Reason.UNSUPPORTED)

#: Crossbar outputs an ingress can choose, in one-hot bit order of ``o_dest``.
OUTPUTS = ("N", "E", "W", "S", "CSR", "DMA")


class Ingress(wiring.Component):
    """Classify the TLPs received on one port (002 sections 3.3 and 3.5, 000 section 2.2).

    Decided on the header of the first beat, in two pipeline stages (two cycles from ``i_tlp``
    to ``o_tlp``):

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
    N: memory write into the put window      CSR output (the top hands it to the put
    (BAR 4)                                  engine, ``docs/put.md``)
    N: memory read into the put window       dropped, READ_REJECTED
    N: memory write into the TCA window      routed, if CONTROL.PIO_ENABLE (else
                                             WINDOW_CLOSED)
    N: memory read into the TCA window       dropped, READ_REJECTED (remote reads are not
                                             part of TCA)
    E/W/S: memory write                      routed, if CONTROL.ROUTE_ENABLE (else
                                             WINDOW_CLOSED)
    E/W/S: memory read                       dropped, READ_REJECTED
    configuration, I/O, message, other BAR   dropped, UNSUPPORTED
    routed, but no table entry matches       dropped, UNROUTABLE
    E/W/S: memory write routed to N that     forwarded with ``o_refuse``: the packet
    the protection windows refuse            buffer discards it, PROTECTED (below)
    routed, the entry's port link down       forwarded with ``o_linkdown``: the packet
    (``config.route_down``)                  buffer discards it, LINK_DOWN
    ======================================  =========================================

    Protection (``docs/errors.md``; the idea is Tofu's STAG, 004 section 4.3): on
    E, W and S, with ``config.protect_enable``, a write routed to N must lie in an open
    writable window admitting its source node (requester ID bits [15:8]) and in no open
    read-only window admitting it, and must not cross 4 KiB.  Stage A compares the header with
    every window beside the route compare and registers, per window, "admits" and "refuses",
    and the 4 KiB crossing; stage B registers the verdict for a packet whose route leaves
    through N into ``o_refuse`` (held with ``o_dest`` for the whole packet) and passes the
    packet on without ``first``, so that the packet buffer stores neither its beats nor a
    header.  The windows are read once per TLP, in the cycle stage A takes its header.  On N,
    with ``config.stamp``, writes into the TCA window leave with ``config.stamp_id`` as their
    requester ID (the source stamp).

    Every dropped non-posted request is answered: its requester ID, tag, traffic class and
    attributes go to ``o_ur`` for an Unsupported Request completion on this port.  A dropped
    TLP is counted and answered on its last beat, and only if that beat carries no ``err``
    (a TLP the RX adapter found bad after its first beat is counted there, as MALFORMED or
    RX_ERR, and not answered).  Dropped TLPs are consumed at one beat per cycle and disturb
    nothing else.  Locked reads are UNSUPPORTED.

    Timing (the budget: at most 6 LUT levels between registers, ``docs/synthesis.md``):

    - stage A registers the beat with what its header alone gives: the class of the TLP, the
      table compares (carry chains) reduced to the one-hot first match, the UR fields;
    - stage B decides from those registers (with the CONTROL enable bit of this cycle) and
      registers the beat into ``o_tlp``, or consumes it as dropped;
    - ``i_tlp.ready`` is a register: a skid register behind stage A takes the one beat that
      arrives while stage B is stalled, and ``ready`` falls until it has moved on;
    - ``o_ur`` is a register, loaded from stage B: ``o_ur.ready`` only says whether it is free,
      so ``i_tlp.ready`` never depends on the UR generator (nor, through it, on other ports);
    - ``events`` are decoded from registers (one LUT level), one cycle after the beat left
      stage B.

    Members
    -------
    i_tlp : In(TLPStream())
        From the port's RX adapter.
    o_tlp : Out(TLPStream())
        Forwarded TLPs, two cycles later at the earliest.
    o_dest : Out(6)
        One-hot crossbar output (bit order :data:`OUTPUTS`), valid with the first beat of
        ``o_tlp``.
    o_ur : Out(stream.Signature(URRequest))
        Requests to answer with UR, from a register.
    config : In(:class:`~peach2.signatures.IngressConfigSignature`)
        From the register block: the route table (``config.route``), the CONTROL bits
        ``config.pio_enable`` and ``config.route_enable``, the protection windows and the
        source stamp.
    o_refuse : Out(1)
        With ``o_dest`` (a register, held for the packet): the protection windows refuse this
        packet, which goes to N; it then comes without ``first``.
    o_linkdown : Out(1)
        With ``o_dest`` (a register, held for the packet): the packet's route entry leads to a
        port whose link is down (``config.route_down``); it comes without ``first`` and the
        packet buffer discards it (LINK_DOWN, ``docs/errors.md``).
    events : Out(ArrayLayout(1, len(Reason)))
        One-cycle strobes indexed by :class:`~peach2.router.common.Reason`, from registers.
    """

    def __init__(self, port, *, n_routes=8, csr_bar=0, tca_bar=2, put_bar=PUT_BAR):
        self.port = Port(port)
        self.csr_bar = csr_bar
        self.tca_bar = tca_bar
        self.put_bar = put_bar
        super().__init__({
            "i_tlp":        In(TLPStream()),
            "o_tlp":        Out(TLPStream()),
            "o_dest":       Out(len(OUTPUTS)),
            "o_ur":         Out(stream.Signature(URRequest)),
            "config":       In(IngressConfigSignature(n_routes)),
            "events":       Out(data.ArrayLayout(1, len(Reason))),
            "o_refuse":     Out(1),
            "o_linkdown":   Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        stage = self._stage_layout(len(self.config.route))
        a_next = self._stage_a(m, stage)
        skid = self._skid(m, stage, a_next)
        self._stage_b(m, *skid)
        return m

    @staticmethod
    def _stage_layout(n_routes):
        """What stage A registers with each beat."""
        return data.StructLayout({
            "beat":      TLPBeat,
            "first":     n_routes,      # one-hot: the lowest-numbered matching table entry
            "fwd_fixed": 1,             # forwarded whatever the table says (to DMA or CSR)
            "to_csr":    1,             # with fwd_fixed: to CSR, else to DMA
            "routable":  1,             # a TCA-window write: routed if enabled and it hits
            "fwd_open":  1,             # fwd_fixed, or routable and hit: forwarded if enabled
            "good_end":  1,             # the beat is a last one without `err`
            "reason":    Reason,        # the drop reason when neither of the above
            "answer":    1,             # non-posted: a drop is answered with UR
            "ur":        URRequest,
            # Protection windows (E/W/S only): per window, it admits / refuses the write; and
            # the write crosses a 4 KiB boundary.
            "win_pass":  N_WINDOWS,
            "win_deny":  N_WINDOWS,
            "cross":     1,
        })

    def _stage_a(self, m, stage):
        """Stage A's combinational part: the beat with what its header alone gives."""
        i = self.i_tlp
        routes = self.config.route
        # == Stage A: classify the header and compare the address, register both with the beat ==
        # Only what needs the header bits is computed here; the decision itself (which needs the
        # table hit and the enable bits) is taken in stage B from these registered results.
        h = i.p.hdr
        fmt = h.common.fmt.as_value()
        typ = h.common.type.as_value()
        has_data = fmt[1]
        # Locked requests (MRdLk) are not memory requests here: they are UNSUPPORTED (and get
        # a locked UR completion).
        is_mem = typ == Type.MEM.value
        is_mwr = has_data & is_mem
        is_cpl = typ[1:] == (Type.CPL.value >> 1)      # CPL, CPL_LOCKED
        is_msg = typ[3:] == (Type.MSG.value >> 3)
        posted = is_mwr | is_msg
        on_n = self.port == Port.N

        a_next = Signal(stage)
        fwd_fixed = Signal()
        to_csr = Signal()
        routable = Signal()
        reason_fixed = Signal(Reason)
        hit = Signal()
        matches = route_matches(m, request_address(h), routes)
        m.d.comb += [
            a_next.beat.eq(i.p),
            a_next.first.eq(Cat(*(match & ~Cat(*matches[:k]).any()
                                  for k, match in enumerate(matches)))),
            hit.eq(Cat(*matches).any()),
            a_next.fwd_fixed.eq(fwd_fixed),
            a_next.to_csr.eq(to_csr),
            a_next.routable.eq(routable),
            a_next.reason.eq(reason_fixed),
            a_next.fwd_open.eq(fwd_fixed | (routable & hit)),
            a_next.good_end.eq(i.p.last & ~i.p.err),
            a_next.answer.eq(~posted & ~is_cpl),
            a_next.ur.requester_id.eq(h.mem32.requester_id),
            a_next.ur.tag.eq(h.mem32.tag | (h.common.t8 << 8) | (h.common.t9 << 9)),
            a_next.ur.tc.eq(h.common.tc),
            a_next.ur.attr.eq(h.common.attr | (h.common.attr2 << 2)),
            a_next.ur.locked.eq(typ == Type.MEM_LOCKED.value),
        ]
        if self.port != Port.N:
            # Protection: checked once per TLP, against this cycle's registers.
            passed, denied = window_verdict(h, self.config.windows)
            m.d.comb += [a_next.win_pass.eq(Cat(*passed)), a_next.win_deny.eq(Cat(*denied)),
                         a_next.cross.eq(crosses_page(h))]
        # The Ingress table, in its order, without the parts that need the table or the enables.
        with m.If(is_cpl & on_n):
            # Poisoned ones too: the DMA fails the read they answer (CPL_POISONED).
            m.d.comb += fwd_fixed.eq(1)
        with m.Elif(h.common.ep):
            m.d.comb += reason_fixed.eq(Reason.POISONED)
        with m.Elif(is_cpl):
            m.d.comb += reason_fixed.eq(Reason.UNEXPECTED_CPL)
        with m.Elif(is_mem & on_n & i.p.bar[self.csr_bar]):
            m.d.comb += [fwd_fixed.eq(1), to_csr.eq(1)]
        with m.Elif(is_mem & on_n & i.p.bar[self.put_bar]):
            # Inline puts: written into BAR 4, taken off the CSR output by the top.
            with m.If(has_data):
                m.d.comb += [fwd_fixed.eq(1), to_csr.eq(1)]
            with m.Else():
                m.d.comb += reason_fixed.eq(Reason.READ_REJECTED)
        with m.Elif(is_mem & ((self.port != Port.N) | i.p.bar[self.tca_bar])):
            with m.If(has_data):
                m.d.comb += routable.eq(1)
            with m.Else():
                m.d.comb += reason_fixed.eq(Reason.READ_REJECTED)
        with m.Else():
            m.d.comb += reason_fixed.eq(Reason.UNSUPPORTED)
        return a_next

    def _skid(self, m, stage, a_next):
        """Stage A's register and the skid register behind it; what stage B reads."""
        i = self.i_tlp
        # Stage A register `a_beat` with a skid register `s_beat` behind it, so that `i_tlp.ready`
        # is a register: it falls for the cycle after stage B failed to take `a_beat`, which then
        # waits in `s_beat`.  Stage B reads `s_beat` when it is full (it is older), else `a_beat`.
        a_beat = Signal(stage)
        a_valid = Signal()
        s_beat = Signal(stage)
        s_valid = Signal()
        x_beat = Signal(stage)
        x_valid = Signal()
        x_ready = Signal()
        take = Signal()
        m.d.comb += [
            i.ready.eq(~s_valid),
            x_beat.eq(Mux(s_valid, s_beat, a_beat)),
            x_valid.eq(s_valid | a_valid),
            take.eq(x_valid & x_ready),
        ]
        with m.If(~s_valid):
            m.d.sync += [a_beat.eq(a_next), a_valid.eq(i.valid),
                         s_beat.eq(a_beat), s_valid.eq(a_valid & ~take)]
        with m.Elif(take):
            m.d.sync += s_valid.eq(0)
        return a_beat, s_beat, s_valid, x_beat, x_valid, x_ready, take

    def _stage_b(self, m, a_beat, s_beat, s_valid, x_beat, x_valid, x_ready, take):
        """Stage B: decide on a first beat, forward (register) or drop; UR requests; events."""
        o = self.o_tlp
        routes = self.config.route
        # == Stage B: decide on a first beat; forward (register) or drop ======================
        b = x_beat.beat
        window_open = self.config.pio_enable if self.port == Port.N else self.config.route_enable
        forward = Signal()
        dest = Signal(len(OUTPUTS))
        reason = Signal(Reason)
        m.d.comb += [
            forward.eq(x_beat.fwd_fixed | (x_beat.fwd_open & window_open)),
            reason.eq(Mux(x_beat.routable,
                          Mux(window_open, Reason.UNROUTABLE, Reason.WINDOW_CLOSED),
                          x_beat.reason)),
        ]
        down = Signal()         # the route's port is dropping (link down): discard
        with m.If(x_beat.fwd_fixed):
            m.d.comb += dest.eq(Mux(x_beat.to_csr, 1 << OUTPUTS.index("CSR"),
                                    1 << OUTPUTS.index("DMA")))
        with m.Else():
            # The port of the one entry set in `first` (none: no hit, the packet is dropped).
            for p in Port:
                m.d.comb += dest[OUTPUTS.index(p.name)].eq(
                    Cat(*(x_beat.first[k] & (entry.port == p)
                          for k, entry in enumerate(routes))).any())
            # Link loss: as wide and deep as one bit of `dest`.
            m.d.comb += down.eq(Cat(*(x_beat.first[k] & self.config.route_down[k]
                                      for k in range(len(routes)))).any())

        # Protection: the windows' verdict on a routed write going to N, registered into
        # ``o_refuse`` with ``o_dest`` (the packet buffer discards the packet).  Worked
        # out for each of the two registers stage B may read, then picked (as ``x_ready``).
        def refuse_if(st):
            bad = ~st.win_pass.any() | st.win_deny.any() | st.cross
            return st.routable & self.config.protect_enable & bad
        refuse = Signal()
        refuse_n = Signal()
        if self.port != Port.N:
            m.d.comb += [refuse.eq(Mux(s_valid, refuse_if(s_beat), refuse_if(a_beat))),
                         refuse_n.eq(refuse & dest[OUTPUTS.index("N")])]

        # A dropped packet is counted, and answered with UR, on its last beat, and only when that
        # beat carries no `err`: a packet the RX adapter found bad after its first beat is its
        # MALFORMED or RX_ERR, not a request to answer.
        dropping = Signal()             # in a dropped packet after its first beat
        in_pkt = Signal()               # in a forwarded packet after its first beat
        reason_held = Signal(Reason)
        answer_held = Signal()
        ur_held = Signal(URRequest)

        deciding = Signal()
        drop = Signal()
        drop_reason = Signal(Reason)
        answer = Signal()
        ur_req = Signal(URRequest)
        good_end = Signal()
        m.d.comb += [
            deciding.eq(b.first & ~in_pkt & ~dropping),
            drop.eq(dropping | (deciding & ~forward)),
            drop_reason.eq(Mux(deciding, reason, reason_held)),
            answer.eq(Mux(deciding, x_beat.answer, answer_held)),
            ur_req.eq(Mux(deciding, x_beat.ur, ur_held)),
            good_end.eq(x_beat.good_end),
        ]
        with m.If(deciding):
            # Repeated while the beat waits; used on the later beats of a dropped packet.
            m.d.sync += [reason_held.eq(reason), answer_held.eq(x_beat.answer),
                         ur_held.eq(x_beat.ur)]

        # UR requests leave from a register: `o_ur.ready` only decides whether it is free.
        room = ~o.valid | o.ready
        ur_free = ~self.o_ur.valid | self.o_ur.ready
        # ``x_ready`` is worked out for each of the two registers stage B may read and then
        # picked by ``s_valid``, so the pick is its last LUT level rather than its first (the
        # same value as ``Mux(drop, ~(good_end & answer) | ur_free, room)``).
        def ready_if(st):
            st_deciding = st.beat.first & ~in_pkt & ~dropping
            st_forward = st.fwd_fixed | (st.fwd_open & window_open)
            st_drop = dropping | (st_deciding & ~st_forward)
            st_answer = Mux(st_deciding, st.answer, answer_held)
            return Mux(st_drop, ~(st.good_end & st_answer) | ur_free, room)
        m.d.comb += x_ready.eq(Mux(s_valid, ready_if(s_beat), ready_if(a_beat)))
        # Stage B refuses a beat only in two cases: a forwarded beat with the output register
        # full, and the last beat of an answered drop with the UR register full.

        need_ur = good_end & answer
        with m.If(ur_free):
            # Loaded whenever the register is free or leaving, valid only for an answer (stage
            # B takes such a beat exactly when the register is free).
            m.d.sync += [self.o_ur.valid.eq(x_valid & drop & need_ur), self.o_ur.p.eq(ur_req),
                         self.o_ur.p.port.eq(self.port)]

        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(room):
            # The beat is loaded whenever the output register is free or leaving; it is valid
            # only for a forwarded beat (stage B takes every beat then: x_ready = room).
            m.d.sync += [o.valid.eq(x_valid & ~drop), o.p.eq(b)]
            if self.port == Port.N:
                # The source stamp: host writes into the TCA window carry this node's number.
                m.d.sync += o.p.hdr.mem32.requester_id.eq(
                    Mux(x_beat.routable & self.config.stamp, self.config.stamp_id,
                        b.hdr.mem32.requester_id))
            # A refused packet leaves without `first`: the buffer stores no header for it.
            # So does a packet toward a port whose link is down.
            m.d.sync += o.p.first.eq(b.first & ~refuse_n & ~down)
            with m.If(deciding):
                m.d.sync += [self.o_dest.eq(dest), self.o_refuse.eq(refuse_n),
                             self.o_linkdown.eq(down)]

        # Written without `take` (see above): a refused drop keeps its state.
        with m.If(x_valid & drop):
            m.d.sync += dropping.eq(~b.last | (dropping & need_ur & ~ur_free))
        with m.If(x_valid & ~drop & room):
            m.d.sync += in_pkt.eq(~b.last)

        # Event strobes: what stage B did is registered (a beat taken, a first beat, a counted
        # drop with its reason and whether it was answered) and decoded into the strobes from
        # those registers, one cycle after the beat left stage B.
        took = Signal()
        took_first = Signal()
        took_end = Signal()
        took_answer = Signal()
        took_reason = Signal(Reason)
        m.d.sync += [
            took.eq(take),
            took_first.eq(deciding),
            took_end.eq(drop & good_end),
            took_answer.eq(answer),
            took_reason.eq(drop_reason),
        ]
        m.d.comb += [
            self.events[Reason.RX_TLPS.value].eq(took & took_first),
            self.events[Reason.UR_SENT.value].eq(took & took_end & took_answer),
        ]
        for r in _DROP_REASONS:
            m.d.comb += self.events[r.value].eq(took & took_end & (took_reason == r))
