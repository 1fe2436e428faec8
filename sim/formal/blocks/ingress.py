"""Harness: :class:`~peach2.router.ingress.Ingress`, the route decision and its output stream."""

from amaranth.hdl import Const, Signal, Value

from peach2.router.common import Port
from peach2.router.ingress import OUTPUTS, Ingress
from peach2.tlp.layouts import Type
from peach2.tlp.stream import TLPBeat

from ..contract import RULES, StreamContract
from ..harness import Harness
from .reference import address_of, first_match

__all__ = ["IngressHarness"]


class IngressHarness(Harness):
    """One port's ingress with every route table, enable bit and link state (all ``AnyConst``)
    and any traffic that obeys the stream contract.

    ``route``: every packet leaving ``o_tlp`` goes where the documented function sends it
    (``Ingress`` docstring table, ``docs/architecture.md`` "Address map and routing"): a
    completion on N to DMA, a memory request hitting the register BAR on N to CSR, a memory
    write into the TCA window (N) or any memory write (E/W/S), with the window's enable bit
    set, to the port of the first enabled entry with ``lower <= (A & mask) <= upper``, marked
    ``o_linkdown`` (and sent without ``first``) when that entry's ``route_down`` is set.
    ``forward``: a packet the function forwards is never dropped.  Protection is off
    (``protect_enable`` 0): the protection windows are another property.
    """

    PROPERTIES = {
        **RULES,
        "route": "a forwarded packet's o_dest and o_linkdown are the documented route of its "
                 "header, for every address and table",
        "forward": "a packet the documented function forwards is not dropped",
    }

    def __init__(self, prop, *, mutant=None, port="E", n_routes=2):
        super().__init__(prop, mutant=mutant)
        self.port = Port[port]
        self.n_routes = n_routes

    def build(self, m, platform):
        dut = self.add_block(m, "dut", Ingress(self.port, n_routes=self.n_routes), platform)
        config = dut.config
        for name in ("route", "pio_enable", "route_enable", "windows", "stamp", "stamp_id",
                     "route_down"):
            port = getattr(config, name)
            m.d.comb += port.eq(self.constant(m, len(Value.cast(port)), f"cfg_{name}"))
        m.d.comb += config.protect_enable.eq(0)
        i, o = dut.i_tlp, dut.o_tlp
        m.d.comb += [i.valid.eq(self.anyseq(m, 1, "in_valid")),
                     i.p.eq(self.anyseq(m, TLPBeat, "in_p")),
                     o.ready.eq(self.anyseq(m, 1, "out_ready")),
                     dut.o_ur.ready.eq(self.anyseq(m, 1, "ur_ready"))]
        StreamContract(i, "in").assume(m)

        # The documented function, on the header at the output (the ingress forwards the
        # header unchanged but for the requester ID of a stamped write on N).
        want_dest, want_down, _ = self._decide(m, o.p, config, "out")
        # ``head``: the beat in the output register is a packet's first (stage B loaded it
        # while deciding), followed from the ingress's own stage B.
        head_reg = Signal(name="head_reg")
        with m.If(~o.valid | o.ready):
            m.d.sync += head_reg.eq(self.internal("deciding") & ~self.internal("drop"))
        head = o.valid & head_reg
        # A packet marked for discarding (o_refuse, o_linkdown) comes without ``first``: its
        # first beat is the one stage B decided on.
        out = StreamContract(o, "out",
                             first=o.p.first | ((dut.o_refuse | dut.o_linkdown) & head_reg))
        out.assert_into(self, m)
        self.claim(m, "route", ~head | ((dut.o_dest == want_dest) & (dut.o_linkdown == want_down)
                                        & (o.p.first == ~want_down)))

        # Stage B's decision on a packet's first beat (internal): a forwarded one is not dropped.
        x_beat = TLPBeat(self.internal("x_beat")[:TLPBeat.as_shape().size])
        deciding, drop = self.internal("deciding"), self.internal("drop")
        x_valid = self.internal("x_valid")
        _, _, x_forward = self._decide(m, x_beat, config, "x")
        self.claim(m, "forward", ~(x_valid & deciding & drop & x_forward))

        # Lemmas: stage A's and the skid register's first-match bits are those of their beat's
        # header (the table is constant), so k-induction need not reach back to their load.
        layout = Ingress._stage_layout(self.n_routes)     # the ingress's own record layout
        for name, valid in (("a_beat", "a_valid"), ("s_beat", "s_valid")):
            st = layout(self.internal(name))
            if self.mutant is None:
                fixed, to_csr, routable = self._classify(st.beat)
                hit = first_match(address_of(st.beat.hdr), config.route)
                self.lemma(m, ~self.internal(valid) | (
                    (st.first == hit) & (st.fwd_fixed == fixed) & (st.to_csr == to_csr)
                    & (st.routable == routable) & (st.fwd_open == (fixed | (routable & hit.any())))))

    def _kinds(self, beat):
        """``(hdr, has_data, is_cpl, is_mem, on_n)`` of a first beat's header, on this port."""
        hdr = beat.hdr
        typ = hdr.common.type.as_value()
        is_cpl = (typ == Type.CPL.value) | (typ == Type.CPL_LOCKED.value)
        return (hdr, hdr.common.fmt.as_value()[1], is_cpl, typ == Type.MEM.value,
                Const(int(self.port == Port.N), 1))

    def _classify(self, beat):
        """``(fixed, to_csr, routable)`` of a first beat: forwarded to DMA or CSR whatever the
        table says, to CSR, or a routed write (the ``Ingress`` docstring table, in order)."""
        hdr, has_data, is_cpl, is_mem, on_n = self._kinds(beat)
        fixed_dma = on_n & is_cpl
        rest = ~fixed_dma & ~hdr.common.ep & ~is_cpl
        to_csr = rest & on_n & is_mem & beat.bar[0]
        routable = rest & ~to_csr & is_mem & has_data & (~on_n | beat.bar[2])
        return fixed_dma | to_csr, to_csr, routable

    def _decide(self, m, beat, config, name):
        """``(dest, down, forward)``: the documented route of a first beat ``beat``."""
        hdr, has_data, is_cpl, is_mem, on_n = self._kinds(beat)
        first = Signal(self.n_routes, name=f"{name}_want_first")
        m.d.comb += first.eq(first_match(address_of(hdr), config.route, self.mutant))
        routed_port = Signal(len(OUTPUTS), name=f"{name}_want_port")
        for k, entry in enumerate(config.route):
            with m.If(first[k]):
                for p in Port:
                    m.d.comb += routed_port[OUTPUTS.index(p.name)].eq(entry.port == p)
        down = (first & config.route_down).any()
        window_open = config.pio_enable if self.port == Port.N else config.route_enable
        dest = Signal(len(OUTPUTS), name=f"{name}_want_dest")
        forward = Signal(name=f"{name}_want_forward")
        with m.If(on_n & is_cpl):
            m.d.comb += [dest.eq(1 << OUTPUTS.index("DMA")), forward.eq(1)]
        with m.Elif(hdr.common.ep | is_cpl):
            pass
        with m.Elif(on_n & is_mem & beat.bar[0]):
            m.d.comb += [dest.eq(1 << OUTPUTS.index("CSR")), forward.eq(1)]
        with m.Elif(is_mem & has_data & (~on_n | beat.bar[2]) & window_open & first.any()):
            m.d.comb += [dest.eq(routed_port), forward.eq(1)]
        want_down = Signal(name=f"{name}_want_down")
        routed = ~(on_n & is_cpl) & ~(on_n & is_mem & beat.bar[0])
        m.d.comb += want_down.eq(forward & routed & down)
        return dest, want_down, forward
