"""The DMA's writer: the in-order queue turned into memory writes, completion writes, counters.

Only the writer decides, in queue order, what a descriptor's end does (002 section 3.4: the
completion write, the MSI and the counters come after the descriptor's data), so a fault found
later never takes back a descriptor already counted done.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..params import N_DMA_CHANNELS, DmaError
from ..router.common import RouteEntry
from ..router.table import route_first, route_matches, route_select
from ..tlp.layouts import TLPHeader
from ..tlp.stream import TLPStream
from ..util import not_below
from .common import Item, Kind, ceil_log2, end_mask, entry_layout, mem_header, select
from .fifo import BypassFIFO

__all__ = ["Writer", "ReportSignature", "fail_layout", "count_layout", "release_layout",
           "retire_layout"]

#: A channel stopped with an error code, blaming a descriptor.
fail_layout = data.StructLayout({"en": 1, "chan": 2, "code": 4, "desc": 64})
#: An entry left the output register: bytes, a descriptor done, an MSI to raise.
count_layout = data.StructLayout({"en": 1, "chan": 2, "nbytes": 10, "mark": 1, "irq": 1})
#: A queue entry retired (its channel's ``pending`` count falls).
retire_layout = data.StructLayout({"en": 1, "chan": 2})


class ReportSignature(wiring.Signature):
    """What the writer reports to the planner, which owns the channel registers (from the
    writer's side).

    Members
    -------
    fail : Out(fail_layout)
        Stage A1 stops a channel: a failed or timed-out read, or a FAULT entry.
    fail_route : Out(fail_layout)
        Stage A' stops a channel: a write with no route (the channel becomes ``unroutable``).
    count : Out(count_layout)
        An entry left the output register (the channel's counters and MSI).
    retire : Out(retire_layout)
        Registered: a queue entry retired.
    """

    def __init__(self):
        super().__init__({
            "fail":       Out(fail_layout),
            "fail_route": Out(fail_layout),
            "count":      Out(count_layout),
            "retire":     Out(retire_layout),
        })


def release_layout(row_bits):
    """A read's tag, buffer rows and completion credits given back."""
    return data.StructLayout({"en": 1, "rows": row_bits + 1, "hdr": 5, "dat": 7})


def item_layout(row_bits):
    """An item of the split: one memory write, completion write or no-op."""
    return data.StructLayout({
        "kind": Item, "chan": 2, "addr": 64, "nbytes": 10, "row": row_bits, "u": 4,
        "value": 32, "release": 1, "rel_rows": row_bits + 1, "retire": 1, "mark": 1, "irq": 1,
        "desc": 64, "rel_hdr": 5, "rel_dat": 7,
    })


class Writer(wiring.Component):
    """Pops the in-order queue and sends what each entry asks for.

    Stage A0: the head entry waits (through a skid register, so the queue is read whenever it
    is empty) until its descriptor fetch's data is in, failed or timed out; every other entry
    goes on at once.  Stage A1 splits it from registers only: a data read becomes memory
    writes, split at the max payload size on destination boundaries, each sent once the
    completions that carry its bytes are in the buffer (so a read's first write does not wait
    for its last completion), or reports its read's failure or timeout and frees its tag (the
    writes sent before stay sent); a descriptor fetch only frees its tag (or reports its
    fault, in queue order); a mark becomes the completion write or a no-op carrying the
    counters.  Stage A' looks the writes up in the route table (the N-bound address translated
    by the node offset) and builds their headers.  Stage B reads the buffer rows, stage C shifts
    the bytes from source to destination alignment, and an output register hands the beats to
    the crossbar.  A read's tag and rows are freed when its last write has read them.

    Parameters
    ----------
    n_tags, rows, n_routes : int
        As :class:`~peach2.dma.engine.DMA`'s (``rows`` = buffer bytes / 16).

    Members
    -------
    i_entry : In(stream.Signature(entry_layout))
        The in-order queue's read side (``ready`` does not wait for ``valid``).
    done, bad : In(n_tags) ; err : In(ArrayLayout(4, n_tags)) ; landed : In(ArrayLayout(8, n_tags))
        The receiver's per-tag state (:class:`~peach2.dma.receiver.Receiver`).
    rd_row0, rd_row1 : Out(log2 rows) ; rd_data0, rd_data1 : In(128)
        The buffer's two read ports (four banks each), read every cycle, data a cycle later.
    mps : In(10)
        The max payload size in bytes.
    abort, unroutable : In(4)
        Per channel: stopped; a write of it found no route (its later items become no-ops).
    dma_timeout : In(32) ; routes ; route_down ; node_offset : In(64) ; requester_id : In(16)
        The DMA's ports of the same names.
    o_wr : Out(TLPStream()) ; o_wr_dest : Out(6)
        As the DMA's.
    report : Out(ReportSignature)
        Faults, counters and retired entries, to the planner.
    release : Out(release_layout)
        Registered: a read's tag, rows and credits come back.
    """

    ITEMS_DEPTH = 4
    OUT_DEPTH = 16

    def __init__(self, *, n_tags, rows, n_routes):
        self.n_tags, self.rows, self.n_routes = n_tags, rows, n_routes
        tb, rb = ceil_log2(n_tags), ceil_log2(rows)
        super().__init__({
            "i_entry":      In(stream.Signature(entry_layout(tb, rb))),
            "done":         In(n_tags),
            "bad":          In(n_tags),
            "err":          In(data.ArrayLayout(4, n_tags)),
            "landed":       In(data.ArrayLayout(8, n_tags)),
            "rd_row0":      Out(rb),
            "rd_row1":      Out(rb),
            "rd_data0":     In(128),
            "rd_data1":     In(128),
            "mps":          In(10),
            "abort":        In(N_DMA_CHANNELS),
            "unroutable":   In(N_DMA_CHANNELS),
            "dma_timeout":  In(32),
            "routes":       In(data.ArrayLayout(RouteEntry, n_routes)),
            "route_down":   In(n_routes),
            "node_offset":  In(64),
            "requester_id": In(16),
            "o_wr":         Out(TLPStream()),
            "o_wr_dest":    Out(6),
            "report":       Out(ReportSignature()),
            "release":      Out(release_layout(rb)),
        })

    def elaborate(self, platform):
        m = Module()
        rb = ceil_log2(self.rows)
        item = item_layout(rb)
        # (A plain queue here: A1's item is chosen by its decision, and a BypassFIFO's
        # multiplexer behind it made 7 LUT levels.)
        m.submodules.items = items = SyncFIFOBuffered(width=item.size, depth=self.ITEMS_DEPTH)
        self._split(m, items, item)
        Item2 = data.StructLayout({"it": item, "hdr": TLPHeader, "dest": 6, "nbm1": 8,
                                   "single": 1})
        m.submodules.items2 = items2 = BypassFIFO(width=Item2.size, depth=4)
        self._route(m, items, items2, item, Item2)
        self._send(m, items2, Item2)
        return m

    def _split(self, m, items, Item_):
        """Stages A0 and A1: the queue's entries into items."""
        entry = entry_layout(ceil_log2(self.n_tags), ceil_log2(self.rows))
        queue = self.i_entry
        q_r = queue.payload
        mps, abort = self.mps, self.abort
        it_w = data.View(Item_, items.w_data)
        m.d.comb += items.w_en.eq(0)

        # Stage A0: wait, in queue order, for each descriptor fetch's data.  The head entry (h)
        # is copied from the queue; between the queue and h sits a skid register (n), so the
        # queue is read whenever n is empty (a register: the decision never reaches the queue's
        # own counters) and an entry read while h waits stays in n.  The tag's done bit and
        # error are looked up one cycle ahead for the queue's output, for n and for h, and the
        # one for h's source is used, so they lag the receiver by one cycle (done bits only rise
        # while a tag is outstanding).  A fetch leaves A0 once its data is in, or failed, or timed out
        # (then marked failed with its code); every other entry leaves at once (a data read
        # waits in A1, piece by piece).
        h = Signal(entry)
        h_valid = Signal()
        h_load = Signal()
        n = Signal(entry)
        n_valid = Signal()
        from_q = Signal()                   # h was loaded from the queue's output last cycle
        from_n = Signal()                   # h was loaded from n last cycle
        terr = [self.err[t] for t in range(self.n_tags)]
        looked = {}
        for src, ent in (("q", q_r), ("n", n), ("h", h)):
            d_done, d_bad, d_err = Signal(name=f"d{src}_done"), Signal(name=f"d{src}_bad"), \
                Signal(4, name=f"d{src}_err")
            m.d.sync += [d_done.eq(select(self.done, ent.tag)), d_err.eq(select(terr, ent.tag)),
                         d_bad.eq(select(self.bad, ent.tag))]
            looked[src] = (d_done, d_bad, d_err)

        def looked_up(i):
            return Mux(from_q, looked["q"][i], Mux(from_n, looked["n"][i], looked["h"][i]))
        h_done, h_bad, h_err = (looked_up(i) for i in range(3))
        h_rd = (h.kind == Kind.DATA) | (h.kind == Kind.FETCH)
        h_fetch = h.kind == Kind.FETCH
        wait = Signal(32)
        tmo_hit = Signal()
        tmo = self.dma_timeout
        m.d.sync += tmo_hit.eq((tmo != 0) & (wait >= tmo))

        # Stage A1: split the entry (s) into items, from registers only: what the split needs
        # (the destination of the next piece, the bytes left, whether the next piece is the
        # last) is worked out as s is loaded.
        s_ = Signal(entry, name="s")
        s_valid = Signal()
        s_failed = Signal()                 # a read that failed (its code in s.code)
        # A data read's pieces wait for their data: ``need`` is the DWs of the read (from its
        # first DW) the next piece takes, ``s_ok`` says a cycle late that that many have
        # landed (0 in the cycle after a piece or a load: ``need`` or the entry changed),
        # ``s_full`` that all of them have.  The tag's state is looked up a cycle ahead for s
        # (``s_fresh``: s was loaded last cycle, the lookup is not yet its own).
        s_data = Signal()                   # a data read not failed when loaded
        # What A1's consume decision reads, registers worked out a cycle ahead (so the
        # decision, and A0's behind it, stay shallow): ``s_whole`` the entry goes as one item
        # (not a data read, or one failed when loaded); ``s_avail`` a piece's data is in
        # (s_data & (s_full | s_ok)).
        s_whole, s_avail = Signal(name="s_whole"), Signal(name="s_avail")
        s_full, s_ok, s_fresh = (Signal(name=n) for n in ("s_full", "s_ok", "s_fresh"))
        need, end_dw = Signal(9, name="need"), Signal(9, name="end_dw")
        ds_landed, ds_done, ds_bad, ds_err = (Signal(w, name=n) for w, n in (
            (8, "ds_landed"), (1, "ds_done"), (1, "ds_bad"), (4, "ds_err")))
        m.d.sync += [ds_landed.eq(select([self.landed[t] for t in range(self.n_tags)], s_.tag)),
                     ds_done.eq(select(self.done, s_.tag)), ds_bad.eq(select(self.bad, s_.tag)),
                     ds_err.eq(select(terr, s_.tag))]
        a = Signal(64)                      # destination of the next piece
        left = Signal(10)                   # bytes of the entry not yet emitted
        s_last = Signal()                   # the next piece is the last: left <= cap
        cap = Signal(10)                    # the next piece at most: to the MPS boundary
        cap2 = Signal(11)                   # cap + mps
        # Buffer byte (in the ring of rows) of the DW start of the next piece's first payload
        # byte: the read's rows start at ``base`` with its first byte at ``src_lo``; a piece
        # whose destination is less aligned than its source starts up to 3 bytes before.
        # After the first piece the destination is MPS-aligned, so it moves by ``step``.
        pos = Signal(ceil_log2(self.rows) + 4)
        step = Signal(10)
        piece = Signal(10)
        m.d.comb += piece.eq(Mux(s_last, left, cap))
        e = s_
        e_abort = abort.bit_select(e.chan, 1)
        # Room in the items FIFO, registered: at most depth - 2 entries a cycle ago leaves room
        # for one now.
        items_room = Signal()
        m.d.sync += items_room.eq(items.level <= self.ITEMS_DEPTH - 2)
        go = s_valid & items_room
        # A data read fails in A1 when its tag fails (a completion faulty) or it waits for
        # data past the timeout; the pieces sent before stay sent.
        s_drop = Signal(name="s_drop", attrs={"keep": 1})
        m.d.comb += s_drop.eq(s_data & ~s_full & ((~s_fresh & ds_bad) | tmo_hit))
        s_fail = s_failed | s_drop
        s_piece = s_avail
        # A good read's pieces go one by one (as no-ops if its channel has stopped meanwhile,
        # so the stop does not reach this decision); every other entry is one item.
        s_consume = go & (s_whole | s_drop | (s_piece & s_last))
        s_load = Signal(attrs={"keep": 1})
        a0_consume = Signal(attrs={"keep": 1})
        m.d.comb += [s_load.eq(~s_valid | s_consume),
                     a0_consume.eq(h_valid & s_load & (~h_fetch | h_done | tmo_hit))]
        m.d.comb += h_load.eq(~h_valid | a0_consume)
        # One timer: A0 times a fetch at the head while A1 is free, A1 a data read waiting
        # for a piece's data (so never both at once).
        with m.If((h_valid & h_fetch & ~h_done & ~tmo_hit & s_load)
                  | (s_valid & s_data & ~s_full & ~s_ok & ~s_drop)):
            m.d.sync += wait.eq(wait + 1)
        with m.If(a0_consume):
            m.d.sync += [wait.eq(0), tmo_hit.eq(0)]

        # The kind of the item emitted this cycle (if any), decided in one place, as a net of
        # its own: a data read's piece is a memory write unless the read failed or its channel
        # stopped; a mark is a completion write if it asks for one and its channel runs;
        # everything else a no-op.
        kind_w = Signal(Item, name="a1_kind", attrs={"keep": 1})
        m.d.comb += kind_w.eq(
            Mux((e.kind == Kind.DATA) & ~s_failed & ~s_drop & ~e_abort, Item.WRITE,
                Mux((e.kind == Kind.MARK) & e.seq & ~e_abort, Item.SEQ, Item.NOP)))

        def emit(**fields):
            m.d.comb += [items.w_en.eq(1), it_w.kind.eq(kind_w), it_w.chan.eq(e.chan),
                         it_w.desc.eq(e.desc), it_w.rel_hdr.eq(e.chdr), it_w.rel_dat.eq(e.cdat)]
            for k, v in fields.items():
                m.d.comb += getattr(it_w, k).eq(v)

        def fail():
            f = self.report.fail
            code = Mux(s_drop, Mux(~s_fresh & ds_bad, ds_err, DmaError.CPL_TIMEOUT), e.code)
            m.d.comb += [f.en.eq(1), f.chan.eq(e.chan), f.code.eq(code), f.desc.eq(e.desc)]

        with m.If(go):
            with m.Switch(e.kind):
                with m.Case(Kind.DATA, Kind.FETCH):
                    # Even a failed channel waited for its reads (or their timeout) before it
                    # frees their tags, so a late completion cannot land in reused rows.
                    with m.If(s_fail):
                        fail()
                        emit(release=1, rel_rows=e.rows, retire=1)
                    with m.Elif(e.kind == Kind.FETCH):
                        # The receiver already filled the prefetch buffer: free the tag.
                        emit(release=1, rel_rows=e.rows, retire=1)
                    with m.Elif(s_piece):
                        emit(addr=a, nbytes=piece,
                             row=pos[4:], u=pos[:4], release=s_last, rel_rows=e.rows,
                             retire=s_last)
                        # After the first piece the destination is MPS-aligned.
                        next_last = not_below(cap2, left)
                        m.d.sync += [a.eq(a + piece), left.eq(left - piece),
                                     pos.eq(pos + step), step.eq(mps), cap.eq(mps),
                                     cap2.eq(mps << 1), s_last.eq(next_last),
                                     need.eq(Mux(next_last, end_dw, need + (mps >> 2)))]
                with m.Case(Kind.FAULT):
                    fail()
                    emit(retire=1)
                with m.Default():       # MARK
                    # Decided here, in queue order: a fault reported later (behind this mark)
                    # does not take this descriptor back (a completion write, ``kind_w``, if it
                    # asks for one).
                    emit(addr=e.addr, nbytes=4, value=e.value,
                         retire=1, mark=~e_abort, irq=e.irq)

        # What the split needs of h, as nets of their own (the load below only picks them).
        off = h.addr[:10] & (mps - 1)
        s_first_last = Signal(attrs={"keep": 1})
        m.d.comb += s_first_last.eq(not_below(mps - off, h.nbytes))
        h_data = h.kind == Kind.DATA
        # ``s_ok`` a cycle late: not in the cycle after a load or a piece (``need`` changed).
        ok_next = ~s_load & ~s_fresh & ~(go & s_piece) & (ds_landed >= need)
        full_now = ~s_fresh & ds_done & ~ds_bad
        full_next = s_full | full_now               # (unless s loads)
        m.d.sync += [s_fresh.eq(s_load), s_ok.eq(ok_next),
                     s_avail.eq(s_data & (full_next | ok_next))]
        with m.If(full_now):
            m.d.sync += s_full.eq(1)
        # The first piece's ``need`` and the read's last DW, worked out from s in the cycle
        # after the load (``s_ok`` is 0 then; a piece sent in that cycle had all its data in,
        # ``s_full``, and its entry never looks at ``need`` again): (src_lo + bytes + 3) / 4,
        # with src_lo + 3 looked up, so each is one two-input add.
        lo3 = select([Const(v + 3, 3) for v in range(4)], e.src_lo)
        with m.If(s_fresh):
            m.d.sync += [need.eq((Mux(s_last, e.nbytes, cap) + lo3) >> 2),
                         end_dw.eq((e.nbytes + lo3) >> 2)]
        with m.If(s_load):
            m.d.sync += [
                s_valid.eq(a0_consume), s_.eq(h),
                s_failed.eq(Mux(h_fetch, ~h_done | h_bad, h_data & h_done & h_bad)),
                s_data.eq(h_data & ~(h_done & h_bad)),
                s_full.eq(h_done & ~h_bad),
                s_whole.eq(~h_data | (h_done & h_bad)),
                s_avail.eq(h_data & h_done & ~h_bad),
                a.eq(h.addr), left.eq(h.nbytes),
                s_last.eq(s_first_last),
                cap.eq(mps - off), cap2.eq((mps << 1) - off),
                pos.eq(Cat(h.src_lo, Const(0, 2), h.base) - h.addr[:2]),
                step.eq(mps - Cat(Const(0, 2), off[2:])),
            ]
            with m.If(h_rd):
                m.d.sync += s_.code.eq(Mux(h_done, h_err, DmaError.CPL_TIMEOUT))

        m.d.comb += queue.ready.eq(~n_valid)
        m.d.sync += [from_q.eq(0), from_n.eq(0)]
        with m.If(h_load):
            with m.If(n_valid):
                m.d.sync += [h.eq(n), h_valid.eq(1), n_valid.eq(0), from_n.eq(1)]
            with m.Else():
                m.d.sync += [h.eq(q_r), h_valid.eq(queue.valid), from_q.eq(1)]
        with m.Elif(~n_valid & queue.valid):
            m.d.sync += [n.eq(q_r), n_valid.eq(1)]

    def _route(self, m, items, items2, Item_, Item2):
        """Stage A': route lookup and the translated address (registered), then the header."""
        i0 = data.View(Item_, items.r_data)
        p_valid = Signal()
        i1 = Signal(Item_)
        p_hit = Signal()
        p_port = Signal(2)
        p_down = Signal()
        # The write's header both ways (to N: after the node offset subtraction), so the route's
        # port only picks one.
        p_hdr = Signal(TLPHeader)
        p_hdr_n = Signal(TLPHeader)
        p_nbm1 = Signal(8)
        p_take = ~p_valid | items2.w_rdy
        # In two steps: the route table's compares (and the N-bound address) registered, then
        # the first match's port (the ingress does the same, rtl/router/ingress.py).
        q_valid = Signal()
        i_q = Signal(Item_)
        q_match = Signal(self.n_routes)
        q_tr = Signal(64)
        q_take = ~q_valid | p_take
        m.d.comb += items.r_en.eq(q_take)
        with m.If(q_take):
            m.d.sync += [
                q_valid.eq(items.r_rdy), i_q.eq(i0),
                q_match.eq(Cat(*route_matches(m, i0.addr, self.routes))),
                q_tr.eq(Cat(i0.addr[:2],
                            (Cat(Const(0, 2), i0.addr[2:]) - self.node_offset)[2:64])),
            ]
        hit0, port0 = route_select(m, list(q_match), self.routes)
        # The first match's port is dropping (link down): chosen like its port, in parallel.
        down0 = route_first(m, q_match, self.route_down, "down0")
        with m.If(p_take):
            m.d.sync += [
                p_valid.eq(q_valid), i1.eq(i_q), p_hit.eq(hit0), p_port.eq(port0.as_value()),
                p_down.eq(down0),
                p_hdr.eq(mem_header(i_q.addr, i_q.nbytes, Const(0, 8), self.requester_id,
                                    write=True)),
                p_hdr_n.eq(mem_header(q_tr, i_q.nbytes, Const(0, 8), self.requester_id,
                                      write=True)),
                # Beats of the item, minus one: a write's payload DWs (from its address and
                # length), 1 otherwise.
                p_nbm1.eq(Mux(i_q.kind == Item.WRITE,
                              ((Cat(i_q.addr[:2], Const(0, 8)) + i_q.nbytes + 3)[2:] - 1) >> 2,
                              0)),
            ]
        i2w = data.View(Item2, items2.w_data)
        hit = p_hit
        port = p_port
        to_n = port == 0
        is_write = (i1.kind == Item.WRITE) | (i1.kind == Item.SEQ)
        # The N-bound header carries the translated address (translate_header's result).
        m.d.comb += [
            i2w.it.eq(i1),
            i2w.hdr.eq(Mux(to_n, p_hdr_n, p_hdr)),
            i2w.dest.eq(1 << port),
            i2w.nbm1.eq(p_nbm1), i2w.single.eq(p_nbm1 == 0),
            items2.w_en.eq(p_valid & items2.w_rdy),
        ]
        # Stage A decided every item in queue order; only what this stage finds itself (an
        # unroutable write, or one routed through a port whose link is down) stops the channel
        # here, and every later item of that channel becomes a no-op (and no descriptor is
        # counted done any more).
        dropping = self.unroutable.bit_select(i1.chan, 1)
        bad = ~hit | p_down
        with m.If(p_valid & items2.w_rdy):
            with m.If(is_write & bad & ~dropping):
                f = self.report.fail_route
                m.d.comb += [f.en.eq(1), f.chan.eq(i1.chan),
                             f.code.eq(Mux(hit, DmaError.DST_LINK_DOWN, DmaError.DST_UNROUTABLE)),
                             f.desc.eq(i1.desc)]
            with m.If(is_write & (bad | dropping)):
                m.d.comb += i2w.it.kind.eq(Item.NOP)
            with m.If((is_write & bad) | dropping):
                m.d.comb += i2w.it.mark.eq(0)

    def _send(self, m, items2, Item2):
        """Stages B and C and the output register: beats to the crossbar."""
        RB = ceil_log2(self.rows)
        # Output FIFO entries carry the beat and the counter flags.
        Out_ = data.StructLayout({
            "data": 128, "dw_en": 4, "hdr": TLPHeader, "first": 1, "last": 1, "dest": 6,
            "nop": 1, "chan": 2, "nbytes": 10, "retire": 1, "mark": 1, "irq": 1,
        })
        OUT_DEPTH = self.OUT_DEPTH
        # (A plain queue here: the output register's read of it waits for the crossbar's
        # ready, and a BypassFIFO's read behind that made 7 LUT levels across the core.)
        m.submodules.ofifo = ofifo = SyncFIFOBuffered(width=Out_.size, depth=OUT_DEPTH)
        ow = data.View(Out_, ofifo.w_data)
        b = data.View(Item2, items2.r_data)
        bi = b.it
        beat = Signal(8)
        # Whether this is the item's last beat, from registers and the item's own flag: a new
        # item starts with its ``single`` flag, later beats with a compare made a beat ahead.
        b_first = Signal(init=1)
        b_next_last = Signal()
        b_last = Mux(b_first, b.single, b_next_last)
        c1 = Signal()                       # a command is in the memory read stage
        # Room in the output FIFO for one more beat, registered: the level a cycle ago plus the
        # beats then on their way bounds the level now.
        credit = Signal()
        go = items2.r_rdy & credit
        m.d.sync += credit.eq(ofifo.level + c1 + go < OUT_DEPTH - 1)
        m.d.comb += items2.r_en.eq(go & b_last)
        with m.If(go):
            m.d.sync += [beat.eq(Mux(b_last, 0, beat + 1)), b_first.eq(b_last),
                         b_next_last.eq(beat + 1 == b.nbm1)]
        # Released a cycle after the last beat's command (registered: the bookkeeping's
        # counters then add only registers).
        rel = self.release
        m.d.sync += [rel.en.eq(go & b_last & bi.release), rel.rows.eq(bi.rel_rows),
                     rel.hdr.eq(bi.rel_hdr), rel.dat.eq(bi.rel_dat)]

        row = (bi.row + beat)[:RB]
        m.d.comb += [self.rd_row0.eq(row), self.rd_row1.eq(row + 1)]
        # Stage C: memory data, byte shift, into the output FIFO.
        cmd = Signal(Item2)
        cmd_first = Signal()
        cmd_last = Signal()
        # What stage C needs of the item besides the data, worked out in stage B (so stage C
        # is the byte shift and one multiplexer): a completion write, a no-op, the beat's DW
        # enables (a write's from its length and the beat, one DW for a completion write).
        cmd_seq, cmd_nop, cmd_dw_en = Signal(), Signal(), Signal(4)
        b_dws = b.hdr.common.length
        rem_dws = b_dws - Cat(Const(0, 2), beat)
        b_dw_en = Mux(rem_dws >= 4, 0xF, end_mask(rem_dws[:2]))
        m.d.sync += [c1.eq(go), cmd.eq(b), cmd_first.eq(b_first),
                     cmd_last.eq(b_last), cmd_seq.eq(bi.kind == Item.SEQ),
                     cmd_nop.eq(bi.kind == Item.NOP),
                     cmd_dw_en.eq(Mux(bi.kind == Item.SEQ, 1,
                                      Mux(bi.kind == Item.WRITE, b_dw_en, 0)))]
        # The byte shift from source to destination alignment in two steps of four ways (bytes
        # within a DW, then DWs), as nets of their own: one LUT level each.
        both = Cat(self.rd_data0, self.rd_data1)
        u = cmd.it.u
        by_bytes = Signal(256 - 24, attrs={"keep": 1})
        shifted = Signal(128, attrs={"keep": 1})
        m.d.comb += [by_bytes.eq(both.bit_select(u[:2] * 8, 256 - 24)),
                     shifted.eq(by_bytes.bit_select(u[2:] * 32, 128))]
        ci = cmd.it
        m.d.comb += [
            ow.data.eq(Mux(cmd_seq, ci.value, shifted)),
            ow.dw_en.eq(cmd_dw_en),
            ow.hdr.eq(cmd.hdr),
            ow.first.eq(cmd_first),
            ow.last.eq(cmd_last),
            ow.dest.eq(cmd.dest),
            ow.nop.eq(cmd_nop),
            ow.chan.eq(ci.chan),
            ow.nbytes.eq(Mux(cmd_last & (ci.kind == Item.WRITE), ci.nbytes, 0)),
            ow.retire.eq(cmd_last & ci.retire),
            ow.mark.eq(cmd_last & ci.mark),
            ow.irq.eq(ci.irq),
            ofifo.w_en.eq(c1),
        ]

        # Output register: beats to the crossbar with ``valid`` straight from a register (the
        # crossbar's arbitration starts from it); a no-op spends a cycle here too and leaves
        # unconditionally.  Counters are booked when an entry leaves, so a descriptor counts
        # done only once its last write is in the crossbar.
        r = data.View(Out_, ofifo.r_data)
        x = Signal(Out_)
        x_full = Signal()
        x_send = Signal()                   # x holds a beat to send
        o = self.o_wr
        leave = x_full & (~x_send | o.ready)
        pop = ofifo.r_rdy & (~x_full | leave)
        m.d.comb += [
            o.valid.eq(x_send),
            o.p.data.eq(x.data), o.p.dw_en.eq(x.dw_en), o.p.hdr.eq(x.hdr),
            o.p.first.eq(x.first), o.p.last.eq(x.last), o.p.err.eq(0), o.p.bar.eq(0),
            self.o_wr_dest.eq(x.dest),
            ofifo.r_en.eq(pop),
        ]
        with m.If(pop):
            m.d.sync += [x.eq(r), x_full.eq(1), x_send.eq(~r.nop)]
        with m.Elif(leave):
            m.d.sync += [x_full.eq(0), x_send.eq(0)]
        # Retired a cycle later (registered, off the crossbar's ready).
        ret, cnt = self.report.retire, self.report.count
        m.d.sync += [ret.en.eq(leave & x.retire), ret.chan.eq(x.chan)]
        m.d.comb += [cnt.en.eq(leave), cnt.chan.eq(x.chan), cnt.nbytes.eq(x.nbytes),
                     cnt.mark.eq(x.mark), cnt.irq.eq(x.irq)]
