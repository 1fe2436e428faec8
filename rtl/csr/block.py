"""The register block: BAR 0 decode, generated from the register map.

:class:`CSR` serves memory reads and writes of BAR 0 arriving on the internal TLP stream and
answers reads with completions.  Its ports, its write decode and its read multiplexer are built by
loops over :data:`~peach2.csr.regmap.REGMAP` (or the map given); only the two action registers
(``COUNTER_CLEAR``, ``MSI``) and the typed views for the router are written by hand.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..params import (
    DEFAULT_BUFFER_BEATS,
    DEFAULT_DMA_BUFFER,
    DEFAULT_DMA_TAGS,
    DEFAULT_N_ROUTES,
    N_DMA_CHANNELS,
    N_DMA_SLOTS,
)
from ..router.common import RouteEntry
from ..signatures import DmaControlSignature
from ..tlp.stream import TLPBeat, TLPStream
from ..util import count_saturating
from .decode import decode_request
from .description import Access
from .readmux import read_pipeline
from .regmap import peach2_regmap

__all__ = ["CSR", "RouteEntry"]



#: Action registers with hardware of their own here; every other action register gets a
#: generic strobe and data port (``<name>_stb``, ``<name>_data``).
_ACTIONS = ("COUNTER_CLEAR", "MSI")

#: Names of the ports the ``dma`` interface carries.
_DMA_MEMBERS = frozenset(DmaControlSignature().members)


def _written(w, dw):
    """The write command ``w`` writes DW ``dw`` this cycle."""
    return w.en & (w.addr == dw)


class CSR(wiring.Component):
    """PEACH2 control registers (BAR 0): decode, storage, counters and read completions.

    Requests are served one at a time, in order.  A read of 1 DW, or of 2 DWs not crossing the
    end of the BAR, gets one CplD (status SC) whose data are the register values (0 for unmapped
    offsets and reserved bits); ``lower_address`` and ``byte_count`` follow the PCIe rules for
    ``first_be``/``last_be`` (a zero-length read returns 1 DW, byte count 1).  Longer reads get a
    Cpl with status CA, byte count 4.  Writes apply ``first_be``/``last_be``; longer writes are
    applied DW by DW, walking the addresses, at up to one DW per cycle.  ``docs/registers.md``
    lists the rules and the map.

    Timing: a read completion is valid 7 cycles after the read was taken (8 for 2 DWs): one cycle
    decodes the header into registers, and the read multiplexer has three stages (8:1 within a
    32-byte group, 8:1 over the groups of a 256-byte bank, 16:1 over banks).  A write's first
    DW shows on the ports 4 cycles after the first beat of its packet was taken, the following
    ones one per cycle (a later beat of a long write is not decoded again: its first DW shows 3
    cycles after it was taken).  Every register-to-register path is at most 5 LUT levels (Yosys,
    ALM mapping).  ``i_req.ready`` and every output are registers or constants (the ``rw`` ports
    and typed views are the storage registers themselves).

    Parameters
    ----------
    n_routes : int
        Route table entries (1..16).
    buffer_beats : int
        Router buffer depth in beats; only reported in ``CONFIG``.
    s_is_rc : bool
        Port S is a root port; only reported in ``CONFIG``.
    regmap : RegisterMap or None
        The map to implement; ``None`` builds :func:`~peach2.csr.regmap.peach2_regmap` from the
        parameters above.  A given map must have been built with the same parameters.
    counter_width : int
        Bits of each counter (1..32), 32 for the chip.  Narrower counters saturate earlier and
        read zero-extended; tests use them.

    Members
    -------
    i_req : In(TLPStream())
        Memory requests (MRd/MWr, 3- or 4-DW header, any ``bar``) to BAR 0.  The offset in the
        BAR is address bits [11:0].  Other TLPs, poisoned writes and packets ended with ``err``
        are dropped (and raise ``bad_req``).
    o_cpl : Out(TLPStream())
        One single-beat completion per read.
    completer_id : In(16)
        The chip's bus/device/function, used as completer ID.
    bad_req : Out(1)
        One-cycle strobe for each request not served in full: a CA completion, a write with DWs
        past the end of the BAR, a dropped TLP (not MRd/MWr, poisoned write, ``err``, a read
        with payload beats, a stray beat).  Count it where the top sees fit.
    node, offset_lo, offset_hi, control : Out(32)
        Values of the read-write registers (one port per ``RW`` register, lower-case name),
        except the DMA's (below).
    route_mask_lo, route_mask_hi, route_lower_lo, route_lower_hi : Out(ArrayLayout(32, n_routes))
        The ROUTE[i] registers, as are ``route_upper_lo``, ``route_upper_hi``,
        ``route_target``.
    port_status : In(ArrayLayout(32, 4))
        PORT_STATUS[p]; bits outside its fields are ignored (read 0).
    pcie_id : In(16)
        PCIE_ID.
    count_inc : In(ArrayLayout(1, 64))
        Counter strobes, element ``p * 16 + r``: each high element counts one event in that
        cycle.  Elements of reserved reasons (14-15) are ignored.
    msi_req : Out(1)
        One-cycle strobe per write to MSI (with byte 0 enabled).
    msi_num : Out(5)
        Vector of the last MSI write; valid with ``msi_req`` and held after it.
    <name>_stb, <name>_data : Out
        Every other action register: a one-cycle strobe per element written, and the written
        value (enabled bytes, implemented bits; other bits 0), valid with the strobe and held
        after it.  (The chip's only one, ``CH_CTRL``, is in ``dma``.)
    dma : Out(:class:`~peach2.signatures.DmaControlSignature`)
        The DMA registers (DMA_CONFIG, DMA_TIMEOUT, CH_*, SLOT_*) in the DMA's terms, ports of
        the same rules as above; the slots as descriptors.  :meth:`port` finds a register's
        port wherever it is.
    route : Out(ArrayLayout(RouteEntry, n_routes))
        The route table as typed entries (same storage as ``route_*``).
    node_offset : Out(64)
        ``OFFSET_HI:OFFSET_LO``.
    pio_enable, route_enable : Out(1)
        ``CONTROL`` bits.
    """

    def __init__(self, *, n_routes=DEFAULT_N_ROUTES, buffer_beats=DEFAULT_BUFFER_BEATS,
                 s_is_rc=True, dma_tags=DEFAULT_DMA_TAGS, dma_buffer=DEFAULT_DMA_BUFFER,
                 regmap=None, counter_width=32):
        try:
            regmap = self._check(regmap, counter_width, n_routes=n_routes,
                                 buffer_beats=buffer_beats, s_is_rc=bool(s_is_rc),
                                 dma_tags=dma_tags, dma_buffer=dma_buffer)
        except ValueError:
            self._MustUse__silence = True       # a rejected CSR is no unused elaboratable
            raise
        self.regmap = regmap
        self._n_routes = n_routes
        self._counter_width = counter_width
        #: Test hook, filled by :meth:`elaborate`: flat element -> counter signal.
        self._counters = {}

        members = {
            "i_req":        In(TLPStream()),
            "o_cpl":        Out(TLPStream()),
            "completer_id": In(16),
            "bad_req":      Out(1),
        }
        for reg in regmap:
            shape = data.ArrayLayout(reg.width, reg.count) if reg.dims else reg.width
            if self._for_dma(reg):
                continue
            if reg.access is Access.RW:
                members[reg.port_name] = Out(shape)
            elif reg.access is Access.RO:
                members[reg.port_name] = In(shape)
            elif reg.access is Access.COUNTER:
                members[f"{reg.port_name}_inc"] = In(data.ArrayLayout(1, reg.count))
            elif reg.access is Access.ACTION and reg.name not in _ACTIONS:
                members[f"{reg.port_name}_stb"] = Out(data.ArrayLayout(1, reg.count)
                                                      if reg.dims else 1)
                members[f"{reg.port_name}_data"] = Out(32)
        msi = regmap["MSI"]
        members["msi_req"] = Out(1)
        members["msi_num"] = Out(msi.all_fields[0].width)
        members["route"] = Out(data.ArrayLayout(RouteEntry, n_routes))
        members["node_offset"] = Out(64)
        members["pio_enable"] = Out(1)
        members["route_enable"] = Out(1)
        members["dma"] = Out(DmaControlSignature())
        super().__init__(members)

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _check(regmap, counter_width, **params):
        if regmap is None:
            regmap = peach2_regmap(**params)
        elif regmap.params != params:
            raise ValueError(f"the register map was built for {regmap.params}, the CSR is "
                             f"asked for {params}")
        if not 1 <= counter_width <= 32:
            raise ValueError(f"counter_width must be 1..32, not {counter_width}")
        for name in _ACTIONS:
            if regmap[name].access is not Access.ACTION:
                raise ValueError(f"{name} must be an action register")
        return regmap

    @staticmethod
    def _for_dma(reg):
        """Whether ``reg`` is carried by the ``dma`` interface (a member of its signature, or a
        register-mode slot) instead of a port of its own."""
        return (reg.group == "SLOT" or reg.port_name in _DMA_MEMBERS
                or f"{reg.port_name}_stb" in _DMA_MEMBERS)

    def _member(self, name):
        """The port ``name``: a member of ``dma`` if the DMA signature has it, else our own."""
        return getattr(self.dma, name) if name in _DMA_MEMBERS else getattr(self, name)

    def port(self, reg, flat=None):
        """Return the value on the block's ports of element ``flat`` of ``reg`` (``RW`` or
        ``RO``): its own port, a member of ``dma``, or for a SLOT register the 32 bits of
        ``dma.slots[flat]`` at the register's offset in the slot."""
        if reg.group == "SLOT":
            base = next(g.base for g in self.regmap.groups if g.name == "SLOT")
            lsb = 8 * (reg.offset - base)
            return self.dma.slots[flat].as_value()[lsb:lsb + 32]
        port = self._member(reg.port_name)
        return port[flat] if reg.dims else port

    def elaborate(self, platform):
        m = Module()

        # Write command, one DW per cycle, registered (decoded next cycle).
        w_en   = Signal()
        w_addr = Signal(10)
        w_data = Signal(32)
        w_be   = Signal(4)
        w_mask = Cat(*[w_be[i].replicate(8) for i in range(4)])
        w = SimpleNamespace(en=w_en, addr=w_addr, data=w_data, be=w_be, mask=w_mask)

        reads = self._storage(m, w)
        self._actions_and_counters(m, w)
        self._typed_views(m)
        # Reads: one DW address a cycle in, its value three cycles later.
        rd_en   = Signal()
        rd_addr = Signal(10)
        rd_v3, rd_data = read_pipeline(m, reads, rd_en, rd_addr)
        beat = Signal(TLPBeat)
        decoded = decode_request(m, beat, self.completer_id)
        self._requests(m, beat, decoded, w, rd_en, rd_addr, rd_v3, rd_data)
        return m

    def _storage(self, m, w):
        """Add the storage of the RW registers (written by the write command ``w``) and the
        counters; return what each DW reads (DW index -> value)."""
        # -- storage, counters and what each DW reads -----------------------------------------
        reads = {}      # DW index -> value
        rm = self.regmap
        # A register-mode slot its channel holds is not written (the DMA may be loading it):
        # the write is dropped and the channel told (CH_STATUS.slot_refused).
        refused = [Const(0, 1)] * N_DMA_CHANNELS
        ctrl_recent = []
        for c in range(N_DMA_CHANNELS):
            stb_d = Signal(name=f"ch{c}_ctrl_stb_d")
            m.d.sync += stb_d.eq(self.dma.ch_ctrl_stb[c])
            ctrl_recent.append(self.dma.ch_ctrl_stb[c] | stb_d)
        for reg in rm:
            for flat, offset in reg.elements():
                dw = offset >> 2
                suffix = f"_{flat}" if reg.dims else ""
                if reg.access is Access.CONST:
                    reads[dw] = Const(reg.value, 32)
                elif reg.access is Access.RO:
                    reads[dw] = Value.cast(self.port(reg, flat)) & reg.mask
                elif reg.access is Access.RW:
                    store = Signal(reg.width, init=reg.value, name=f"reg_{reg.port_name}{suffix}")
                    write = _written(w, dw)
                    if reg.group == "SLOT":
                        # (or in the two cycles after the channel's CH_CTRL write, while
                        # what it changes reaches ``slot_held``)
                        held = self.dma.slot_held[flat] | ctrl_recent[flat // N_DMA_SLOTS]
                        refused[flat // N_DMA_SLOTS] = refused[flat // N_DMA_SLOTS] \
                            | write & held
                        write = write & ~held
                    with m.If(write):
                        m.d.sync += store.eq(((store & ~w.mask) | (w.data & w.mask)) & reg.mask)
                    m.d.comb += self.port(reg, flat).eq(store)
                    reads[dw] = store
                elif reg.access is Access.COUNTER:
                    self._counters[flat] = reads[dw] = Signal(
                        self._counter_width, name=f"count_{reg.element_name(flat).lower()}"
                        .replace("[", "_").replace("]", ""))
        for c in range(N_DMA_CHANNELS):
            m.d.sync += self.dma.slot_refused[c].eq(refused[c])
        return reads

    def _actions_and_counters(self, m, w):
        """Add the action registers (COUNTER_CLEAR, MSI, the strobe/data ports) and the
        counters' increments and clear."""
        # -- actions --------------------------------------------------------------------------
        rm = self.regmap
        clear_reg = rm["COUNTER_CLEAR"]
        clear_bit = clear_reg.all_fields[0].lsb
        clear = Signal()
        m.d.comb += clear.eq(_written(w, clear_reg.offset >> 2) & w.be[clear_bit // 8]
                             & w.data[clear_bit])
        msi = rm["MSI"]
        vec = msi.all_fields[0]
        msi_fire = _written(w, msi.offset >> 2) & w.be[vec.lsb // 8]
        m.d.sync += self.msi_req.eq(msi_fire)
        with m.If(msi_fire):
            m.d.sync += self.msi_num.eq(w.data[vec.lsb:vec.lsb + vec.width])

        for reg in rm:
            if reg.access is Access.ACTION and reg.name not in _ACTIONS:
                stb = self._member(f"{reg.port_name}_stb")
                m.d.sync += stb.eq(0)
                for flat, offset in reg.elements():
                    with m.If(_written(w, offset >> 2)):
                        m.d.sync += [(stb[flat] if reg.dims else stb).eq(1),
                                     self._member(f"{reg.port_name}_data").eq(
                                         w.data & w.mask & reg.mask)]

        for reg in rm:
            if reg.access is Access.COUNTER:
                inc = getattr(self, f"{reg.port_name}_inc")
                for flat, _ in reg.elements():
                    counter = self._counters[flat]
                    count_saturating(m, counter, inc[flat])
                    with m.If(clear):
                        m.d.sync += counter.eq(inc[flat])


    def _typed_views(self, m):
        """Drive the typed views for the router: ``route``, ``node_offset``, the enables."""
        # -- typed views for the router -------------------------------------------------------
        rm = self.regmap

        def wide(name, flat=None):
            return Cat(self.port(rm[f"{name}_LO"], flat), self.port(rm[f"{name}_HI"], flat))
        target = rm["ROUTE_TARGET"]
        t_fields = {f.name: f for f in target.fields}
        for i in range(self._n_routes):
            t = self.port(target, i)
            m.d.comb += [
                self.route[i].mask.eq(wide("ROUTE_MASK", i)),
                self.route[i].lower.eq(wide("ROUTE_LOWER", i)),
                self.route[i].upper.eq(wide("ROUTE_UPPER", i)),
                self.route[i].port.eq(t[t_fields["port"].lsb:][:t_fields["port"].width]),
                self.route[i].enable.eq(t[t_fields["enable"].lsb]),
            ]
        control = rm["CONTROL"]
        c_fields = {f.name: f for f in control.fields}
        m.d.comb += [
            self.node_offset.eq(wide("OFFSET")),
            self.pio_enable.eq(self.control[c_fields["pio_enable"].lsb]),
            self.route_enable.eq(self.control[c_fields["route_enable"].lsb]),
        ]


    def _requests(self, m, beat, d, w, rd_en, rd_addr, rd_v3, rd_data):
        """Add the request state machine: take beats, apply writes through ``w`` one DW per
        cycle, read through the read pipeline (``rd_en``/``rd_addr`` in, ``rd_v3``/``rd_data``
        out) and send the completion."""
        # -- request state machine --------------------------------------------------------------
        cur        = Signal(11)   # DW address of the next DW; bit 10 set past the BAR end
        remaining  = Signal(11)   # DWs of the write still to apply
        first_dw   = Signal()
        first_be   = Signal(4)
        last_be    = Signal(4)
        lane       = Signal(2)
        cont       = Signal()     # inside a multi-beat write, waiting for its next beat
        pkt_bad    = Signal()
        two        = Signal()
        got_one    = Signal()
        data0      = Signal(32)
        bad        = Signal()

        cpl = self.o_cpl.payload
        m.d.comb += [cpl.first.eq(1), cpl.last.eq(1)]
        m.d.sync += [w.en.eq(0), rd_en.eq(0), self.bad_req.eq(bad)]

        # i_req.ready is a register (set on entering FETCH/DRAIN), not decoded from the state:
        # a combinational ready reads X in Icarus until the state first changes, and a source
        # seeing X re-sends a beat the block already took.
        ready = Signal(init=1)
        m.d.comb += self.i_req.ready.eq(ready)

        def goto(state):
            m.next = state
            m.d.sync += ready.eq(state in ("FETCH", "DRAIN"))

        def start_cpl(ok, lane0, lane1):
            m.d.sync += [
                self.o_cpl.valid.eq(1),
                cpl.hdr.eq(d.cpl_hdr),
                cpl.data.eq(Cat(lane0, lane1)),
                cpl.dw_en.eq(Mux(ok, Mux(two, 0b0011, 0b0001), 0)),
            ]
            goto("CPL")

        with m.FSM():
            with m.State("FETCH"):
                with m.If(self.i_req.valid):
                    m.d.sync += beat.eq(self.i_req.payload)
                    with m.If(self.i_req.payload.first):
                        goto("HEAD")
                    with m.Else():
                        goto("DECIDE")

            with m.State("HEAD"):           # a first beat: wait for the registered decode
                goto("DECIDE")

            with m.State("DECIDE"):
                with m.If(beat.first):
                    m.d.sync += [
                        cont.eq(0), pkt_bad.eq(0), cur.eq(d.req_addr), remaining.eq(d.req_len),
                        first_dw.eq(1), first_be.eq(d.first_be), last_be.eq(d.last_be),
                        lane.eq(0), two.eq(d.two_dws), got_one.eq(0),
                    ]
                    with m.If(d.good_wr):
                        m.d.comb += bad.eq(cont)
                        goto("WRITE")
                    with m.Elif(d.good_rd & d.read_ok):
                        m.d.comb += bad.eq(cont)
                        goto("READ0")
                    with m.Elif(d.good_rd):
                        m.d.comb += bad.eq(1)       # counted once here; the CA follows
                        start_cpl(0, 0, 0)
                    with m.Else():
                        m.d.comb += bad.eq(1)
                        with m.If(beat.last):
                            goto("FETCH")
                        with m.Else():
                            goto("DRAIN")
                with m.Elif(cont):
                    m.d.sync += lane.eq(0)
                    goto("WRITE")
                with m.Else():
                    m.d.comb += bad.eq(1)           # a beat outside any packet
                    goto("FETCH")

            with m.State("DRAIN"):
                with m.If(self.i_req.valid & self.i_req.payload.last):
                    goto("FETCH")

            with m.State("WRITE"):
                lane_en = beat.dw_en.bit_select(lane, 1)
                active = lane_en & (remaining != 0)
                left = Signal(11)
                m.d.comb += left.eq(remaining - active)
                more = (lane != 3) & beat.dw_en.bit_select(lane + 1, 1) & (left != 0)
                past_end = active & cur[10]
                with m.If(beat.err):
                    # Only a last beat carries err: drop its DWs, the packet ends here.
                    m.d.comb += bad.eq(1)
                    m.d.sync += cont.eq(0)
                    goto("FETCH")
                with m.Else():
                    with m.If(active):
                        m.d.sync += [
                            w.en.eq(~cur[10]),
                            w.addr.eq(cur[0:10]),
                            w.data.eq(beat.data.word_select(lane, 32)),
                            w.be.eq(Mux(first_dw, first_be, Mux(remaining == 1, last_be, 0xf))),
                            cur.eq(cur + 1),
                            remaining.eq(left),
                            first_dw.eq(0),
                            pkt_bad.eq(pkt_bad | cur[10]),
                        ]
                    m.d.sync += lane.eq(lane + 1)
                    with m.If(~more):
                        with m.If(beat.last):
                            m.d.comb += bad.eq(pkt_bad | past_end | (left != 0))
                            m.d.sync += cont.eq(0)
                        with m.Else():
                            m.d.sync += cont.eq(1)
                        goto("FETCH")

            with m.State("READ0"):
                m.d.sync += [rd_en.eq(1), rd_addr.eq(cur[0:10])]
                with m.If(two):
                    goto("READ1")
                with m.Else():
                    goto("READ_WAIT")

            with m.State("READ1"):
                m.d.sync += [rd_en.eq(1), rd_addr.eq(cur[0:10] + 1)]
                goto("READ_WAIT")

            with m.State("READ_WAIT"):
                with m.If(rd_v3):
                    m.d.sync += [data0.eq(rd_data), got_one.eq(1)]
                    with m.If(~two):
                        start_cpl(1, rd_data, 0)
                    with m.Elif(got_one):
                        start_cpl(1, data0, rd_data)

            with m.State("CPL"):
                with m.If(self.o_cpl.ready):
                    m.d.sync += self.o_cpl.valid.eq(0)
                    goto("FETCH")

