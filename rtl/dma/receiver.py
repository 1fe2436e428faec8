"""The DMA's completion receiver: completions checked and placed in the completion buffer.

Brief section 3: the hard IP advertises infinite completion credits, so the DMA accepts every
completion at once (``i_cpl`` is always ready) and keeps its outstanding reads within the hard
IP's completion buffer itself (the bookkeeping in :mod:`peach2.dma.engine`).
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import N_DMA_CHANNELS, DmaError
from ..tlp.layouts import CplStatus
from ..tlp.stream import TLPBeat
from ..util import not_below
from .common import base_bits, ceil_log2, select, tag_info_layout
from .descring import SLOT_BITS, SLOT_DWS, ring_done_layout, ring_write_layout

__all__ = ["Receiver"]


def _regs(prefix, beat, **shapes):
    """Return a stage's registers: ``beat`` (a copy of the beat ``beat``'s shape, unless None)
    and one ``Signal`` per keyword, named ``<prefix>_<name>``."""
    regs = SimpleNamespace(**{name: Signal(shape, name=f"{prefix}_{name}")
                              for name, shape in shapes.items()})
    if beat is not None:
        regs.beat = Signal.like(beat, name=prefix)
    return regs


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
    descriptor ring instead (it takes no rows; :class:`~peach2.dma.descring.DescRing`): its
    tag's ``base`` holds ``Cat(first slot, 64-byte descriptors)``, and DW ``k`` lands in slot
    ``slot + k // dpd``, bank ``k % dpd`` (``dpd`` 8 or 16 DWs a descriptor), through a
    register; a slot is complete with its descriptor's last DW.

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
    landed : Out(ArrayLayout(8, n_tags))
        Per tag: the DWs of its read whose data is in the buffer, counted from the read's first
        DW (completions of a tag arrive in order), advanced a cycle after a good completion's
        last beat is written (so the writer can send a read's first pieces before its last
        completion).
    o_bank : Out(ArrayLayout(bank_write_layout, 4))
        The write ports of the buffer's four banks.
    abort : In(4)
        Per channel: stopped (a fetch's data is then not written into its ring).
    o_ring : Out(ArrayLayout(ring_write_layout, 16)) ; o_ring_done : Out(ring_done_layout)
        The descriptor rings' bank writes and the slot they complete (registered).
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
            "landed":         Out(data.ArrayLayout(8, n_tags)),
            "o_bank":         Out(data.ArrayLayout(bank_write_layout(rb), 4)),
            "abort":          In(nc),
            "o_ring":         Out(data.ArrayLayout(ring_write_layout(), SLOT_DWS)),
            "o_ring_done":    Out(ring_done_layout()),
            "unexpected_cpl": Out(1),
            "poisoned_cpl":   Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        NT = self.n_tags
        TB, RB = ceil_log2(NT), ceil_log2(self.rows)
        BB = base_bits(RB)
        done = Signal(NT)
        terr = Array([Signal(4, name=f"tag_err{t}") for t in range(NT)])
        tbad = Signal(NT)       # terr != 0, kept as its own bit
        # DWs received per tag: a completion must start where the previous one ended, and the
        # read is done only when every DW arrived (a completion lost to rx_st_err is a fault,
        # not stale data).
        rcv = Array([Signal(8, name=f"tag_rcv{t}") for t in range(NT)])
        # DWs per tag whose data stage 3 has written (rcv runs ahead of it by a completion).
        landed = Array([Signal(8, name=f"tag_landed{t}") for t in range(NT)])
        m.d.comb += [self.done.eq(done), self.bad.eq(tbad)]
        m.d.comb += [self.err[t].eq(terr[t]) for t in range(NT)]
        m.d.comb += [self.landed[t].eq(landed[t]) for t in range(NT)]
        # An issue restarts its tag's state (before this block's own updates: theirs win).
        for t in range(NT):
            with m.If(self.clear_en & (self.clear_tag == t)):
                m.d.sync += [done[t].eq(0), terr[t].eq(0), tbad[t].eq(0), rcv[t].eq(0),
                             landed[t].eq(0)]
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
        # ones change).
        u = _regs("u", s1,      # stage 2b's inputs, registered by stage 2a:
                  valid=1,
                  known=1,      # in the window of outstanding reads, not done as read in 2a
                  rcv=8,        # the tag's DW count as read in 2a
                  same2=1,      # same tag as the packet stage 2c decided on in 2a's cycle
                  same3=1,      # same tag as the beat stage 3 finished in 2a's cycle
                  end2=12,      # the DW count stage 2c left in 2a's cycle (if a good first beat)
                  off=13,       # byte offset of the completion's first byte from src & ~3
                  room=signed(12),  # the read's DWs minus the completion's length
                  len=11,
                  bc_big=1,     # the byte count is above the read's size
                  code=4,       # the status's error code (poisoned, UR, CA), or 0
                  base=BB, idx=TB, fetch=1, chan=2)
        t = _regs("t", s1,      # stage 2c's inputs, registered by stage 2b:
                  valid=1,
                  known=1,      # as u_known, with what 2c and 3 changed in 2b's cycle forwarded
                  k0=11,        # DW index of the completion's first DW in the read
                  end=12,       # k0 + length
                  final=1,
                  bad=1,        # fails whatever the tag's DW count (status, malformed)
                  code=4,       # the error code if it fails
                  k0_ok=1,      # k0 is the tag's DW count (2a's read, 2c's change forwarded)
                  k0_fw=1,      # k0 is the DW count stage 2c leaves in 2b's cycle
                  same2=1,      # same tag as the packet stage 2c decided on in 2b's cycle
                  same3=1,      # same tag as the beat stage 3 finished in 2b's cycle
                  base=BB, idx=TB,
                  fetch=1,      # a descriptor fetch: data to channel t_chan's descriptor ring
                  chan=2)
        # Stage 2c's packet (for its later beats) and stage 3's inputs:
        pkt = _regs("pkt", None, good=1, k=11, end=12, base=BB, idx=TB, final=1, fetch=1,
                    chan=2)
        s2 = _regs("s2", s1,
                   valid=1,
                   good=1,      # write this packet's data
                   k=11,        # DW index of lane 0 of the beat in s2
                   end=12,      # DW index after the packet's last DW
                   base=BB, idx=TB, final=1, fetch=1, chan=2)
        # What stages 2c and 3 changed in the tags' state in their previous cycle:
        f = SimpleNamespace(
            f2_good=Signal(name="f2_good"),     # 2c decided a good first beat (DW count t_end)
            f2_fail=Signal(name="f2_fail"),     # 2c failed the tag (set its done bit)
            f3_done=Signal(name="f3_done"))     # 3 set the tag's done bit
        f2_good, f2_fail, f3_done = f.f2_good, f.f2_fail, f.f3_done
        # The tag 2c decides on this cycle: t_idx for a first beat, else its packet's.
        tag2 = Mux(t.beat.first, t.idx, pkt.idx)

        # Stage 2a: the tag's state (done bit, DW count) read, and what the header and the
        # table entry give without it, registered.  Stage 2c and stage 3 may change the state
        # in this cycle and the next: stage 2b forwards the changes of this cycle, stage 2c
        # those of the next.
        info = self.tag_info
        hd = s1.hdr.cpl
        req_dws = (info.src_lo + info.nbytes + 3) >> 2
        m.d.sync += [u.beat.eq(s1), u.valid.eq(s1_valid)]
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
                u.known.eq(s1_inwin & ~select(done, s1_idx)),
                u.rcv.eq(select(rcv, s1_idx)),
                u.same2.eq(s1_idx == tag2), u.same3.eq(s1_idx == s2.idx), u.end2.eq(t.end),
                u.off.eq(info.src_lo + info.nbytes - s1_bc), u.room.eq(req_dws - s1_len),
                u.len.eq(s1_len), u.bc_big.eq(s1_bc > info.nbytes),
                u.code.eq(code),
                u.base.eq(info.base), u.idx.eq(s1_idx),
                u.fetch.eq(info.fetch), u.chan.eq(info.chan),
            ]

        # Stage 2b: the completion's placement and its checks (against the read, and k0 against
        # the tag's DW count), registered.  k0 + length against the read's DWs is k0 against
        # u.room, so no sum is compared here.
        k0 = u.off[2:]
        m.d.sync += [t.beat.eq(u.beat), t.valid.eq(u.valid)]
        with m.If(u.valid & u.beat.first):
            m.d.sync += [
                t.known.eq(u.known & ~(u.same2 & f2_fail) & ~(u.same3 & f3_done)),
                t.k0.eq(k0), t.end.eq(k0 + u.len), t.final.eq(k0 == u.room),
                t.bad.eq(u.bc_big | u.room[-1] | ~not_below(u.room[:-1], k0)
                         | (u.beat.hdr.cpl.lower_address[:2] != u.off[:2])
                         | u.beat.err | (u.code != 0)),
                t.code.eq(Mux(u.code != 0, u.code, DmaError.CPL_MALFORMED)),
                t.k0_ok.eq(Mux(u.same2 & f2_good, k0 == u.end2, k0 == u.rcv)),
                t.k0_fw.eq(k0 == t.end),
                t.same2.eq(u.idx == tag2), t.same3.eq(u.idx == s2.idx),
                t.base.eq(u.base), t.idx.eq(u.idx), t.fetch.eq(u.fetch), t.chan.eq(u.chan),
            ]

        tags = SimpleNamespace(done=done, terr=terr, tbad=tbad, rcv=rcv, landed=landed)
        self._decide(m, tags, t, pkt, s2, f)
        self._write(m, tags, s2)
        return m

    def _decide(self, m, tags, t, pkt, s2, f):
        """Stage 2c: the decision (unexpected, fault or good), the tag's state updated."""
        NT = self.n_tags
        done, terr, tbad, rcv = tags.done, tags.terr, tags.tbad, tags.rcv
        f2_good, f2_fail, f3_done = f.f2_good, f.f2_fail, f.f3_done
        m.d.sync += [f2_good.eq(0), f2_fail.eq(0),
                     f3_done.eq(s2.valid & s2.beat.last & s2.good & s2.final)]
        known = t.known & ~(t.same2 & f2_fail) & ~(t.same3 & f3_done)
        fault = t.bad | ~Mux(t.same2 & f2_good, t.k0_fw, t.k0_ok)
        # Whether this beat fails its tag (a header beat, known, faulty) and whether an
        # err-ended completion does (a data beat), as nets: each tag's state update then
        # ANDs a finished condition with its tag compare (the mapping otherwise spreads them
        # over the compares, a level more into ``done``).
        fail_hdr = Signal(name="t_fail_hdr", attrs={"keep": 1})
        fail_err = Signal(name="t_fail_err", attrs={"keep": 1})
        m.d.comb += [fail_hdr.eq(t.valid & t.beat.first & known & fault),
                     fail_err.eq(t.valid & ~t.beat.first & t.beat.err & pkt.good)]
        with m.If(fail_hdr):
            for tg in range(NT):
                with m.If(t.idx == tg):
                    m.d.sync += [terr[tg].eq(t.code), tbad[tg].eq(1), done[tg].eq(1)]
        with m.If(fail_err):
            # A completion the RX adapter ended with err: its data is lost.
            for tg in range(NT):
                with m.If(pkt.idx == tg):
                    m.d.sync += [terr[tg].eq(DmaError.CPL_MALFORMED), tbad[tg].eq(1),
                                 done[tg].eq(1)]
        with m.If(t.valid & t.beat.first):
            m.d.sync += self.poisoned_cpl.eq(t.beat.hdr.common.ep & ~t.beat.err)
            with m.If(~known):
                m.d.sync += self.unexpected_cpl.eq(~t.beat.err & ~t.beat.hdr.common.ep)
            with m.Elif(fault):
                m.d.sync += f2_fail.eq(1)
            good = known & ~fault
            with m.If(good):
                for tg in range(NT):
                    with m.If(t.idx == tg):
                        m.d.sync += rcv[tg].eq(t.end)
            m.d.sync += [f2_good.eq(good),
                         s2.good.eq(good), s2.k.eq(t.k0), s2.end.eq(t.end), s2.base.eq(t.base),
                         s2.idx.eq(t.idx), s2.final.eq(t.final & ~fault),
                         s2.fetch.eq(t.fetch), s2.chan.eq(t.chan)]
            m.d.sync += [pkt.good.eq(good), pkt.k.eq(t.k0 + 4), pkt.end.eq(t.end),
                         pkt.base.eq(t.base),
                         pkt.idx.eq(t.idx), pkt.final.eq(t.final & ~fault),
                         pkt.fetch.eq(t.fetch), pkt.chan.eq(t.chan)]
        with m.Elif(t.valid):
            m.d.sync += [s2.good.eq(pkt.good), s2.k.eq(pkt.k), s2.end.eq(pkt.end),
                         s2.base.eq(pkt.base),
                         s2.idx.eq(pkt.idx), s2.final.eq(pkt.final), pkt.k.eq(pkt.k + 4),
                         s2.fetch.eq(pkt.fetch), s2.chan.eq(pkt.chan)]
            with m.If(t.beat.err & pkt.good):       # (its tag fails above: fail_err)
                m.d.sync += [s2.good.eq(0), f2_fail.eq(1)]
        m.d.sync += [s2.beat.eq(t.beat), s2.valid.eq(t.valid)]

    def _write(self, m, tags, s2):
        """Stage 3: the bank writes, the done bit of a read whose last DW is in, the DWs landed
        of a tag whose completion's last DW is in, and a descriptor fetch's DWs into its
        channel's descriptor ring."""
        NT, RB = self.n_tags, ceil_log2(self.rows)
        done = tags.done
        # Stage 3: bank writes.  DW k of the read lives in row base + k // 4, bank k % 4.
        for j in range(4):
            wp = self.o_bank[j]
            lane = (j - s2.k[:2])[:2]
            row = (s2.base + ((s2.k + lane) >> 2))[:RB]
            m.d.comb += [
                wp.addr.eq(row),
                wp.data.eq(s2.beat.data.word_select(lane, 32)),
                wp.en.eq(s2.valid & s2.good & ~s2.fetch & s2.beat.dw_en.bit_select(lane, 1)),
            ]
        with m.If(s2.valid & s2.beat.last & s2.good & s2.final):
            for tg in range(NT):
                with m.If(s2.idx == tg):
                    m.d.sync += done[tg].eq(1)
        with m.If(s2.valid & s2.beat.last & s2.good):
            for tg in range(NT):
                with m.If(s2.idx == tg):
                    m.d.sync += tags.landed[tg].eq(s2.end)
        self._ring_write(m, s2)

    def _ring_write(self, m, s2):
        """A descriptor fetch's DWs into its channel's ring (registered): DW ``k`` of the fetch
        is DW ``k % dpd`` (its bank) of slot ``slot + k // dpd``; a beat's four DWs reach four
        different banks, those below its first DW's bank in the next slot.  The slot whose
        last DW is written is complete.  A stopped channel's data is not written (its ring is
        emptied at its next start)."""
        big = s2.base[SLOT_BITS]
        kmod = Mux(big, s2.k[:4], s2.k[:3])
        sbase = (s2.base[:SLOT_BITS] + Mux(big, s2.k[4:], s2.k[3:]))[:SLOT_BITS]
        hit = s2.valid & s2.good & s2.fetch & ~self.abort.bit_select(s2.chan, 1)
        slots, ens = [], []
        for j in range(SLOT_DWS):
            dpd = Mux(big, 16, 8)
            wrap = kmod > j                      # DW j of the next slot
            lane = Mux(wrap, j + dpd - kmod, j - kmod)[:5]
            en = hit & (lane < 4) & s2.beat.dw_en.bit_select(lane[:2], 1)
            if j >= 8:
                en = en & big
            slot = Mux(wrap, sbase + 1, sbase)[:SLOT_BITS]
            slots.append(slot)
            ens.append(en)
            w = self.o_ring[j]
            m.d.sync += [w.en.eq(en), w.addr.eq(Cat(slot, s2.chan)),
                         w.data.eq(s2.beat.data.word_select(lane[:2], 32))]
        dn = self.o_ring_done
        m.d.sync += [dn.en.eq(Mux(big, ens[15], ens[7])),
                     dn.chan.eq(s2.chan), dn.slot.eq(Mux(big, slots[15], slots[7]))]
