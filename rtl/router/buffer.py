"""Per-input packet buffer in block RAM, cut-through."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..tlp.layouts import TLPHeader
from ..tlp.stream import TLPStream
from ..util import RegisterSlice
from .egress import translate_header

__all__ = ["PacketBuffer"]


_DataEntry = data.StructLayout({"data": 128, "dw_en": 4, "first": 1, "last": 1, "err": 1})


class PacketBuffer(wiring.Component):
    """A FIFO of TLPs with a per-packet side value (the crossbar destination).

    Beats go to one FIFO (payload and flags), headers with their BAR hit and destination to a
    second one, one entry per packet, so block RAM is not spent on a header per beat.  A packet
    is visible at the output as soon as its first beat is in (cut-through, 002 section 3.3's
    packet buffers).

    Timing: the output is a :class:`~peach2.util.RegisterSlice` (two beats: the one shown and
    a skid register), so ``o_tlp`` and ``o_dest`` come from registers, and ``o_tlp.ready``
    only selects what those two registers load; the FIFOs are read while the skid register is
    empty.  This adds
    one cycle between a beat's write and its appearance at the output (three cycles on an
    empty buffer) and two beats of capacity.  The header FIFO needs no check of its own at the
    output: it is written in the same cycle as the packet's first beat and has the same
    structure (and so the same write-to-read delay) as the beat FIFO, and it drops the
    previous header when the previous packet's first beat leaves, no later than the beat FIFO
    frees its output for this packet's first beat; a packet's header is therefore at the
    header FIFO's output whenever its first beat is at the beat FIFO's.

    Members
    -------
    i_tlp : In(TLPStream())
    i_dest : In(dest_width)
        Sampled with the first beat.
    o_tlp : Out(TLPStream())
        ``hdr`` and ``bar`` are valid on the first beat only.
    o_dest : Out(dest_width)
        The destination of the packet whose first beat is at the output.
    offset : In(64)
        With ``translate_bit`` set: packets whose destination has that bit (the N port) are
        stored with the header :func:`~peach2.router.egress.translate_header` makes, so the
        N-port egress costs no pipeline stage of its own.
    i_refuse : In(1)
        Sampled with every beat: the protection windows refuse this packet, going to N (the
        ingress's ``o_refuse``, a register held with ``i_dest`` for the whole packet).  A
        refused packet is discarded at the input, never stored: its beats are taken (when
        there is room, as if stored) and dropped; it arrives without ``first`` (so no header
        is stored either, and the header FIFO's write does not wait for the discard).
    refused : Out(1)
        One-cycle strobe, a cycle after the last beat of a discarded packet, when that beat
        carries no ``err`` (a packet ended with ``err`` is the RX adapter's to count).
    refused_source : Out(8)
        With ``refused``: the discarded packet's requester ID bits [15:8] (its source node).
    i_linkdown : In(1)
        Like ``i_refuse`` (a register held for the packet, which then comes without ``first``):
        the packet's route leaves through a port whose link is down; discarded the same way.
    link_dropped : Out(1)
        One-cycle strobe like ``refused``, for a packet discarded for ``i_linkdown`` (which
        takes precedence: such a packet is not ``refused``).
    queued : Out(dest_width)
        Per crossbar output: the buffer holds a packet bound for it, from the cycle after its
        first beat is written until two cycles after that beat leaves (packets bound for an
        output whose link is down are flushed before the output is used again,
        :class:`~peach2.router.linkstate.LinkState`).  From registers.
    """

    def __init__(self, *, depth=128, max_packets=16, dest_width=5, translate_bit=None):
        self._depth = depth
        self._max_packets = max_packets
        self._dest_width = dest_width
        self._translate_bit = translate_bit
        super().__init__({
            "i_tlp":  In(TLPStream()),
            "i_dest": In(dest_width),
            "o_tlp":  Out(TLPStream()),
            "o_dest": Out(dest_width),
            "offset": In(64),
            "i_refuse": In(1),
            "refused": Out(1),
            "refused_source": Out(8),
            "i_linkdown": In(1),
            "link_dropped": Out(1),
            "queued": Out(dest_width),
        })

    def elaborate(self, platform):
        m = Module()
        head = data.StructLayout({"hdr": TLPHeader, "bar": 8, "dest": self._dest_width})
        m.submodules.dfifo = dfifo = SyncFIFOBuffered(width=_DataEntry.size, depth=self._depth)
        m.submodules.hfifo = hfifo = SyncFIFOBuffered(width=head.size, depth=self._max_packets)
        i, o = self.i_tlp, self.o_tlp

        w_d = data.View(_DataEntry, dfifo.w_data)
        w_h = data.View(head, hfifo.w_data)
        # Protection: ``i_refuse`` is a register held for the whole packet.
        discard = self.i_refuse | self.i_linkdown
        m.d.comb += [
            i.ready.eq(dfifo.w_rdy & (hfifo.w_rdy | ~i.p.first)),
            w_d.data.eq(i.p.data), w_d.dw_en.eq(i.p.dw_en), w_d.first.eq(i.p.first),
            w_d.last.eq(i.p.last), w_d.err.eq(i.p.err),
            dfifo.w_en.eq(i.valid & i.ready & ~discard),
            w_h.hdr.eq(i.p.hdr if self._translate_bit is None else
                       Mux(self.i_dest[self._translate_bit],
                           translate_header(i.p.hdr, self.offset), i.p.hdr.as_value())),
            w_h.bar.eq(i.p.bar), w_h.dest.eq(self.i_dest),
            hfifo.w_en.eq(i.valid & i.ready & i.p.first),
        ]
        in_discard = Signal()           # after the first beat of a discarded packet
        source_held = Signal(8)
        source = Mux(in_discard, source_held, i.p.hdr.mem32.requester_id[8:])
        with m.If(i.valid & i.ready):
            m.d.sync += [source_held.eq(source), in_discard.eq(discard & ~i.p.last)]
        m.d.sync += [
            self.refused.eq(i.valid & i.ready & self.i_refuse & ~self.i_linkdown & i.p.last
                            & ~i.p.err),
            self.link_dropped.eq(i.valid & i.ready & self.i_linkdown & i.p.last & ~i.p.err),
            self.refused_source.eq(source),
        ]

        # Output register slice: its output register drives ``o_tlp``, its skid register takes
        # the beat the FIFOs gave while the output could not move.  The FIFOs are read when the
        # skid register is empty (the slice's ``ready``, a register), so ``o_tlp.ready`` only
        # selects what the slice's two registers load.
        out = data.StructLayout({"beat": _DataEntry, "head": head})
        m.submodules.out = slice_ = RegisterSlice(out)
        r_d = data.View(_DataEntry, dfifo.r_data)
        take = Signal()             # a beat (with its header on a first beat) leaves the FIFOs
        m.d.comb += [
            take.eq(dfifo.r_rdy & slice_.i.ready),
            dfifo.r_en.eq(slice_.i.ready),
            hfifo.r_en.eq(take & r_d.first),
            slice_.i.valid.eq(dfifo.r_rdy),
            slice_.i.p.eq(Cat(dfifo.r_data, hfifo.r_data)),
            slice_.o.ready.eq(o.ready),
        ]
        main = slice_.o.p
        m.d.comb += [
            o.valid.eq(slice_.o.valid),
            o.p.data.eq(main.beat.data), o.p.dw_en.eq(main.beat.dw_en),
            o.p.first.eq(main.beat.first), o.p.last.eq(main.beat.last),
            o.p.err.eq(main.beat.err),
            o.p.hdr.eq(main.head.hdr), o.p.bar.eq(main.head.bar),
            self.o_dest.eq(main.head.dest),
        ]
        self._count_queued(m, hfifo.w_en, w_h.dest, o.valid & o.ready & o.p.first, self.o_dest)
        return m

    def _count_queued(self, m, put, put_dest, got, got_dest):
        """``queued``: per output, packets in the buffer bound for it, counted from registered
        strobes (so the counters add no depth to the FIFO handshakes)."""
        width = max(1, (self._max_packets + 3).bit_length())
        put_r = Signal(self._dest_width)
        got_r = Signal(self._dest_width)
        m.d.sync += [put_r.eq(put_dest & put.replicate(self._dest_width)),
                     got_r.eq(got_dest & got.replicate(self._dest_width))]
        for j in range(self._dest_width):
            count = Signal(width, name=f"queued_{j}")
            with m.If(put_r[j] & ~got_r[j]):
                m.d.sync += count.eq(count + 1)
            with m.Elif(got_r[j] & ~put_r[j]):
                m.d.sync += count.eq(count - 1)
            m.d.comb += self.queued[j].eq(count != 0)
