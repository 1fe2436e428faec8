"""The PEACH2 chip: four Stratix IV PCIe ports around a router (002 section 3.3, Figure 2)."""

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .csr.block import CSR
from .dma.engine import DMA
from .params import (
    DEFAULT_BUFFER_BEATS,
    DEFAULT_DMA_BUFFER,
    DEFAULT_DMA_TAGS,
    DEFAULT_N_ROUTES,
    MAX_BUFFER_BEATS,
    MAX_ROUTES,
    N_DMA_CHANNELS,
    PUT_BAR,
)
from .put.engine import PutEngine
from .router.buffer import PacketBuffer
from .router.common import Port, Reason
from .router.crossbar import Crossbar
from .router.ingress import OUTPUTS, Ingress
from .router.linkstate import LTSSM_L0, LinkGate, LinkState  # noqa: F401 (LTSSM_L0: re-exported)
from .router.protect import ProtectionLog, window_view
from .router.ur import URGenerator
from .signatures import IngressConfigSignature, members_of
from .tlp.avalon_rx import AvalonST128RX
from .tlp.avalon_tx import AvalonST128TX
from .util import forward_members, members_with_prefix

__all__ = ["PEACH2", "PORT_ROLES", "MIN_ROUTES", "MAX_ROUTES", "MIN_BUFFER_BEATS",
           "MAX_BUFFER_BEATS", "TX_DEPTH"]


#: Role of each port's hard IP (002 section 3.3): N and E endpoints, W root port, S either.
PORT_ROLES = {"n": "ep", "e": "ep", "w": "rc", "s": None}

#: Fewest routing table entries the chip is built with (``MAX_ROUTES``: the most, from the
#: register map, where ROUTE[i] must end below the counters).
MIN_ROUTES = 8

#: Smallest per-input packet buffer the command line accepts, in 16-byte beats: a TLP of the
#: largest payload (MPS 256 bytes, 16 beats) with its header beat fits, rounded up to a power of
#: two.  ``MAX_BUFFER_BEATS`` (register map) is the most ``CONFIG.buffer_beats`` can report.
MIN_BUFFER_BEATS = 32

#: Depth of the TX adapters' FIFOs, in beats (``tx_depth``); the cut-through threshold
#: ``tx_start_level`` is at most this.
TX_DEPTH = 64

#: Crossbar inputs: the four ports, register completions, UR completions, DMA writes, DMA
#: read requests and the inline puts' writes.
_IN_CSR, _IN_UR, _IN_DMA_WR, _IN_DMA_RD, _IN_PUT = 4, 5, 6, 7, 8
#: What each crossbar input can be bound for (``Crossbar``'s ``reach``): a port's packets
#: anywhere; register completions and DMA reads to N only; UR completions, DMA writes and puts
#: to the four ports.
_TO_N = 1 << OUTPUTS.index("N")
_TO_PORTS = sum(1 << OUTPUTS.index(p.name) for p in Port)
CROSSBAR_REACH = (((1 << len(OUTPUTS)) - 1,) * len(Port)
                  + (_TO_N, _TO_PORTS, _TO_PORTS, _TO_N, _TO_PORTS))


