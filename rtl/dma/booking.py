"""The DMA's bookkeeping: tags, completion buffer rows and completion credits of its reads.

Brief section 3: the N hard IP advertises infinite completion credits, so the DMA itself keeps
the completions of its outstanding reads within the hard IP's completion buffer
(``ko_cpl_spc_vc0``), counting each read at its worst split (a completion at every 64-byte
boundary) from its issue until its tag is freed.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..tlp.layouts import TLPHeader
from ..tlp.stream import TLPStream
from .common import ceil_log2, mem_header, tag_info_layout
from .descring import SLOT_BITS
from .writer import release_layout

__all__ = ["Booking", "RoomSignature", "issue_layout"]


def issue_layout(row_bits):
    """A read the planner decided (registered there), booked by :class:`Booking` in the cycle
    it is presented: its PCIe address and size, whether it fetches descriptors, its channel,
    its buffer rows, its completion credits (headers, 16-byte data credits) and, for a fetch,
    ``Cat(first ring slot, 64-byte descriptors)`` (the tag's ``base`` then)."""
    return data.StructLayout({"en": 1, "raddr": 64, "nbytes": 10, "fetch": 1, "chan": 2,
                              "rows": row_bits + 1, "hdr": 5, "dat": 7,
                              "slot": SLOT_BITS + 1})


class RoomSignature(wiring.Signature):
    """What the booking tells the planner about the room for the next read (from the
    booking's side).

    Members
    -------
    outstanding : Out(range(n_tags + 1))
        Reads outstanding.
    tags_free : Out(2)
        Registered with ``outstanding``: bit 0, a tag is free (``outstanding`` below the
        tag limit, 32 without ``ext_tags``); bit 1, a tag is free after one more read.
    free_less : Out(signed(log2 rows + 1))
        Buffer rows not held by a read, less ``rows`` (0 when every row is free): a register
        reset to 0 (the ALM flow keeps one reset to another value inverted, with a NOT in front
        of the planner's carry-chain compare, a LUT level).
    room_hdr : Out(signed(10)) ; room_dat : Out(signed(14))
        The completion credits left, registered (they lag the counters by a cycle).
    hdr_free, dat_free : Out(1)
        The hard IP sets no limit on completion headers, data.
    rd_busy : Out(1)
        The read request's skid register is taken: no read may be booked in the next cycle.
    """

    def __init__(self, *, n_tags, rows):
        super().__init__({
            "outstanding": Out(range(n_tags + 1)),
            "tags_free":   Out(2, init=0b11),      # none outstanding at reset
            "free_less":   Out(signed(ceil_log2(rows) + 1)),
            "room_hdr":    Out(signed(10)),
            "room_dat":    Out(signed(14)),
            "hdr_free":    Out(1),
            "dat_free":    Out(1),
            "rd_busy":     Out(1),
        })


class Booking(wiring.Component):
    """Tags, buffer rows and completion credits: taken by each read as it is booked, given back
    when the writer has read its last row.

    A booked read gets the next tag in issue order (``next_tag``, its low bits on the wire) and
    the next free rows of the buffer's ring (from ``next_row``), its facts are written to the
    tag table (read by the receiver), and its request goes out on ``o_rd``.  Tags, rows and
    credits come back in issue order (``release``).  Rows and credits return through an
    accumulator: a cycle that books a read adds the release to it, any other cycle hands it
    back, so every update is a two-input add and a release waits at most two cycles (reads are
    booked at most every other cycle).

    Parameters
    ----------
    n_tags, rows : int
        Tags and buffer rows of 16 bytes (powers of two).

    Members
    -------
    issue : In(issue_layout)
        The read to book this cycle (when ``issue.en``).
    release : In(release_layout)
        The oldest outstanding read's tag, rows and credits come back.
    ext_tags : In(1) ; requester_id : In(16) ; cpl_space : In(20)
        8-bit tags enabled; the chip's ID on N; the hard IP's completion buffer (headers in
        [7:0], 16-byte data credits in [19:8], 0 meaning no limit).
    o_rd : Out(TLPStream())
        Read requests (single-beat MRd), from a register with a skid register behind it.
    next_tag : Out(log2 n_tags) ; next_row : Out(log2 rows)
        The tag table index and the first row the next booked read gets.
    head_seq : Out(16)
        Reads released so far (the oldest outstanding one's sequence number).
    room : Out(RoomSignature)
        The room for the next read, to the planner.
    tag_addr : In(log2 n_tags) ; tag_info : Out(tag_info_layout)
        The tag table's read port (its data a cycle after the address).
    """

    def __init__(self, *, n_tags, rows):
        self.n_tags, self.rows = n_tags, rows
        tb, rb = ceil_log2(n_tags), ceil_log2(rows)
        super().__init__({
            "issue":        In(issue_layout(rb)),
            "release":      In(release_layout(rb)),
            "ext_tags":     In(1),
            "requester_id": In(16),
            "cpl_space":    In(20),
            "o_rd":         Out(TLPStream()),
            "next_tag":     Out(tb),
            "next_row":     Out(rb),
            "head_seq":     Out(16),
            "room":         Out(RoomSignature(n_tags=n_tags, rows=rows)),
            "tag_addr":     In(tb),
            "tag_info":     Out(tag_info_layout(rb)),
        })

    def elaborate(self, platform):
        m = Module()
        NT, ROWS = self.n_tags, self.rows
        TB, RB = ceil_log2(NT), ceil_log2(ROWS)
        iss, rel = self.issue, self.release

        issue_seq = Signal(16)          # reads issued
        head_seq = Signal(16)           # reads released (in issue order)
        tail_row = Signal(RB)           # next free row
        free_less = Signal(signed(RB + 1))     # free rows - ROWS (RoomSignature)
        outstanding = Signal(range(NT + 1))     # issue_seq - head_seq, kept as a register
        # The hard IP's completion buffer: credits held by outstanding reads.
        used_hdr = Signal(9)
        used_dat = Signal(13)
        lim_hdr = Signal(9)
        lim_dat = Signal(13)
        m.d.sync += [lim_hdr.eq(self.cpl_space[:8]), lim_dat.eq(self.cpl_space[8:20])]
        m.d.comb += [self.next_tag.eq(issue_seq[:TB]), self.next_row.eq(tail_row),
                     self.head_seq.eq(head_seq), self.room.outstanding.eq(outstanding),
                     self.room.free_less.eq(free_less)]

        # Per tag: static facts written at issue, read by the receiver.
        m.submodules.taginfo = taginfo = Memory(shape=tag_info_layout(RB), depth=NT, init=[])
        ti_w = taginfo.write_port()
        ti_r = taginfo.read_port()
        m.d.comb += [ti_r.addr.eq(self.tag_addr), ti_r.en.eq(1), self.tag_info.eq(ti_r.data)]

        acc_rows = Signal(RB + 1)
        acc_hdr = Signal(9)
        acc_dat = Signal(13)
        rel_now = [Mux(rel.en, v, 0) for v in (rel.rows, rel.hdr, rel.dat)]
        with m.If(iss.en):
            m.d.sync += [
                issue_seq.eq(issue_seq + 1), tail_row.eq(tail_row + iss.rows),
                free_less.eq(free_less - iss.rows), used_hdr.eq(used_hdr + iss.hdr),
                used_dat.eq(used_dat + iss.dat),
            ]
            m.d.sync += [acc.eq(acc + v) for acc, v in zip((acc_rows, acc_hdr, acc_dat), rel_now)]
        with m.Else():
            m.d.sync += [free_less.eq(free_less + acc_rows), used_hdr.eq(used_hdr - acc_hdr),
                         used_dat.eq(used_dat - acc_dat)]
            m.d.sync += [acc.eq(v) for acc, v in zip((acc_rows, acc_hdr, acc_dat), rel_now)]
        with m.If(rel.en):
            m.d.sync += head_seq.eq(head_seq + 1)
        out_next = Signal.like(outstanding, name="outstanding_next")
        m.d.comb += out_next.eq(outstanding + iss.en - rel.en)
        m.d.sync += outstanding.eq(out_next)
        # Whether a tag is free, now and after one more read, from the count's next value (so
        # the planner's check is a register, not a compare behind the issue).
        limit = Mux(self.ext_tags, NT, min(NT, 32))
        m.d.sync += self.room.tags_free.eq(Cat(out_next < limit, out_next + 1 < limit))

        room = self.room
        m.d.sync += [room.hdr_free.eq(self.cpl_space[:8] == 0),
                     room.dat_free.eq(self.cpl_space[8:20] == 0),
                     room.room_hdr.eq(lim_hdr - used_hdr), room.room_dat.eq(lim_dat - used_dat)]

        # Booking a read: its tag is the next in issue order, its rows the next free ones.
        tag_now = Mux(self.ext_tags, issue_seq[:8], issue_seq[:5])
        rd_hdr = Signal(TLPHeader)
        m.d.comb += [
            rd_hdr.eq(mem_header(iss.raddr, iss.nbytes, tag_now, self.requester_id,
                                 write=False)),
            ti_w.en.eq(iss.en), ti_w.addr.eq(issue_seq[:TB]),
            ti_w.data.base.eq(Mux(iss.fetch, iss.slot, tail_row)), ti_w.data.src_lo.eq(iss.raddr[:2]),
            ti_w.data.nbytes.eq(iss.nbytes), ti_w.data.chan.eq(iss.chan),
            ti_w.data.fetch.eq(iss.fetch),
        ]

        # A skid register behind the output: a read is booked into the output register, or
        # into the skid when the output is held this cycle (the crossbar gave N to another
        # source), so a read held for a cycle or two costs no planner action.  At one read per
        # two cycles the planner matches the wire rate of 8-byte writes and could never win a
        # lost slot back.  The planner only looks at ``room.rd_busy`` (a register).
        rd = self.o_rd
        rd_skid_v = self.room.rd_busy
        rd_skid = Signal(TLPHeader)
        rd_new = iss.en
        rd_held = rd.valid & ~rd.ready
        m.d.sync += [rd.p.first.eq(1), rd.p.last.eq(1), rd.p.dw_en.eq(0), rd.p.data.eq(0)]
        with m.If(rd_held):
            with m.If(rd_new):
                m.d.sync += [rd_skid_v.eq(1), rd_skid.eq(rd_hdr)]
        with m.Elif(rd_skid_v):
            m.d.sync += [rd.valid.eq(1), rd.p.hdr.eq(rd_skid), rd_skid_v.eq(rd_new),
                         rd_skid.eq(rd_hdr)]
        with m.Else():
            m.d.sync += [rd.valid.eq(rd_new), rd.p.hdr.eq(rd_hdr)]
        return m
