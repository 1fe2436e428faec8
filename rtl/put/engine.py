"""The put engine: inline puts written into BAR 4, sent as memory writes without a host read.

``docs/put.md`` is the user's description (format, ordering, errors, figures).  A put is one
64-byte write of a :data:`~peach2.put.descriptor.PutDescriptor` into BAR 4; the engine queues it
and sends its data as one memory write to ``dst`` (routed by the route table, the N-bound address
translated), then, with ``seq``, the 4-byte completion write to ``seq_addr``, then, with ``irq``,
an MSI.  Nothing is read from host memory: a put costs the host's one posted write and the
chip's pipeline, where a DMA put costs two host round trips before a byte moves (the descriptor
fetch and the data read; Tofu's "Piggy Back RDMA" and "Direct Descriptor" remove the same two,
004 section 5).

Pipeline (every stage works from registers, so no path is deeper than the 6-LUT budget):

- **Receive**: the write's beats are gathered (the header checked on the first beat: a memory
  write of 16 DWs, all bytes enabled, 64-byte aligned) and the 64 bytes go into the queue with
  one bit saying whether the write was well formed.  ``i_req.ready`` is 1 inside a packet and
  the queue's room at its first beat, so a full queue back-pressures N, and a write once started
  always fits.
- **Queue**: :data:`~peach2.params.PUT_QUEUE` puts (``SyncFIFOBuffered``); one at a time after it.
- **CHECK**: the descriptor's checks as separate flags, the route table's compares of ``dst``
  and ``seq_addr``, both addresses minus the node offset, the data shifted to ``dst``'s byte lane.
- **ROUTE**: the first matching entries' ports and link states, both headers of each write
  (translated for N, and not).
- **DECIDE**: the error code (first failing check wins; a put is sent whole or not at all), the
  headers and crossbar destinations chosen.
- **DATA**, **SEQ**: the data write's one to three beats, then the completion write's one beat,
  into the output register (``o_wr`` and ``o_dest`` are registers).  ``done`` counts the put and
  ``msi_req`` pulses (with ``irq``) once its last beat has left the register.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..dma.common import mem_header
from ..params import PUT_QUEUE, PutError
from ..router.common import RouteEntry
from ..router.ingress import OUTPUTS
from ..router.table import request_address, route_first, route_matches, route_select
from ..signatures import PUT_STATUS_FIELDS
from ..tlp.layouts import Type
from ..tlp.stream import TLPBeat, TLPStream
from .descriptor import CONTROL_BITS, CONTROL_RESERVED, DATA_BYTES, MAGIC, PUT_BYTES, PutDescriptor

__all__ = ["PutEngine"]

_CTRL = {name: lsb for name, lsb, _, _ in CONTROL_BITS}
_STATUS = {name: (lsb, width) for name, lsb, width, _ in PUT_STATUS_FIELDS}
_DWS = PUT_BYTES // 4


def _beat(**values):
    """A :data:`~peach2.tlp.stream.TLPBeat` as one value: the fields given, the others 0."""
    fields = sorted(data.Layout.cast(TLPBeat), key=lambda item: item[1].offset)
    return Cat(*(Cat(Value.cast(values.get(name, 0)), Const(0, f.width))[:f.width]
                 for name, f in fields))


class _State(enum.Enum, shape=3):
    IDLE = 0
    CHECK = 1
    ROUTE = 2
    DECIDE = 3
    DATA = 4
    SEQ = 5


class PutEngine(wiring.Component):
    """Inline puts (see the module docstring and ``docs/put.md``).

    Parameters
    ----------
    n_routes : int
        Route table entries (the router's table; puts are routed with it).
    depth : int
        Puts the queue holds.

    Members
    -------
    i_req : In(TLPStream())
        Memory writes into BAR 4 (the top takes them off the register block's crossbar output).
    o_wr : Out(TLPStream()) ; o_dest : Out(6)
        The puts' memory writes, with their one-hot crossbar output (bit order of the router's
        OUTPUTS), held for the packet.
    routes, route_down, node_offset, requester_id
        As the DMA's: the route table, per entry whether its port's link is down, the node
        offset (subtracted from N-bound addresses), the requester ID of the writes.
    done : Out(32)
        Puts sent (their last beat accepted by the crossbar), wrapping (PUT_DONE).
    status : Out(32)
        PUT_STATUS (:data:`~peach2.signatures.PUT_STATUS_FIELDS`).
    clear : In(1)
        Clears PUT_STATUS.error and .refused.
    msi_req : Out(1)
        One-cycle strobe: a put with ``irq`` has been sent.
    """

    def __init__(self, *, n_routes, depth=PUT_QUEUE):
        if depth < 2 or depth & (depth - 1):
            raise ValueError(f"the put queue's depth is a power of two of at least 2, "
                             f"not {depth}")
        self.n_routes, self.depth = n_routes, depth
        super().__init__({
            "i_req":        In(TLPStream()),
            "o_wr":         Out(TLPStream()),
            "o_dest":       Out(len(OUTPUTS)),
            "routes":       In(data.ArrayLayout(RouteEntry, n_routes)),
            "route_down":   In(n_routes),
            "node_offset":  In(64),
            "requester_id": In(16),
            "done":         Out(32),
            "status":       Out(32),
            "clear":        In(1),
            "msi_req":      Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = SyncFIFOBuffered(width=8 * PUT_BYTES + 1, depth=self.depth)
        self._receive(m, queue)
        self._send(m, queue)
        return m

    def _receive(self, m, queue):
        """Gather each write's beats; queue its 64 bytes and whether it was well formed."""
        i = self.i_req
        h = i.p.hdr
        inside = Signal()           # a packet's first beat was taken, its last not yet
        beat = Signal(2)            # beats of it taken
        ok = Signal()               # its header passed the checks
        acc = [Signal(128, name=f"acc{k}") for k in range(3)]
        typ = h.common.type.as_value()
        header_ok = ((typ == Type.MEM.value) & h.common.fmt.as_value()[1]
                     & (h.common.length == _DWS) & (request_address(h)[2:6] == 0)
                     & (h.mem32.first_be == 0xF) & (h.mem32.last_be == 0xF))
        pos = Mux(inside, beat, 0)  # the beat offered now is the packet's pos-th
        good = Mux(inside, ok, header_ok) & ~i.p.err & (pos == 3)
        m.d.comb += [
            i.ready.eq(inside | queue.w_rdy),
            queue.w_data.eq(Cat(*acc, i.p.data, good)),
            queue.w_en.eq(i.valid & i.ready & i.p.last),
        ]
        with m.If(i.valid & i.ready):
            m.d.sync += [inside.eq(~i.p.last), beat.eq(Mux(inside, beat + 1, 1))]
            with m.If(~inside):
                m.d.sync += ok.eq(header_ok)
            for k in range(3):
                with m.If(pos == k):
                    m.d.sync += acc[k].eq(i.p.data)
            # A packet longer than four beats (against its header) can no longer be good.
            with m.If(inside & (beat == 3)):
                m.d.sync += ok.eq(0)
        lsb, width = _STATUS["level"]
        m.d.comb += self.status[lsb:lsb + width].eq(queue.level)

    def _send(self, m, queue):
        """One put at a time: CHECK, ROUTE, DECIDE, then its beats."""
        state = Signal(_State)
        e = Signal(PutDescriptor)
        e_ok = Signal()
        # CHECK's registers.
        f_ok = Signal()
        f_cross = Signal()
        q_dst = Signal(self.n_routes)
        q_seq = Signal(self.n_routes)
        tr_dst = Signal(64)
        tr_seq = Signal(64)
        shifted = Signal(8 * (DATA_BYTES + 4))
        # ROUTE's registers.
        r_hit = Signal(2)
        r_down = Signal(2)
        r_port = [Signal(2, name="r_port_dst"), Signal(2, name="r_port_seq")]
        r_hdr = [Signal(128, name=f"r_hdr_{n}") for n in ("dst", "dst_n", "seq", "seq_n")]
        # DECIDE's registers: what DATA and SEQ send.
        s_hdr = Signal(128)
        s_hdr_seq = Signal(128)
        s_dest = Signal(len(OUTPUTS))
        s_dest_seq = Signal(len(OUTPUTS))
        s_nbeats = Signal(2)        # data beats minus one
        s_last_en = Signal(4)       # dw_en of the data's last beat
        k = Signal(2)               # the data beat being sent

        control = e.control
        seq = control[_CTRL["seq"]]
        irq = control[_CTRL["irq"]]
        length = e.length
        lo = e.dst[:2]
        fail = Signal(PutError)
        refused = Signal(_STATUS["refused"][1])
        error = Signal(_STATUS["error"][1])

        o = self.o_wr
        room = ~o.valid | o.ready   # the output register takes a beat this cycle
        m.d.comb += queue.r_en.eq(state == _State.IDLE)
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(queue.r_rdy):
                    m.d.sync += [e.eq(queue.r_data[:8 * PUT_BYTES]),
                                 e_ok.eq(queue.r_data[8 * PUT_BYTES]), state.eq(_State.CHECK)]
            with m.Case(_State.CHECK):
                end = Cat(e.dst[:12], Const(0, 1)) + length[:6]
                m.d.sync += [
                    f_ok.eq(e_ok & (control[:8] == MAGIC) & ~(control & CONTROL_RESERVED).any()
                            & (e.reserved == 0) & (length != 0) & (length <= DATA_BYTES)
                            & ~(seq & e.seq_addr[:2].any())),
                    f_cross.eq(end[12] & end[:12].any()),
                    q_dst.eq(Cat(*route_matches(m, e.dst, self.routes))),
                    q_seq.eq(Cat(*route_matches(m, e.seq_addr, self.routes))),
                    # As the DMA's writer: the offset is taken off the DW address, the byte
                    # lane kept (an offset with bits [1:0] set cannot move a byte's lane and
                    # so the write's length: its header and beats would disagree).
                    tr_dst.eq(Cat(e.dst[:2], (Cat(Const(0, 2), e.dst[2:])
                                              - self.node_offset)[2:64])),
                    tr_seq.eq(Cat(e.seq_addr[:2], (Cat(Const(0, 2), e.seq_addr[2:])
                                                   - self.node_offset)[2:64])),
                    shifted.eq(Mux(lo[1], Mux(lo[0], e.data << 24, e.data << 16),
                                   Mux(lo[0], e.data << 8, e.data))),
                    state.eq(_State.ROUTE),
                ]
            with m.Case(_State.ROUTE):
                for n, (q, addr, tr) in enumerate(((q_dst, e.dst, tr_dst),
                                                   (q_seq, e.seq_addr, tr_seq))):
                    hit, port = route_select(m, list(q), self.routes)
                    down = route_first(m, q, self.route_down, f"down{n}")
                    nbytes = length[:6] if n == 0 else Const(4, 6)
                    m.d.sync += [
                        r_hit[n].eq(hit), r_down[n].eq(down), r_port[n].eq(port.as_value()),
                        r_hdr[2 * n].eq(mem_header(addr, nbytes, Const(0, 8), self.requester_id,
                                                   write=True)),
                        r_hdr[2 * n + 1].eq(mem_header(tr, nbytes, Const(0, 8),
                                                       self.requester_id, write=True)),
                    ]
                dws = (Cat(lo, Const(0, 4)) + length[:6] + 3)[2:]      # 1..9 payload DWs
                m.d.sync += [
                    s_nbeats.eq((dws - 1)[2:4]),
                    s_last_en.eq(Mux(dws[:2] == 0, 0xF,
                                     Mux(dws[:2] == 1, 0x1, Mux(dws[:2] == 2, 0x3, 0x7)))),
                    state.eq(_State.DECIDE),
                ]
            with m.Case(_State.DECIDE):
                seq_bad = seq & ~(r_hit[1] & ~r_down[1])
                with m.If(~e_ok):
                    m.d.comb += fail.eq(PutError.WRITE_MALFORMED)
                with m.Elif(~f_ok):
                    m.d.comb += fail.eq(PutError.DESC_MALFORMED)
                with m.Elif(f_cross):
                    m.d.comb += fail.eq(PutError.CROSSES_PAGE)
                with m.Elif(~r_hit[0] | (seq & ~r_hit[1])):
                    m.d.comb += fail.eq(PutError.DST_UNROUTABLE)
                with m.Elif(r_down[0] | seq_bad):
                    m.d.comb += fail.eq(PutError.DST_LINK_DOWN)
                m.d.sync += [
                    s_hdr.eq(Mux(r_port[0] == 0, r_hdr[1], r_hdr[0])),
                    s_hdr_seq.eq(Mux(r_port[1] == 0, r_hdr[3], r_hdr[2])),
                    s_dest.eq(1 << r_port[0]),
                    s_dest_seq.eq(1 << r_port[1]),
                    k.eq(0),
                    state.eq(Mux(fail == PutError.NONE, _State.DATA, _State.IDLE)),
                ]
            with m.Case(_State.DATA):
                with m.If(room):
                    m.d.sync += k.eq(k + 1)
                    with m.If(k == s_nbeats):
                        m.d.sync += state.eq(Mux(seq, _State.SEQ, _State.IDLE))
            with m.Case(_State.SEQ):
                with m.If(room):
                    m.d.sync += state.eq(_State.IDLE)

        # The beats, into an output register (``o_wr`` and ``o_dest`` are registers, so the
        # crossbar's grant logic starts from registers); each beat is one expression over the
        # whole payload.
        last_data = k == s_nbeats
        in_data = state == _State.DATA
        in_seq = state == _State.SEQ
        data_beat = _beat(data=Mux(k == 0, shifted[:128],
                                   Mux(k == 1, shifted[128:256], shifted[256:])),
                          dw_en=Mux(last_data, s_last_en, 0xF), hdr=s_hdr, first=k == 0,
                          last=last_data)
        seq_beat = _beat(data=e.seq_value, dw_en=1, hdr=s_hdr_seq, first=1, last=1)
        o_final = Signal()          # the beat in the register ends its put
        o_irq = Signal()            # ... which asked for an MSI
        with m.If(room):
            m.d.sync += [
                o.valid.eq(in_data | in_seq),
                o.p.eq(Mux(in_seq, seq_beat, data_beat)),
                self.o_dest.eq(Mux(in_seq, s_dest_seq, s_dest)),
                o_final.eq(in_seq | (in_data & last_data & ~seq)),
                o_irq.eq(irq),
            ]
        sent = o.valid & o.ready & o_final
        with m.If(sent):
            m.d.sync += self.done.eq(self.done + 1)
        m.d.sync += self.msi_req.eq(sent & o_irq)

        # PUT_STATUS: the last refusal and how many.
        with m.If(self.clear):
            m.d.sync += [error.eq(0), refused.eq(0)]
        with m.Elif((state == _State.DECIDE) & (fail != PutError.NONE)):
            m.d.sync += [error.eq(fail), refused.eq(refused + ~refused.all())]
        for name, value in (("error", error), ("refused", refused)):
            lsb, width = _STATUS[name]
            m.d.comb += self.status[lsb:lsb + width].eq(value)
