"""The DMA's planner: the channels' state machines, round robin, CALC/ACT, chunking (002 3.4).

"Registering the head address runs the DMAs one after the other ... a few DMAs can also be
issued lightly by setting control registers.  Each DMA request can ask for a block-stride
transfer" (002 section 3.4).  ``docs/dma.md`` draws the channel state machine and the pipeline.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import N_DMA_CHANNELS
from ..signatures import DmaControlSignature
from ..util import below
from .booking import RoomSignature, issue_layout
from .channels import channel_registers, control, reports
from .common import Act, Chan, Kind, bits, ceil_log2, entry_layout, select
from .credits import cpl_credits, fits, rows_for
from .descring import RingSignature
from .fetch import fetch_act, fetch_plan, fetch_registers
from .load import (
    consume,
    follow_chain,
    load,
    load_checks,
    load_read,
    load_read_registers,
    load_read_room,
)
from .writer import ReportSignature

__all__ = ["Planner"]

#: The members of :class:`~peach2.signatures.DmaControlSignature` the planner takes.
_CSR_MEMBERS = ("ch_head_lo", "ch_head_hi", "ch_ctrl_stb", "ch_ctrl_data", "slots",
                "slot_held", "slot_refused", "ch_status", "ch_desc_done", "ch_bytes_lo",
                "ch_bytes_hi", "ch_desc_addr_lo", "ch_desc_addr_hi")


#: A descriptor fetch's completion credits, counted at the worst for the largest fetch (512
#: bytes from a 32-byte aligned address, not crossing a 512-byte boundary): 8 completions, 32
#: data credits.
FETCH_CREDITS = (8, 32)


class Planner(wiring.Component):
    """Round robin over the channels; per action (two cycles, CALC then ACT): fetch a
    descriptor, load the next descriptor (from the prefetch buffer, or from the register-mode
    slots) and check it, or cut the next read off the current burst.  The read that ends a
    descriptor's last burst also closes the descriptor: its *mark* (completion write, MSI,
    counters) enters the queue in the cycle after the read's entry, where no action pushes.

    CALC works out the action (from each channel's own registers, then the selected one's), the
    chunk (the least of four candidates, two choices from six carry-chain compares), its
    credits, the rest of the burst after it and the channel's next state, all into registers
    (``k_*``); ACT only adds and enables: the read's and the entry's fields are written whatever
    the room checks say, which decide only whether they count.  Every read needs room for its
    tag, rows and credits (:class:`~peach2.dma.booking.Booking`'s counters) and every action
    pushes one entry into the in-order queue (a closing read two).  Faults stop a channel at
    once and are recorded a cycle later.  The channels' registers, control writes and status are in
    :mod:`peach2.dma.channels`, the descriptor load in :mod:`peach2.dma.load`.

    Parameters
    ----------
    n_tags, rows : int
        As :class:`~peach2.dma.booking.Booking`'s.

    Members
    -------
    mrrs_m1, min_mask : In(10)
        The max read request size less 1; min(MPS, MRRS) less 1.
    room : In(RoomSignature)
        The room for the next read (:class:`~peach2.dma.booking.Booking`'s).
    issue : Out(issue_layout)
        The read decided in ACT (registered), to book.
    o_entry : Out(stream.Signature(entry_layout, always_ready=True))
        The in-order queue's entries (registered; the planner keeps room in the queue itself,
        from ``queue_level``).  ``tag`` and ``base`` are the booking's to fill in.
    queue_level : In(range(2 * n_tags + 1))
    report : In(ReportSignature)
        The writer's reports (:class:`~peach2.dma.writer.Writer`).
    ring : In(RingSignature)
        The descriptor rings' staging registers (:class:`~peach2.dma.descring.DescRing`).
    abort, unroutable : Out(4)
        Per channel: stopped by a fault; a write of it found no route.
    ch_head_lo, ch_head_hi, ch_ctrl_stb, ch_ctrl_data, slots, slot_held, slot_refused,
    ch_status, ch_desc_done, ch_bytes_lo, ch_bytes_hi, ch_desc_addr_lo, ch_desc_addr_hi, msi_req
        As :class:`~peach2.dma.engine.DMA`'s.
    """

    def __init__(self, *, n_tags, rows):
        self.n_tags, self.rows = n_tags, rows
        tb, rb = ceil_log2(n_tags), ceil_log2(rows)
        nc = N_DMA_CHANNELS
        csr = DmaControlSignature().flip().members
        super().__init__({
            "mrrs_m1":         In(10),
            "min_mask":        In(10),
            "room":            In(RoomSignature(n_tags=n_tags, rows=rows)),
            "issue":           Out(issue_layout(rb)),
            "o_entry":         Out(stream.Signature(entry_layout(tb, rb), always_ready=True)),
            "queue_level":     In(range(2 * n_tags + 1)),
            "report":          In(ReportSignature()),
            "ring":            In(RingSignature()),
            "abort":           Out(nc),
            "unroutable":      Out(nc),
            # The DMA's members toward the register block that the channels use, passed
            # through (DmaControlSignature, from the DMA's side).
            **{name: csr[name] for name in _CSR_MEMBERS},
            "msi_req":         Out(nc),
        })

    def elaborate(self, platform):
        m = Module()
        NC = N_DMA_CHANNELS
        ch = channel_registers(self.ring.nxt, self.ring.nxt_valid, self.ring.note)
        # The fetch registers (peach2.dma.fetch): ``can_pf``, a channel may fetch.
        vars(ch).update(vars(fetch_registers()))
        fetch_plan(m, ch, self.mrrs_m1, self.ring.pop)
        # The rings are told a cycle late that a channel runs (from its state, registered).
        m.d.sync += self.ring.run.eq(Cat(*[(ch.st[c] == Chan.WAIT) | (ch.st[c] == Chan.RUN)
                                           for c in range(NC)]))
        m.d.comb += [self.ring.nxt_clear.eq(ch.nxt_clear),
                     self.abort.eq(Cat(*ch.abort)),
                     self.unroutable.eq(Cat(*ch.unroutable))]
        m.d.sync += self.issue.en.eq(0)
        control(m, self, ch)
        # The entry decided in ACT (registered; fields its kind does not use keep older
        # values) enters the queue in the next cycle.
        m.d.sync += ch.pq_en.eq(0)
        m.d.comb += [ch.pq_chan.eq(self.o_entry.payload.chan),
                     self.o_entry.valid.eq(ch.pq_en)]

        # Channel wants: anything but IDLE; DRAIN finishes by itself below.
        st, pq_en, pq_chan = ch.st, ch.pq_en, ch.pq_chan
        wants = Signal(NC)
        drained = Signal(NC)
        for c in range(NC):
            slot_ok = ch.regmode[c] & (~ch.queue[c] | ch.has_slot[c])
            m.d.comb += wants[c].eq((st[c] == Chan.RUN) |
                                    ((st[c] == Chan.WAIT) & (ch.nxt_valid[c] | slot_ok
                                                             | ch.can_pf[c])))
            # A stopped queue with nothing left to load drains, a cycle after it is seen so (a
            # register: no new writer of the state), as an abort does (no load can be under
            # way: it needs ``has_slot``, and a stopped queue takes no appends; one taken with
            # the stop is in ``has_slot`` a cycle later).
            m.d.sync += ch.qdone[c].eq(ch.queue[c] & ch.qstop[c] & (st[c] == Chan.WAIT)
                                       & ~ch.has_slot[c] & ~ch.app_d[c])
            # Done draining: nothing of the channel in the queue a cycle ago, nothing entering
            # it then (so nothing is in it now), and nothing entering it now.
            m.d.sync += drained[c].eq((ch.pending[c] == 0) & ~(pq_en & (pq_chan == c)))
            with m.If((st[c] == Chan.DRAIN) & drained[c] & ~(pq_en & (pq_chan == c))):
                m.d.sync += st[c].eq(Chan.IDLE)
            with m.If(ch.to_drain[c] & (st[c] != Chan.IDLE) & (st[c] != Chan.DRAIN)):
                m.d.sync += st[c].eq(Chan.DRAIN)

        k = self._calc_registers(m, ch)
        self._calc_inputs(m, ch, k)
        # Round robin: the first wanting channel after the last one served.
        found = Const(0, 1)
        pick = Signal(range(NC))
        for i in reversed(range(2 * NC)):
            c = i % NC
            cond = wants[c] & ((i >= NC) | (c > k.last_sel))
            with m.If(cond):
                m.d.comb += pick.eq(c)
            found = found | cond
        k.ld = load_checks(m, self.slots, ch, k.sel)
        # (every cycle, outside the state machine: only ACT looks at what CALC registered, and
        # CALC's decode would otherwise sit between the room's carry chains)
        load_read_room(m, ch, k, self.room, self.issue, k.tags_now)

        with m.FSM(name="planner"):
            with m.State("SEL"):
                with m.If(found):
                    m.d.sync += [k.sel.eq(pick), k.last_sel.eq(pick)]
                    m.next = "CALC"
            with m.State("CALC"):
                self._calc(m, ch, k)
                m.next = "ACT"
            with m.State("ACT"):
                # The next channel is chosen now (from this cycle's wants), so an action takes
                # two cycles: CALC, ACT.  A channel this action stops wanting may be picked once
                # more; its next ACT does nothing.
                with m.If(found):
                    m.d.sync += [k.sel.eq(pick), k.last_sel.eq(pick)]
                    m.next = "CALC"
                with m.Else():
                    m.next = "SEL"
                self._act(m, ch, k)
        with m.If(k.do[Act.LOAD]):
            follow_chain(m, ch, k.sel, k.ld)
        consume(m, ch, k.sel, k.ld, k.do[Act.LOAD])
        self._issue(m, ch, k)
        self._close(m, ch, k)
        self._mark(m, ch, k)
        reports(m, self, ch)
        return m

    def _calc_registers(self, m, ch):
        """Return the selected channel, the chunk's candidates and what CALC registers for ACT
        (``k_*``), with ACT's room checks ``go_read`` and ``go_fetch``."""
        NC = N_DMA_CHANNELS
        RB = ceil_log2(self.rows)
        k = SimpleNamespace(sel=Signal(range(NC), name="sel"),
                            last_sel=Signal(range(NC), name="last_sel"),
                            mark_en=Signal(name="mark_en"),
                            mark_chan=Signal(range(NC), name="mark_chan"))
        sel, room = k.sel, self.room
        c_src, c_dst, c_brem_m1 = ch.cur_src[sel], ch.cur_dst[sel], ch.brem_m1[sel]
        # Chunk of the current burst (CALC): at most MRRS, within the source 4 KiB page, ending
        # on a destination min(MPS, MRRS) boundary where it can: the least of four candidates,
        # found by comparing every pair at once.  Each is held minus one, which needs no adder:
        # MRRS counts whole DWs (a read starting at source byte 1..3 of a DW is shorter), so
        # min(mrrs - (dst & min_mask), mrrs - src[:2]) - 1 is (mrrs - 1) ^ either (both below
        # mrrs); 4096 - src[:12] - 1 is ~src[:12]; and the burst's rest is kept minus one.
        cand = [Signal(12, name=n) for n in ("c_lim_dst", "c_lim_dw", "c_lim_src", "c_rem")]
        m.d.comb += [
            cand[0].eq(self.mrrs_m1 ^ (c_dst[:10] & self.min_mask)),
            cand[1].eq(self.mrrs_m1 ^ c_src[:2]),
            cand[2].eq(~c_src[:12]),
            cand[3].eq(c_brem_m1[:12]),
        ]
        # The six compares, kept as nets (the mapping otherwise spreads them over the picks
        # below and adds levels).  The rest >= 4 KiB loses every compare (``bbig``).
        # (Kept as the chains' borrows, cand[j] < cand[i], not inverted: a kept inverted net
        # is a NOT of its own in the ALM flow, and the picks below then take two levels.)
        gt = {}
        for i, j in ((0, 1), (0, 2), (1, 2), (3, 0), (3, 1), (3, 2)):
            gt[i, j] = Signal(name=f"c_gt{i}{j}", attrs={"keep": 1})
            if i == 3:      # the rest, with bbig as its 13th bit: one chain
                m.d.comb += gt[i, j].eq(below(Cat(cand[j], Const(0, 1)),
                                              Cat(cand[3], ch.bbig[sel])))
            else:
                m.d.comb += gt[i, j].eq(below(cand[j], cand[i]))
        # The winner, as two choices made at once from the compares (one LUT each): the rest of
        # the burst, if no other is below it (it wins ties, so the chunk then ends the burst:
        # ``win_r``); else candidate 2, if it is below the less of 0 and 1 (``win_2``); else
        # that one (ties among 0..2 pick equal values).  Each pick is then the less of 0 and 1
        # (one LUT, beside the choices) and a 3:1 multiplexer of it (one more).
        win_r = Signal(name="c_win_r", attrs={"keep": 1})
        win_2 = Signal(name="c_win_2", attrs={"keep": 1})
        m.d.comb += [win_r.eq(~gt[3, 0] & ~gt[3, 1] & ~gt[3, 2]),
                     win_2.eq(Mux(gt[0, 1], gt[1, 2], gt[0, 2]))]
        k.cand, k.win_r, k.win_2, k.gt01 = cand, win_r, win_2, gt[0, 1]

        def reg(name, shape=1):
            return Signal(shape, name=f"k_{name}")
        # What CALC registers for ACT: the chunk, whether it ends the burst, how far the
        # source and destination move after it (with the gaps at a burst's end: the position
        # update is then one two-input add), its rows and credits, the descriptor's burst
        # length less 1 (and whether it is 4096 or more), the rest of the burst less 1 after
        # the chunk, whether this burst is the last, the room for a fetch (but the read-request
        # skid), the channel's next state (``st_en``: ACT changes it, if its fetch is issued
        # when ``st_go``), the room for a queue entry and a tag, the credits left.
        for name, shape in (("chunk", 13), ("end", 1), ("src_step", 33), ("dst_step", 33),
                            ("rows", RB + 1), ("rows_less", signed(RB + 1)), ("hdr", 5),
                            ("dat", 7), ("len_m1", 32), ("brem_next", 32), ("bbig", 1),
                            ("bl_one", 1), ("fetch_ok", 1),
                            ("st_new", Chan), ("qroom", 1), ("qroom_tags", 1),
                            ("tags", 1), ("room_hdr", signed(11)), ("room_dat", signed(15))):
            setattr(k, name, reg(name, shape))
        # What ACT does, one-hot, registered in CALC and held for ACT only (a channel stopped
        # by then does its action anyway: what it issues or pushes is dropped in the writer).
        k.do = {a: Signal(name=f"k_do_{a.name.lower()}") for a in Act if a != Act.NONE}
        m.d.sync += [v.eq(0) for v in k.do.values()]
        # Per channel, whether ACT does a data read (``k_do_data``, one-hot by channel, for
        # ``_close``); and a closed descriptor's mark, to push in the next cycle (``_mark``).
        k.reading = [Signal(name=f"k_reading{c}") for c in range(NC)]
        m.d.sync += [v.eq(0) for v in k.reading]
        # Likewise whether ACT's load also issues the descriptor's only read (``k_loading``),
        # with that read's rows and credits (peach2.dma.load, ``load_read_room``).
        load_read_registers(m, k, RB)
        m.d.sync += k.mark_en.eq(0)
        # Room in the queue for the entries of the next two actions (two each at most: a
        # closing read and its mark), registered (the level rises by at most one a cycle, so
        # a cycle old it is one entry more conservative): 7 free entries cover them.
        k.q_room = Signal(name="q_room")
        m.d.sync += k.q_room.eq(self.queue_level < 2 * self.n_tags - 6)
        # The load's state change, one-hot by channel (``_close`` needs no channel compare).
        k.st_en_c = [Signal(name=f"k_st_en{c}") for c in range(NC)]
        m.d.sync += [v.eq(0) for v in k.st_en_c]
        # The credits left, as ACT will see them: registered in CALC from ``room_*`` (the
        # counters a cycle ago), less the issue booked in the last cycle or in this one (issues
        # are booked at most every other cycle, and the issue's credits hold until the next).
        d_iss_q = Signal(name="d_iss_q")
        m.d.sync += d_iss_q.eq(self.issue.en)
        k.unbooked = self.issue.en | d_iss_q
        # ACT issues a read only with room for it everywhere: queue, tag, read-request skid,
        # buffer rows, completion credits (the last three from this cycle's counters).
        # (A net of its own: the mapping otherwise spreads it over the registers it enables.)
        k.go_read = Signal(name="go_read", attrs={"keep": 1})
        m.d.comb += k.go_read.eq(k.qroom_tags & ~room.rd_busy
                                 & ~(room.free_less - k.rows_less)[-1]
                                 & (room.hdr_free | fits(k.hdr, k.room_hdr))
                                 & (room.dat_free | fits(k.dat, k.room_dat)))
        # A load's read: its room checked in CALC (``k_ld_one``), but the skid.
        k.go_load = Signal(name="go_load", attrs={"keep": 1})
        m.d.comb += k.go_load.eq(k.ld_one & ~room.rd_busy)
        # A descriptor fetch: its credits checked in CALC (FETCH_CREDITS), no rows.
        k.go_fetch = k.fetch_ok & ~room.rd_busy
        return k

    def _calc_inputs(self, m, ch, k):
        """What CALC decides from, as nets outside the state machine (``k.act``, the selected
        channel's action; ``k.room_hdr_now``, ``k.room_dat_now``, the credits left): only CALC
        looks at them, and assigned inside its state they would carry the state's decode in
        front of the channels' actions, a LUT level more on the way to ``k_st_en``."""
        NC = N_DMA_CHANNELS
        sel, iss, room = k.sel, self.issue, self.room
        # Each channel's action from its own registers, then the selected one's (so the
        # channel multiplexer comes last).
        acts = []
        for c in range(NC):
            act_c = Signal(Act, name=f"ch{c}_act")
            with m.Switch(ch.st[c]):
                with m.Case(Chan.WAIT):
                    # Load what is staged; else fetch (the head, or a run announced).
                    m.d.comb += act_c.eq(Mux(ch.nxt_valid[c] | ch.regmode[c], Act.LOAD,
                                             Mux(ch.can_pf[c], Act.PF, Act.NONE)))
                with m.Case(Chan.RUN):
                    # Fetch ahead before the current descriptor's reads (002 section 3.4).
                    with m.If(ch.can_pf[c]):
                        m.d.comb += act_c.eq(Act.PF)
                    with m.Elif(ch.fwait[c]):
                        # The next descriptor's fetch first (fetch.py, ``fwait``).
                        m.d.comb += act_c.eq(Act.NONE)
                    with m.Else():
                        m.d.comb += act_c.eq(Act.DATA)
                with m.Default():
                    m.d.comb += act_c.eq(Act.NONE)
            act_g = Signal(Act, name=f"ch{c}_act_go", attrs={"keep": 1})
            m.d.comb += act_g.eq(Mux(ch.abort[c], Act.NONE, act_c))
            acts.append(act_g)
        k.acts = acts
        k.act = act = Signal(Act, name="act")
        m.d.comb += act.eq(select(acts, sel))
        # A tag free for ACT's read: one more than an issue being booked now.
        k.tags_now = Signal(name="tags_now")
        m.d.comb += k.tags_now.eq(Mux(iss.en, room.tags_free[1], room.tags_free[0]))
        k.room_hdr_now = room_hdr_now = Signal(signed(11), name="room_hdr_now")
        k.room_dat_now = room_dat_now = Signal(signed(15), name="room_dat_now")
        m.d.comb += [room_hdr_now.eq(room.room_hdr - Mux(k.unbooked, iss.hdr, 0)),
                     room_dat_now.eq(room.room_dat - Mux(k.unbooked, iss.dat, 0))]

    def _calc(self, m, ch, k):
        """CALC: what ACT will do, and everything it needs that does not change meanwhile (only
        the channel's own ACT changes its registers; an abort is looked at here).  The next
        descriptor is prefetched before the current one's reads (002 section 3.4)."""
        sel, cand, room, act = k.sel, k.cand, self.room, k.act
        room_hdr_now, room_dat_now = k.room_hdr_now, k.room_dat_now
        c_src, c_brem_m1, c_cur = ch.cur_src[sel], ch.brem_m1[sel], ch.cur[sel]

        def pick_of(values):
            return Mux(k.win_r, values[3], Mux(k.win_2, values[2],
                                               Mux(k.gt01, values[1], values[0])))
        d_hdrs, d_dats = zip(*[cpl_credits(c_src, v) for v in cand])
        m.d.sync += [v.eq(act == a) for a, v in k.do.items()]
        # ACT's data read, one-hot by channel (from each channel's own action, not through
        # the channel multiplexer).
        m.d.sync += [v.eq((k.acts[c] == Act.DATA) & (sel == c)) for c, v in enumerate(k.reading)]
        last_now = ch.last_pre[sel]
        tags_now = k.tags_now
        # Every candidate's sums are made at once and picked with the winner's index: no
        # adder after the compares.
        cand1 = [v + 1 for v in cand]
        rows = Signal(len(k.rows), name="c_rows")
        m.d.comb += rows.eq(pick_of([rows_for(c_src[:2], v) for v in cand]))
        m.d.sync += [
            k.chunk.eq(pick_of(cand1)), k.end.eq(k.win_r),
            k.len_m1.eq(c_cur.length - 1),
            k.bl_one.eq(ch.bleft[sel] == 1),
            k.bbig.eq(ch.lbig[sel]),
            # The rest after each candidate: brem_m1 - (cand + 1) is brem_m1 + ~cand in
            # 32 bits, one two-input add.
            k.brem_next.eq(pick_of([(c_brem_m1 + Cat(~v, Const(0xFFFFF, 20)))[:32]
                                    for v in cand[:3]] + [0])),
            # At a burst's end the rest is the chunk: step over it and the gap.
            k.src_step.eq(pick_of(cand1[:3] + [c_brem_m1 + ch.sgap1[sel]])),
            k.dst_step.eq(pick_of(cand1[:3] + [c_brem_m1 + ch.dgap1[sel]])),
            # A data read's rows and credits (a fetch has constants of its own).
            k.rows.eq(rows),
            # Less the buffer's rows (a power of two, above any read's rows less one: its top
            # bit flipped), for ACT's compare with the booking's ``free_less``.
            k.rows_less.eq(Cat(rows[:-1], ~rows[-1])),
            k.hdr.eq(pick_of(d_hdrs)),
            k.dat.eq(pick_of(d_dats)),
            k.qroom.eq(k.q_room),
            # (both as one register: one input fewer in front of ``go_read``; ``k_tags`` alone
            # is what the proofs' lemmas name)
            k.qroom_tags.eq(k.q_room & tags_now),
            k.tags.eq(tags_now),
            # The fetch's room (all but the read-request skid, looked at in ACT).
            k.fetch_ok.eq(k.q_room & tags_now & (ch.fhold[sel] == 0)
                          & (room.hdr_free | fits(Const(FETCH_CREDITS[0], 5), room_hdr_now))
                          & (room.dat_free | fits(Const(FETCH_CREDITS[1], 7), room_dat_now))),
            k.room_hdr.eq(room_hdr_now),
            k.room_dat.eq(room_dat_now),
        ]
        # The channel's next state, if ACT does its action: a load (of a whole descriptor)
        # runs it, or stops it at a malformed one (with room to report it); the read that
        # closes the descriptor (``_close``) ends the run; a head fetch waits for the
        # descriptor.
        with m.If(act == Act.LOAD):     # (a stopped channel's act is NONE)
            m.d.sync += [v.eq((sel == c) & k.ld.ok_now & (~k.ld.bad_now | k.q_room))
                         for c, v in enumerate(k.st_en_c)]
        # The state it would change to, from the state alone (WAIT: the load, RUN: the
        # closing read; st_en or ``_close`` says whether it changes).
        c_st = ch.st[sel]
        m.d.sync += k.st_new.eq(
            Mux(c_st == Chan.WAIT, Mux(k.ld.bad_now, Chan.DRAIN, Chan.RUN),
                Mux((c_st == Chan.RUN) & last_now, Chan.DRAIN, Chan.WAIT)))

    def _act(self, m, ch, k):
        """ACT: do what CALC decided.  The read's and the entry's fields are written whenever
        ACT does the action (they depend on the action and the channel's registers only);
        whether the read is issued and the entry enters the queue (``when``) is the only part
        that waits for the room checks.  Fields a kind does not use are left as they were: the
        writer does not look at them (and the issue's credits change only in ACT, so the
        credits CALC takes off for an unbooked issue are still that issue's)."""
        sel, d, pq = k.sel, self.issue, self.o_entry.payload
        c_src, c_dst = ch.cur_src[sel], ch.cur_dst[sel]
        go_read, go_fetch = k.go_read, k.go_fetch

        def push(kind, when, **fields):
            """Decide a queue entry of channel ``sel`` (it enters the queue next cycle, if
            ``when``; a read's entry when the read is issued: ``_issue``)."""
            fields.setdefault("desc", ch.cur_addr[sel])
            m.d.sync += [pq.kind.eq(kind), pq.chan.eq(sel)]
            for name, v in fields.items():
                m.d.sync += getattr(pq, name).eq(v)
            if when is not None:
                with m.If(when):
                    m.d.sync += ch.pq_en.eq(1)

        def issue_read(raddr, nbytes_, rows, kind, credits, slot=0, **extra):
            """Decide a read (booked next cycle, if ``_issue`` issues it) and its queue
            entry."""
            hdrs, dats = credits
            m.d.sync += [d.raddr.eq(raddr), d.nbytes.eq(nbytes_), d.slot.eq(slot),
                         d.fetch.eq(kind == Kind.FETCH), d.chan.eq(sel), d.rows.eq(rows),
                         d.hdr.eq(hdrs), d.dat.eq(dats)]
            push(kind, None, rows=rows, src_lo=raddr[:2], nbytes=nbytes_[:10], chdr=hdrs,
                 cdat=dats, **extra)

        with m.If(k.do[Act.LOAD]):
            load(m, ch, sel, k.ld, push, k.qroom)
            # A descriptor that is one read: the load issues it too (``_close`` then closes
            # the descriptor, as a DATA action's last read does).
            with m.If(k.ld_one):
                issue_read(**load_read(k))
        with m.If(k.do[Act.PF]):
            # Announced descriptors into the ring, from its next free slot.
            # (the announced descriptors up to the next min(MRRS, 512)-byte boundary, so no
            # fetch exceeds MRRS or crosses 4 KiB; planned in peach2.dma.fetch).
            fptr = ch.fptr[sel]
            issue_read(fptr, ch.fp_bytes[sel], 0, Kind.FETCH, credits=FETCH_CREDITS,
                       slot=Cat(ch.wpos[sel], ch.fbig[sel]), desc=fptr)
            fetch_act(m, ch, sel, go_fetch)
        with m.If(k.do[Act.DATA]):
            issue_read(c_src, k.chunk, k.rows, Kind.DATA, credits=(k.hdr, k.dat), addr=c_dst)
            with m.If(go_read):
                m.d.sync += [
                    ch.cur_src[sel].eq(c_src + k.src_step),
                    ch.cur_dst[sel].eq(c_dst + k.dst_step),
                    ch.brem_m1[sel].eq(Mux(k.end, k.len_m1, k.brem_next)),
                    ch.bbig[sel].eq(Mux(k.end, k.bbig, k.brem_next[12:].any())),
                    ch.bleft[sel].eq(ch.bleft[sel] - k.end),
                ]

    def _issue(self, m, ch, k):
        """ACT's read (a fetch or a data read) is issued, and its entry pushed, when its room
        check passes: decided outside the state machine (``do`` is held for ACT only), so the
        planner's state is not decoded behind the room check."""
        go = Signal(name="issue_go")
        m.d.comb += go.eq(k.do[Act.DATA] & k.go_read | k.do[Act.PF] & k.go_fetch
                          | k.do[Act.LOAD] & k.go_load)
        with m.If(go):
            m.d.sync += [self.issue.en.eq(1), ch.pq_en.eq(1)]

    def _close(self, m, ch, k):
        """ACT's changes of a channel's state (to CALC's ``st_new``): a load's (``st_en``),
        and a close's: the read that ends the descriptor's last burst closes it when ACT
        issues it (with room for both entries: ``q_room``), and also moves the register-mode
        slot and pushes the mark next cycle.  Decided per channel, from CALC's one-hot
        ``reading`` for the close (held for ACT only: outside the state machine), so neither
        the planner's state nor the channel multiplexer is on the way from the room check to
        the channel's registers; and as nets of their own (``keep``), the room check last:
        the mapping otherwise spreads it over the state's other writers (two levels more).
        After the other writes of the state (control, drain, abort), so it wins."""
        for c, reading in enumerate(k.reading):
            ends = Signal(name=f"ch{c}_ends", attrs={"keep": 1})
            closes = Signal(name=f"ch{c}_closes", attrs={"keep": 1})
            m.d.comb += [ends.eq(reading & k.end & k.bl_one), closes.eq(ends & k.go_read)]
            # A load changes the state (``st_en``, one-hot); one that also issues the
            # descriptor's only read closes it: the channel waits for the next descriptor, or
            # drains after the chain's last; unless the read waits for the skid, then it runs
            # as any load does.  The close's write comes last (the two never meet: a load is
            # not a read), so the room check is the last multiplexer before the register.
            load_closes = Signal(name=f"ch{c}_load_closes", attrs={"keep": 1})
            m.d.comb += load_closes.eq(k.loading[c] & k.do[Act.LOAD] & ~self.room.rd_busy)
            with m.If(k.st_en_c[c]):
                m.d.sync += ch.st[c].eq(Mux(load_closes, Mux(k.ld.end, Chan.DRAIN, Chan.WAIT),
                                            k.st_new))
            with m.If(closes):
                m.d.sync += ch.st[c].eq(k.st_new)
            with m.If(closes | load_closes):
                m.d.sync += k.mark_en.eq(1)
            with m.If(closes):
                m.d.sync += ch.slot[c].eq(ch.slot[c] + 1)
            # (a queue's load the cycle after looks at ``has_after``, not ``has_slot``)
            m.d.sync += ch.closed_d[c].eq(closes)
        # The mark's channel: ACT's (``mark_chan`` is looked at only when ``mark_en``).
        m.d.sync += k.mark_chan.eq(k.sel)

    def _mark(self, m, ch, k):
        """The closed descriptor's mark enters the queue a cycle after its last read's entry
        (decided in the cycle after ACT, a CALC or SEL, where no action pushes; the channel's
        ``cur`` changes at its next ACT at the earliest)."""
        pq, mc = self.o_entry.payload, k.mark_chan
        c_cur = ch.cur[mc]
        ctl = c_cur.control
        with m.If(k.mark_en):
            m.d.sync += [pq.kind.eq(Kind.MARK), pq.chan.eq(mc), pq.desc.eq(ch.cur_addr[mc]),
                         pq.addr.eq(c_cur.seq_addr), pq.value.eq(c_cur.seq_value),
                         pq.seq.eq(bits(ctl, "seq")), pq.irq.eq(bits(ctl, "irq")),
                         ch.pq_en.eq(1)]