class PEACH2(wiring.Component):
    """PEACH2: PCI Express router for Tightly Coupled Accelerators.

    Four ports, each the application side of a Stratix IV GX hard IP for PCI Express (Gen2 x8,
    Avalon-ST 128, the vendor's IP Compiler for PCI Express interface), with pins
    ``<p>_rx_st_*``, ``<p>_tx_st_*``, ``<p>_tx_cred`` and ``<p>_ltssm`` for ``p`` in ``n``,
    ``e``, ``w``, ``s``.

    Datapath of each port: RX adapter -> :class:`~peach2.router.ingress.Ingress` (classify,
    route, drop and count) -> :class:`~peach2.router.buffer.PacketBuffer` -> crossbar input.
    Crossbar outputs N, E, W, S feed the TX adapters; a request bound for N has its address
    translated (:func:`~peach2.router.egress.translate_header`) as it enters its packet buffer.
    Output CSR feeds the register block,
    whose completions, like the UR generator's, are crossbar inputs.  Output DMA takes the
    completions arriving on N to the :class:`~peach2.dma.engine.DMA` controller, whose writes
    (routed by the same table) and read requests (to N) are the last two crossbar inputs.

    Write protection (``docs/errors.md``): the ingresses of E, W and S check writes
    routed to N against the windows WIN[w]; a packet buffer discards the refused ones at its
    input and reports them (COUNT[p][PROTECTED]) to the
    :class:`~peach2.router.protect.ProtectionLog` behind
    PROT_STATUS and PROT_SOURCES.  With PROT_CONTROL.stamp the DMA's writes, like the host's
    writes into the TCA window (at N's ingress), carry NODE in requester ID bits [15:8].

    Link loss (``docs/errors.md``, "Reset and link loss"): :class:`LinkState`
    registers each ``<p>_ltssm`` and keeps PORT_STATUS[p].dropping; while a port drops, the
    ingresses mark routed packets toward it (``o_linkdown``, discarded at their packet buffer,
    COUNT[in][LINK_DOWN]), the DMA ends a channel writing there (DST_LINK_DOWN), and the
    port's :class:`LinkGate` discards what reaches its crossbar output
    (COUNT[p][LINK_FLUSHED]) while its TX adapter is held in reset.

    Parameters
    ----------
    n_routes : int
        Routing table entries, MIN_ROUTES..MAX_ROUTES (8..16).
    buffer_beats : int
        Per-input packet buffer, in 16-byte beats (default 128: eight 256-byte TLPs).
    s_role : "rc" or "ep"
        Role of the S port's hard IP (recorded for the synthesis flow and in CONFIG).
    tx_start_level : int or None
        TX adapters' cut-through threshold in beats (None: store-and-forward); TLPs of one or
        two Avalon beats are always held whole.
    tx_depth : int
        TX adapters' FIFOs, in beats (the packet buffers are at the inputs; up to 64 beats the
        FIFO is distributed RAM and adds one cycle, deeper it is block RAM and adds two).

    Members
    -------
    <p>_rx_st_*, <p>_tx_st_*, <p>_tx_cred : hard IP application interface of port p.
    <p>_ltssm : In(5)
        The hard IP's LTSSM state (PORT_STATUS, registered; link up in L0, else the port drops
        traffic toward it).
    n_pcie_id : In(16)
        Bus/device/function of the N endpoint (from the hard IP's configuration output
        ``tl_cfg_ctl``, decoded by the platform wrapper); completer ID of completions.
    n_app_msi_req, n_app_msi_num : Out ; n_app_msi_ack : In
        MSI request to the N hard IP (held until acknowledged).
    n_ko_cpl_spc_vc0 : In(20)
        The N hard IP's completion buffer (header credits [7:0], 16-byte data credits [19:8]);
        the DMA keeps its outstanding reads' completions within it (0: no limit).
    """

    def __init__(self, *, n_routes=DEFAULT_N_ROUTES, buffer_beats=DEFAULT_BUFFER_BEATS, s_role="rc",
                 tx_start_level=1, tx_depth=TX_DEPTH, dma_tags=DEFAULT_DMA_TAGS,
                 dma_buffer=DEFAULT_DMA_BUFFER):
        if n_routes < MIN_ROUTES:
            raise ValueError(f"the routing table needs at least {MIN_ROUTES} entries, "
                             f"not {n_routes}")
        if s_role not in ("rc", "ep"):
            raise ValueError(f"s_role must be 'rc' or 'ep', not {s_role!r}")
        #: Names the design for the simulation runner's netlist cache: the class
        #: and every constructor argument.
        self.design_key = (f"PEACH2(n_routes={n_routes}, buffer_beats={buffer_beats}, "
                           f"s_role={s_role!r}, tx_start_level={tx_start_level!r}, "
                           f"tx_depth={tx_depth}, dma_tags={dma_tags}, dma_buffer={dma_buffer})")
        self.n_routes = n_routes
        self.buffer_beats = buffer_beats
        self._dma = DMA(n_routes=n_routes, n_tags=dma_tags, buffer_bytes=dma_buffer)
        self.dma_tags = dma_tags
        self.dma_buffer = dma_buffer
        self.s_role = s_role
        self.port_roles = {**PORT_ROLES, "s": s_role}
        self._rx = {p.name.lower(): AvalonST128RX() for p in Port}
        # Each TX adapter is flushed (held in reset) while its port drops traffic (link loss).
        self._tx = {p.name.lower(): AvalonST128TX(start_level=tx_start_level, depth=tx_depth)
                    for p in Port}
        self._tx_flush = {p: Signal(name=f"{p}_tx_flush") for p in self._tx}
        members = {}
        for p in self._rx:
            for adapter, prefix in ((self._rx[p], "rx_st_"), (self._tx[p], "tx_")):
                members.update({f"{p}_{n}": m
                                for n, m in members_with_prefix(adapter, prefix).items()})
            members[f"{p}_ltssm"] = In(5)
        members.update({
            "n_pcie_id":     In(16),
            "n_app_msi_req": Out(1),
            "n_app_msi_num": Out(5),
            "n_app_msi_ack": In(1),
            "n_ko_cpl_spc_vc0": In(20),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        ports = [p.name.lower() for p in Port]
        m.submodules.csr = csr = CSR(n_routes=self.n_routes, buffer_beats=self.buffer_beats,
                                     s_is_rc=self.s_role == "rc", dma_tags=self.dma_tags,
                                     dma_buffer=self.dma_buffer)
        m.submodules.dma = dma = self._dma
        m.submodules.put = put = PutEngine(n_routes=self.n_routes)
        m.submodules.ur = ur = URGenerator(len(ports))
        m.submodules.xbar = xbar = Crossbar(n_in=len(CROSSBAR_REACH), n_out=len(OUTPUTS),
                                            reach=CROSSBAR_REACH)

        m.d.comb += [
            csr.completer_id.eq(self.n_pcie_id),
            csr.pcie_id.eq(self.n_pcie_id),
            ur.completer_id.eq(self.n_pcie_id),
        ]

        # Link state: each port's LTSSM registered at the input; ``dropping`` per
        # port, and per route entry (registered) for the ingresses and the DMA.
        m.submodules.links = links = LinkState()
        route_down = Signal(self.n_routes)
        m.d.sync += route_down.eq(Cat(*(links.dropping.bit_select(entry.port, 1)
                                        for entry in csr.route)))

        ingresses, buffers = [], []
        for index, p in enumerate(ports):
            rx, tx = self._rx[p], self._tx[p]
            m.submodules[f"{p}_rx"] = rx
            m.submodules[f"{p}_tx"] = ResetInserter(self._tx_flush[p])(tx)
            forward_members(m, rx, self, members_with_prefix(rx, "rx_st_"), f"{p}_")
            forward_members(m, tx, self, members_with_prefix(tx, "tx_"), f"{p}_")

            m.submodules[f"{p}_ingress"] = ing = Ingress(Port(index), n_routes=self.n_routes)
            m.submodules[f"{p}_buffer"] = buf = PacketBuffer(
                depth=self.buffer_beats, dest_width=len(OUTPUTS),
                translate_bit=OUTPUTS.index("N"))
            wiring.connect(m, rx.o_tlp, ing.i_tlp)
            wiring.connect(m, ing.o_tlp, buf.i_tlp)
            wiring.connect(m, ing.o_ur, ur.i_req[index])
            wiring.connect(m, buf.o_tlp, xbar.i[index])
            ingresses.append(ing)
            buffers.append(buf)
            m.d.comb += [
                buf.i_dest.eq(ing.o_dest),
                buf.i_refuse.eq(ing.o_refuse),
                buf.i_linkdown.eq(ing.o_linkdown),
                buf.offset.eq(csr.node_offset),
                xbar.i_dest[index].eq(buf.o_dest),
            ]

            # The port's gate: while its link is down, what reaches its output is discarded.
            m.submodules[f"{p}_gate"] = gate = LinkGate()
            out = xbar.o[OUTPUTS.index(p.upper())]
            wiring.connect(m, out, gate.i_tlp)
            wiring.connect(m, gate.o_tlp, tx.i_tlp)
            m.d.comb += [gate.dropping.eq(links.dropping[index]),
                         links.busy[index].eq(gate.busy),
                         links.ltssm[index].eq(getattr(self, f"{p}_ltssm"))]
            m.d.comb += self._tx_flush[p].eq(links.dropping[index])

            # Counters: COUNT[port][reason].
            def count(reason, strobe, base=16 * index):
                m.d.comb += csr.count_inc[base + reason.value].eq(strobe)
            for reason in Reason:
                if reason not in (Reason.TX_TLPS, Reason.MALFORMED, Reason.RX_ERR):
                    strobe = ing.events[reason.value]
                    if index == Port.N.value and reason == Reason.UNEXPECTED_CPL:
                        strobe = strobe | dma.unexpected_cpl    # the DMA owns N's tags
                    if index == Port.N.value and reason == Reason.POISONED:
                        strobe = strobe | dma.poisoned_cpl      # N's completions go there
                    if reason == Reason.PROTECTED:
                        strobe = buf.refused        # discarded at the buffer's input
                    if reason == Reason.LINK_DOWN:
                        strobe = buf.link_dropped   # likewise
                    if reason == Reason.LINK_FLUSHED:
                        strobe = gate.flushed       # discarded at the port's output
                    count(reason, strobe)
            count(Reason.MALFORMED, rx.malformed_event)
            count(Reason.RX_ERR, rx.err_event)
            count(Reason.TX_TLPS, tx.sent_event)

            m.d.comb += csr.port_status[index].eq(Cat(links.link_up[index],
                                                      links.ltssm_r[index],
                                                      links.dropping[index]))
        # Per port: some packet buffer holds a packet bound for it.
        for index in range(len(ports)):
            m.d.comb += links.queued[index].eq(
                Cat(*(buf.queued[OUTPUTS.index(ports[index].upper())] for buf in buffers)).any())

        # The route table, the enables, the protection windows and the source stamp, from the
        # register block to every ingress.
        cfg = self._ingress_config(m, csr)
        m.d.comb += cfg.route_down.eq(route_down)
        wiring.connect(m, cfg, *(ing.config for ing in ingresses))
        # PROT_STATUS and PROT_SOURCES: the writes the windows refused.
        m.submodules.prot_log = log = ProtectionLog()
        for index, buf in enumerate(buffers):
            m.d.comb += [log.refused[index].eq(buf.refused),
                         log.source[index].eq(buf.refused_source)]
        clear = csr.regmap["PROT_CLEAR"].all_fields[0].lsb
        m.d.comb += [log.clear.eq(csr.prot_clear_stb & csr.prot_clear_data[clear]),
                     csr.prot_status.eq(log.status), csr.prot_sources.eq(log.sources)]

        # Register completions and UR completions enter the crossbar like packets from a port.
        wiring.connect(m, csr.o_cpl, xbar.i[_IN_CSR])
        m.d.comb += xbar.i_dest[_IN_CSR].eq(_TO_N)
        wiring.connect(m, ur.o_tlp, xbar.i[_IN_UR])
        m.d.comb += xbar.i_dest[_IN_UR].eq(ur.o_dest)
        self._split_requests(m, xbar.o[OUTPUTS.index("CSR")], csr.i_req, put.i_req)

        # DMA: completions from N in, writes and read requests to the crossbar.
        wiring.connect(m, xbar.o[OUTPUTS.index("DMA")], dma.i_cpl)
        # The DMA's writes carry the source stamp (PROT_CONTROL.stamp) like the host's PIO.
        self._stamped(m, cfg, dma.o_wr, xbar.i[_IN_DMA_WR])
        wiring.connect(m, dma.o_rd, xbar.i[_IN_DMA_RD])
        m.d.comb += [
            xbar.i_dest[_IN_DMA_WR].eq(dma.o_wr_dest),
            xbar.i_dest[_IN_DMA_RD].eq(_TO_N),
            dma.routes.eq(csr.route),
            dma.route_down.eq(route_down),
            dma.node_offset.eq(csr.node_offset),
            dma.requester_id.eq(self.n_pcie_id),
            dma.cpl_space.eq(self.n_ko_cpl_spc_vc0),
        ]
        # The DMA registers (configuration, channels, register-mode slots) and their status.
        wiring.connect(m, csr=csr.dma, dma=members_of(dma, csr.dma.signature.flip()))

        # Inline puts: writes into BAR 4 in, memory writes to the crossbar.
        self._stamped(m, cfg, put.o_wr, xbar.i[_IN_PUT])
        m.d.comb += [
            xbar.i_dest[_IN_PUT].eq(put.o_dest),
            put.routes.eq(csr.route),
            put.route_down.eq(route_down),
            put.node_offset.eq(csr.node_offset),
            put.requester_id.eq(self.n_pcie_id),
            csr.put_status.eq(put.status),
            csr.put_done.eq(put.done),
            put.clear.eq(csr.put_clear_stb & csr.put_clear_data[0]),
        ]

        self._msi(m, csr, dma, put)
        return m

    @staticmethod
    def _stamped(m, cfg, src, dst):
        """Connect the write stream ``src`` to the crossbar input ``dst``, with the source stamp
        (PROT_CONTROL.stamp: NODE in requester ID bits [15:8]) like the host's PIO."""
        m.d.comb += [
            dst.valid.eq(src.valid), dst.p.eq(src.p),
            dst.p.hdr.mem32.requester_id.eq(Mux(cfg.stamp, cfg.stamp_id,
                                                src.p.hdr.mem32.requester_id)),
            src.ready.eq(dst.ready),
        ]

    @staticmethod
    def _split_requests(m, req, to_csr, to_put):
        """The register block's crossbar output carries BAR 0 requests and BAR 4 writes (the
        ingress sends both there); hand each packet whole to the register block or to the put
        engine, by its first beat's BAR hit."""
        inside = Signal()       # a packet's first beat went, its last not yet
        put_pkt = Signal()      # the packet under way goes to the put engine
        sel = Mux(inside, put_pkt, req.p.bar[PUT_BAR])
        m.d.comb += [
            to_csr.p.eq(req.p), to_put.p.eq(req.p),
            to_csr.valid.eq(req.valid & ~sel), to_put.valid.eq(req.valid & sel),
            req.ready.eq(Mux(sel, to_put.ready, to_csr.ready)),
        ]
        with m.If(req.valid & req.ready):
            m.d.sync += [inside.eq(~req.p.last), put_pkt.eq(sel)]

    def _msi(self, m, csr, dma, put):
        """MSI: one request at a time, held until the hard IP acknowledges it.  A register
        write to MSI, the DMA channels' per-descriptor interrupts and the puts' interrupts wait
        in ``pending`` (one bit per source; a source raised again before it was sent is sent
        once)."""
        vec_lsb = 0
        sources = [(csr.msi_req, csr.msi_num)] + [
            (dma.msi_req[c], csr.dma.ch_cfg[c][vec_lsb:vec_lsb + 5])
            for c in range(N_DMA_CHANNELS)] + [(put.msi_req, csr.put_cfg[vec_lsb:vec_lsb + 5])]
        pending = Signal(len(sources))
        raised = Signal(len(sources))
        sent = Signal(len(sources))
        vectors = [Signal(5, name=f"msi_vec{k}") for k in range(len(sources))]
        for k, (req, num) in enumerate(sources):
            m.d.comb += raised[k].eq(req)
            with m.If(req):
                m.d.sync += vectors[k].eq(num)
        with m.If(self.n_app_msi_req):
            with m.If(self.n_app_msi_ack):
                m.d.sync += self.n_app_msi_req.eq(0)
        with m.Elif(pending.any()):
            # The lowest pending source goes first.
            m.d.comb += sent.eq(pending & (~pending + 1))
            for k in reversed(range(len(sources))):
                with m.If(pending[k]):
                    m.d.sync += [self.n_app_msi_req.eq(1), self.n_app_msi_num.eq(vectors[k])]
        m.d.sync += pending.eq((pending & ~sent) | raised)

    def _ingress_config(self, m, csr):
        """Return an interface of :class:`~peach2.signatures.IngressConfigSignature` driven from
        the register block ``csr``."""
        cfg = IngressConfigSignature(self.n_routes).create(path=("ingress_config",))
        rm = csr.regmap

        def bit(reg, name):
            return getattr(csr, reg.lower())[next(f.lsb for f in rm[reg].fields
                                                  if f.name == name)]
        node = rm["NODE"].fields[0]
        m.d.comb += [
            cfg.route.eq(csr.route),
            cfg.pio_enable.eq(csr.pio_enable),
            cfg.route_enable.eq(csr.route_enable),
            cfg.protect_enable.eq(bit("PROT_CONTROL", "enable")),
            cfg.stamp.eq(bit("PROT_CONTROL", "stamp")),
            cfg.stamp_id.eq(Cat(self.n_pcie_id[:8], csr.node[node.lsb:node.lsb + node.width])),
        ]
        for w in range(len(cfg.windows)):
            m.d.comb += cfg.windows[w].eq(window_view(csr, rm, w))
        return cfg
