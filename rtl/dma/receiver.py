"""The DMA's completion receiver: completions checked and placed in the completion buffer.

Brief section 3: the hard IP advertises infinite completion credits, so the DMA accepts every
completion at once (``i_cpl`` is always ready) and keeps its outstanding reads within the hard
IP's completion buffer itself (the bookkeeping in :mod:`peach2.dma.engine`).
"""

from amaranth.hdl import Array, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..csr.regmap import N_DMA_CHANNELS, DmaError
from ..tlp.layouts import CplStatus
from ..tlp.stream import TLPBeat
from ..util import not_below
from .common import ceil_log2, select, tag_info_layout
from .descriptor import Descriptor

__all__ = ["Receiver"]


def bank_write_layout(row_bits):
    """One 32-bit bank's write port (a DW of a buffer row)."""
    return data.StructLayout({"addr": row_bits, "data": 32, "en": 1})


class Receiver(wiring.Component):
    """Completions from port N, matched by tag against the window of outstanding reads, their
    data written into the reserved buffer rows at the offset the byte count gives (any split,
    any order across tags).

    Five stages: (1) the beat and the tag's table entry; (2a) the tag's state (done bit, DWs
    received) and what the header and the entry give alone (the byte offset, the read's DWs
    less the completion's length); (2b) the placement and its checks (against the read, against
    the DWs received, with what stages 2c and 3 changed meanwhile forwarded); (2c) the decision
    (dropped, failed, or good: the DWs received advanced); (3) the bank writes.  The buffer has
    four 32-bit banks, so a beat lands at any DW offset in one cycle: DW k of a read lives in
    row ``base + k // 4``, bank ``k % 4``.  A descriptor fetch's data goes to its channel's
    prefetch buffer instead (it takes no rows), valid as soon as the fetch's last DW is in.

    Parameters
    ----------
    n_tags : int
        Tags (reads outstanding at most), a power of two.
    rows : int
        Rows of 16 bytes in the completion buffer, a power of two.

    Members
    -------
    i_cpl : In(stream.Signature(TLPBeat, always_ready=True))
        Completions arriving on port N.
    ext_tags : In(1)
        8-bit tags are enabled (else a tag above 31 is never one of ours).
    head_seq : In(16) ; outstanding : In(range(n_tags + 1))
        The oldest outstanding read's sequence number (its tag's low bits) and how many reads
        are outstanding: the window a completion's tag must fall in.
    tag_addr : Out(log2 n_tags) ; tag_info : In(tag_info_layout)
        The tag table's read port (read every cycle, its data a cycle later).
    clear_en : In(1) ; clear_tag : In(log2 n_tags)
        A read is issued with this tag: its done bit, error and DW count restart.
    done, bad : Out(n_tags) ; err : Out(ArrayLayout(4, n_tags))
        Per tag: all its data is in or it failed; it failed; the error code if it did.
    o_bank : Out(ArrayLayout(bank_write_layout, 4))
        The write ports of the buffer's four banks.
    abort : In(4)
        Per channel: stopped (a fetch's data then leaves its prefetch buffer invalid).
    nxt_clear : In(4)
        Per channel: the planner consumed or restarted its prefetch buffer (``nxt_valid`` falls;
        a fetch's last DW landing in the same cycle wins).
    nxt : Out(ArrayLayout(Descriptor, 4)) ; nxt_valid : Out(4)
        Per channel: the prefetch buffer and whether it holds a whole descriptor.
    unexpected_cpl, poisoned_cpl : Out(1)
        One-cycle strobes, as the DMA's ports of the same names.
    """

    def __init__(self, *, n_tags, rows):
        self.n_tags = n_tags
        self.rows = rows
        tb, rb = ceil_log2(n_tags), ceil_log2(rows)
        nc = N_DMA_CHANNELS
        super().__init__({
            "i_cpl":          In(stream.Signature(TLPBeat, always_ready=True)),
            "ext_tags":       In(1),
            "head_seq":       In(16),
            "outstanding":    In(range(n_tags + 1)),
            "tag_addr":       Out(tb),
            "tag_info":       In(tag_info_layout(rb)),
            "clear_en":       In(1),
            "clear_tag":      In(tb),
            "done":           Out(n_tags),
            "bad":            Out(n_tags),
            "err":            Out(data.ArrayLayout(4, n_tags)),
            "o_bank":         Out(data.ArrayLayout(bank_write_layout(rb), 4)),
            "abort":          In(nc),
            "nxt_clear":      In(nc),
            "nxt":            Out(data.ArrayLayout(Descriptor, nc)),
            "nxt_valid":      Out(nc),
            "unexpected_cpl": Out(1),
            "poisoned_cpl":   Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        NT, NC = self.n_tags, N_DMA_CHANNELS
        TB, RB = ceil_log2(NT), ceil_log2(self.rows)
        done = Signal(NT)
        terr = Array([Signal(4, name=f"tag_err{t}") for t in range(NT)])
        tbad = Signal(NT)       # terr != 0, kept as its own bit
        # DWs received per tag: a completion must start where the previous one ended, and the
        # read is done only when every DW arrived (a completion lost to rx_st_err is a fault,
        # not stale data).
        rcv = Array([Signal(8, name=f"tag_rcv{t}") for t in range(NT)])
        nxt = Array([Signal(Descriptor, name=f"ch{c}_nxt") for c in range(NC)])
        nxt_valid = Array([Signal(name=f"ch{c}_nxt_valid") for c in range(NC)])
        m.d.comb += [self.done.eq(done), self.bad.eq(tbad)]
        m.d.comb += [self.err[t].eq(terr[t]) for t in range(NT)]
        m.d.comb += [self.nxt[c].eq(nxt[c]) for c in range(NC)]
        m.d.comb += [self.nxt_valid[c].eq(nxt_valid[c]) for c in range(NC)]
        # An issue restarts its tag's state (before this block's own updates: theirs win).
        for t in range(NT):
            with m.If(self.clear_en & (self.clear_tag == t)):
                m.d.sync += [done[t].eq(0), terr[t].eq(0), tbad[t].eq(0), rcv[t].eq(0)]
        for c in range(NC):
            with m.If(self.nxt_clear[c]):
                m.d.sync += nxt_valid[c].eq(0)
        ext_tags, head_seq, outstanding = self.ext_tags, self.head_seq, self.outstanding

        i = self.i_cpl
        m.d.sync += [self.unexpected_cpl.eq(0), self.poisoned_cpl.eq(0)]

        # Stage 1: the beat registered; the tag's facts read from the table.
        s1 = Signal.like(i.p)
        s1_valid = Signal()
        s1_rel = Signal(8)
        s1_idx = Signal(TB)
        s1_bc = Signal(13)
        s1_len = Signal(11)
        s1_inwin = Signal()
        h = i.p.hdr
        tmask = Mux(ext_tags, 0xFF, 0x1F)
        rel = ((h.cpl.tag - head_seq[:8]) & tmask)[:8]
        idx = (head_seq[:TB] + rel)[:TB]
        m.d.comb += self.tag_addr.eq(idx)
        m.d.sync += [s1.eq(i.p), s1_valid.eq(i.valid)]
        with m.If(i.valid & i.p.first):
            # With 5-bit tags a tag above 31 is never one of ours.
            m.d.sync += [s1_rel.eq(rel), s1_idx.eq(idx),
                         s1_inwin.eq((rel < outstanding) & (ext_tags | (h.cpl.tag[5:] == 0))),
                         s1_bc.eq(Mux(h.cpl.byte_count == 0, 4096, h.cpl.byte_count)),
                         s1_len.eq(Mux(h.common.length == 0, 1024, h.common.length))]

        # The registers of the later stages (declared first: each stage forwards what the next
        # ones change).  Stage 2b's inputs, registered by stage 2a:
        u = Signal.like(i.p)
        u_valid = Signal()
        u_known = Signal()      # in the window of outstanding reads, and not done as read in 2a
        u_rcv = Signal(8)       # the tag's DW count as read in 2a
        u_same2 = Signal()      # same tag as the packet stage 2c decided on in 2a's cycle
        u_same3 = Signal()      # same tag as the beat stage 3 finished in 2a's cycle
        u_end2 = Signal(12)     # the DW count stage 2c left in 2a's cycle (if a good first beat)
        u_off = Signal(13)      # byte offset of the completion's first byte from src & ~3
        u_room = Signal(signed(12))     # the read's DWs minus the completion's length
        u_len = Signal(11)
        u_bc_big = Signal()     # the byte count is above the read's size
        u_code = Signal(4)      # the status's error code (poisoned, UR, CA), or 0
        u_base = Signal(RB)
        u_idx = Signal(TB)
        u_fetch = Signal()
        u_chan = Signal(2)
        # Stage 2c's inputs, registered by stage 2b:
        t = Signal.like(i.p)
        t_valid = Signal()
        t_known = Signal()      # as u_known, with what 2c and 3 changed in 2b's cycle forwarded
        t_k0 = Signal(11)       # DW index of the completion's first DW in the read
        t_end = Signal(12)      # k0 + length
        t_final = Signal()
        t_bad = Signal()        # fails whatever the tag's DW count (status, malformed)
        t_code = Signal(4)      # the error code if it fails
        t_k0_ok = Signal()      # k0 is the tag's DW count (2a's read, 2c's change forwarded)
        t_k0_fw = Signal()      # k0 is the DW count stage 2c leaves in 2b's cycle
        t_same2 = Signal()      # same tag as the packet stage 2c decided on in 2b's cycle
        t_same3 = Signal()      # same tag as the beat stage 3 finished in 2b's cycle
        t_base = Signal(RB)
        t_idx = Signal(TB)
        t_fetch = Signal()      # a descriptor fetch: data to channel t_chan's prefetch buffer
        t_chan = Signal(2)
        # Stage 2c's packet (for its later beats) and stage 3's inputs:
        pkt_good = Signal()
        pkt_k = Signal(11)
        pkt_base = Signal(RB)
        pkt_idx = Signal(TB)
        pkt_final = Signal()
        pkt_fetch = Signal()
        pkt_chan = Signal(2)
        s2 = Signal.like(i.p)
        s2_valid = Signal()
        s2_good = Signal()      # write this packet's data
        s2_k = Signal(11)       # DW index of lane 0 of the beat in s2
        s2_base = Signal(RB)
        s2_idx = Signal(TB)
        s2_final = Signal()
        s2_fetch = Signal()
        s2_chan = Signal(2)
        # What stages 2c and 3 changed in the tags' state in their previous cycle:
        f2_good = Signal()      # 2c decided a good first beat (it set the DW count to t_end)
        f2_fail = Signal()      # 2c failed the tag (set its done bit)
        f3_done = Signal()      # 3 set the tag's done bit
        # The tag 2c decides on this cycle: t_idx for a first beat, else its packet's.
        tag2 = Mux(t.first, t_idx, pkt_idx)

        # Stage 2a: the tag's state (done bit, DW count) read, and what the header and the
        # table entry give without it, registered.  Stage 2c and stage 3 may change the state
        # in this cycle and the next: stage 2b forwards the changes of this cycle, stage 2c
        # those of the next.
        info = self.tag_info
        hd = s1.hdr.cpl
        req_dws = (info.src_lo + info.nbytes + 3) >> 2
        m.d.sync += [u.eq(s1), u_valid.eq(s1_valid)]
        with m.If(s1_valid & s1.first):
            status = hd.status.as_value()
            code = Signal(4)
            m.d.comb += code.eq(0)
            with m.If(s1.hdr.common.ep):
                m.d.comb += code.eq(DmaError.CPL_POISONED)
            with m.Elif(status == CplStatus.UR.value):
                m.d.comb += code.eq(DmaError.CPL_UR)
            with m.Elif(status != CplStatus.SC.value):
                m.d.comb += code.eq(DmaError.CPL_CA)
            m.d.sync += [
                u_known.eq(s1_inwin & ~select(done, s1_idx)),
                u_rcv.eq(select(rcv, s1_idx)),
                u_same2.eq(s1_idx == tag2), u_same3.eq(s1_idx == s2_idx), u_end2.eq(t_end),
                u_off.eq(info.src_lo + info.nbytes - s1_bc), u_room.eq(req_dws - s1_len),
                u_len.eq(s1_len), u_bc_big.eq(s1_bc > info.nbytes),
                u_code.eq(code),
                u_base.eq(info.base), u_idx.eq(s1_idx),
                u_fetch.eq(info.fetch), u_chan.eq(info.chan),
            ]

        # Stage 2b: the completion's placement and its checks (against the read, and k0 against
        # the tag's DW count), registered.  k0 + length against the read's DWs is k0 against
        # u_room, so no sum is compared here.
        k0 = u_off[2:]
        m.d.sync += [t.eq(u), t_valid.eq(u_valid)]
        with m.If(u_valid & u.first):
            m.d.sync += [
                t_known.eq(u_known & ~(u_same2 & f2_fail) & ~(u_same3 & f3_done)),
                t_k0.eq(k0), t_end.eq(k0 + u_len), t_final.eq(k0 == u_room),
                t_bad.eq(u_bc_big | u_room[-1] | ~not_below(u_room[:-1], k0)
                         | (u.hdr.cpl.lower_address[:2] != u_off[:2])
                         | u.err | (u_code != 0)),
                t_code.eq(Mux(u_code != 0, u_code, DmaError.CPL_MALFORMED)),
                t_k0_ok.eq(Mux(u_same2 & f2_good, k0 == u_end2, k0 == u_rcv)),
                t_k0_fw.eq(k0 == t_end),
                t_same2.eq(u_idx == tag2), t_same3.eq(u_idx == s2_idx),
                t_base.eq(u_base), t_idx.eq(u_idx), t_fetch.eq(u_fetch), t_chan.eq(u_chan),
            ]

        # Stage 2c: the decision (unexpected, fault or good), the tag's state updated.
        m.d.sync += [f2_good.eq(0), f2_fail.eq(0),
                     f3_done.eq(s2_valid & s2.last & s2_good & s2_final)]
        with m.If(t_valid & t.first):
            known = t_known & ~(t_same2 & f2_fail) & ~(t_same3 & f3_done)
            fault = t_bad | ~Mux(t_same2 & f2_good, t_k0_fw, t_k0_ok)
            m.d.sync += self.poisoned_cpl.eq(t.hdr.common.ep & ~t.err)
            with m.If(~known):
                m.d.sync += self.unexpected_cpl.eq(~t.err & ~t.hdr.common.ep)
            with m.Elif(fault):
                for tg in range(NT):
                    with m.If(t_idx == tg):
                        m.d.sync += [terr[tg].eq(t_code), tbad[tg].eq(1), done[tg].eq(1)]
                m.d.sync += f2_fail.eq(1)
            good = known & ~fault
            with m.If(good):
                for tg in range(NT):
                    with m.If(t_idx == tg):
                        m.d.sync += rcv[tg].eq(t_end)
            m.d.sync += [f2_good.eq(good),
                         s2_good.eq(good), s2_k.eq(t_k0), s2_base.eq(t_base),
                         s2_idx.eq(t_idx), s2_final.eq(t_final & ~fault),
                         s2_fetch.eq(t_fetch), s2_chan.eq(t_chan)]
            m.d.sync += [pkt_good.eq(good), pkt_k.eq(t_k0 + 4), pkt_base.eq(t_base),
                         pkt_idx.eq(t_idx), pkt_final.eq(t_final & ~fault),
                         pkt_fetch.eq(t_fetch), pkt_chan.eq(t_chan)]
        with m.Elif(t_valid):
            m.d.sync += [s2_good.eq(pkt_good), s2_k.eq(pkt_k), s2_base.eq(pkt_base),
                         s2_idx.eq(pkt_idx), s2_final.eq(pkt_final), pkt_k.eq(pkt_k + 4),
                         s2_fetch.eq(pkt_fetch), s2_chan.eq(pkt_chan)]
            with m.If(t.err & pkt_good):
                # A completion the RX adapter ended with err: its data is lost.
                for tg in range(NT):
                    with m.If(pkt_idx == tg):
                        m.d.sync += [terr[tg].eq(DmaError.CPL_MALFORMED), tbad[tg].eq(1),
                                     done[tg].eq(1)]
                m.d.sync += [s2_good.eq(0), f2_fail.eq(1)]
        m.d.sync += [s2.eq(t), s2_valid.eq(t_valid)]

        # Stage 3: bank writes.  DW k of the read lives in row base + k // 4, bank k % 4.
        for j in range(4):
            wp = self.o_bank[j]
            lane = (j - s2_k[:2])[:2]
            row = (s2_base + ((s2_k + lane) >> 2))[:RB]
            m.d.comb += [
                wp.addr.eq(row),
                wp.data.eq(s2.data.word_select(lane, 32)),
                wp.en.eq(s2_valid & s2_good & ~s2_fetch & s2.dw_en.bit_select(lane, 1)),
            ]
        with m.If(s2_valid & s2.last & s2_good & s2_final):
            for tg in range(NT):
                with m.If(s2_idx == tg):
                    m.d.sync += done[tg].eq(1)
        # A descriptor fetch's DWs go to its channel's prefetch buffer (DW k of the read is DW
        # k of the descriptor), valid with its last DW: the planner need not wait for the
        # writer to reach the fetch in the queue (faults and the tag's release still happen
        # there, in order).  A channel stopped meanwhile keeps its buffer invalid.
        for c in range(NC):
            hit = s2_valid & s2_good & s2_fetch & (s2_chan == c) & ~self.abort[c]
            for d in range(16):
                lane = (d - s2_k)[:4]
                with m.If(hit & (lane < 4) & s2.dw_en.bit_select(lane[:2], 1)):
                    m.d.sync += nxt[c].as_value().word_select(d, 32).eq(
                        s2.data.word_select(lane[:2], 32))
            with m.If(hit & s2.last & s2_final):
                m.d.sync += nxt_valid[c].eq(1)
        return m
