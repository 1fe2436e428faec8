"""Harness: the DMA's :class:`~peach2.dma.planner.Planner` and
:class:`~peach2.dma.booking.Booking` together (tags never reused while outstanding, reads only
with the completion credits they need, counters that never wrap)."""

from amaranth.hdl import Assume, Cat, Const, Mux, Signal, Value
from amaranth.lib import wiring

from peach2.dma.booking import Booking
from peach2.dma.planner import FETCH_CREDITS, Planner
from peach2.params import N_DMA_CHANNELS

from ..harness import Harness

__all__ = ["DmaHarness"]

#: The planner's state machine's encoding (states in the order ``Planner`` defines them).
CALC, ACT = 1, 2


class DmaHarness(Harness):
    """The real planner and booking of the DMA as ``DMA`` wires them, ``n_tags`` tags and
    ``rows`` buffer rows, every other input of the planner free in every cycle (descriptor
    slots and rings, control strobes, the writer's reports, the queue level), ``ext_tags``,
    ``mrrs_m1``, ``min_mask`` and ``cpl_space`` constant (configuration: ``DMA_CONFIG`` changes
    only while every channel is idle, the hard IP's buffer never), and the writer modelled by
    what it guarantees: it gives back the oldest outstanding read's tag, rows and credits,
    exactly those booked (``release``), at any time.

    The harness keeps, per tag, whether a read holds it and that read's credits and rows (its
    reference of the outstanding reads).  ``mutant="blind_tag"`` shows the planner one read
    fewer outstanding than the booking counts (a tag count off by one, the shape of LitePCIe's
    tag reuse): ``tags`` then fails.
    """

    PROPERTIES = {
        "tags":    "a read is booked only with a tag no outstanding read holds, and fewer "
                   "reads outstanding than the tag limit (32 without extended tags): the "
                   "tag on the wire is never reused while outstanding (LitePCIe issue 178)",
        "credits": "a read is booked only when the completions of every outstanding read, "
                   "counted at their worst split, and its own fit the hard IP's completion "
                   "buffer (cpl_space headers and data credits, unless 0 = no limit)",
        "wrap":    "the booking's counters never wrap: outstanding reads <= n_tags, free rows "
                   "<= rows, credits in use equal those of the outstanding reads plus the "
                   "ones being given back",
    }

    def __init__(self, prop, *, mutant=None, n_tags=4, rows=64):
        super().__init__(prop, mutant=mutant)
        self.n_tags, self.rows = n_tags, rows

    def build(self, m, platform):
        NT, ROWS = self.n_tags, self.rows
        TB = (NT - 1).bit_length()
        bk = self.add_block(m, "booking", Booking(n_tags=NT, rows=ROWS), platform)
        pl = self.add_block(m, "planner", Planner(n_tags=NT, rows=ROWS), platform)
        for name in ("free_less", "room_hdr", "room_dat", "hdr_free", "dat_free", "rd_busy"):
            m.d.comb += getattr(pl.room, name).eq(getattr(bk.room, name))
        m.d.comb += pl.room.outstanding.eq(bk.room.outstanding)
        ext_tags = self.constant(m, 1, "ext_tags")
        if self.mutant == "blind_tag":      # the planner sees one read fewer outstanding
            seen = Mux(bk.room.outstanding == 0, 0, bk.room.outstanding - 1)
            blind = Mux(ext_tags, NT, min(NT, 32))
            m.d.comb += pl.room.tags_free.eq(Cat(seen < blind, seen + 1 < blind))
        else:
            m.d.comb += pl.room.tags_free.eq(bk.room.tags_free)
        m.d.comb += bk.issue.eq(pl.issue)
        cpl_space = self.constant(m, 20, "cpl_space")
        mrrs = self.constant(m, 2, "mrrs_code")
        mins = self.constant(m, 2, "min_code")
        m.d.comb += [Assume(mrrs < 3), Assume(mins <= mrrs)]
        m.d.comb += [bk.ext_tags.eq(ext_tags),
                     bk.cpl_space.eq(cpl_space),
                     pl.mrrs_m1.eq((128 << mrrs) - 1), pl.min_mask.eq((128 << mins) - 1),
                     bk.o_rd.ready.eq(self.anyseq(m, 1, "rd_ready")),
                     bk.requester_id.eq(self.anyseq(m, 16, "requester_id")),
                     bk.tag_addr.eq(self.anyseq(m, TB, "tag_addr"))]
        for path, member, value in pl.signature.flatten(pl):
            if (member.flow == wiring.In and not isinstance(value, Const)
                    and path[0] not in ("room", "ext_tags", "mrrs_m1", "min_mask")):
                name = "_".join(str(p) for p in path)
                m.d.comb += value.eq(self.anyseq(m, len(Value.cast(value)), f"pl_{name}"))

        # The reference: per tag, held or not, and the held read's credits and rows.
        iss, rel = bk.issue, bk.release
        new, head = bk.next_tag, bk.head_seq[:TB]
        held = Signal(NT, name="held")
        hdrs = [Signal(5, name=f"hdr_{t}") for t in range(NT)]
        dats = [Signal(7, name=f"dat_{t}") for t in range(NT)]
        rows = [Signal(len(iss.rows), name=f"rows_{t}") for t in range(NT)]
        m.d.comb += [rel.en.eq(self.anyseq(m, 1, "rel_en")), rel.hdr.eq(_select(hdrs, head)),
                     rel.dat.eq(_select(dats, head)), rel.rows.eq(_select(rows, head))]
        m.d.comb += Assume(~rel.en | held.bit_select(head, 1))
        cleared = Mux(rel.en, held & ~(1 << head), held)
        m.d.sync += held.eq(Mux(iss.en, cleared | (1 << new), cleared))
        for t in range(NT):
            with m.If(iss.en & (new == t)):
                m.d.sync += [hdrs[t].eq(iss.hdr), dats[t].eq(iss.dat), rows[t].eq(iss.rows)]

        sum_hdr = _total(Mux(held[t], hdrs[t], 0) for t in range(NT))
        sum_dat = _total(Mux(held[t], dats[t], 0) for t in range(NT))
        sum_rows = _total(Mux(held[t], rows[t], 0) for t in range(NT))
        count = _total(held[t].as_unsigned() for t in range(NT))
        limit = Mux(ext_tags, NT, min(NT, 32))
        lim_hdr, lim_dat = cpl_space[:8], cpl_space[8:20]

        def bki(name):
            return self.internal(name, block="booking")

        def pli(name):
            return self.internal(name, block="planner")

        outstanding = bki("outstanding")
        free_rows = bki("free_less") + ROWS
        used_hdr, used_dat = bki("used_hdr"), bki("used_dat")
        acc_hdr, acc_dat, acc_rows = bki("acc_hdr"), bki("acc_dat"), bki("acc_rows")
        self.claim(m, "tags", ~iss.en | (~held.bit_select(new, 1) & (count < limit)))
        self.claim(m, "credits", ~iss.en | (((lim_hdr == 0) | (sum_hdr + iss.hdr <= lim_hdr))
                                           & ((lim_dat == 0) | (sum_dat + iss.dat <= lim_dat))))
        self.claim(m, "wrap", (outstanding <= NT) & (free_rows <= ROWS)
                   & (used_hdr == sum_hdr + acc_hdr) & (used_dat == sum_dat + acc_dat)
                   & (free_rows + sum_rows + acc_rows == ROWS))
        if self.mutant is not None:
            return

        # Lemmas.  The reference and the booking's counters agree.
        started = Signal(name="started")
        m.d.sync += started.eq(1)
        room, state = bk.room, pli("planner_state")
        self.lemma(m, outstanding == count)
        self.lemma(m, bk.room.tags_free == Cat(outstanding < limit, outstanding + 1 < limit))
        self.lemma(m, head == (new - outstanding)[:TB])
        for t in range(NT):
            self.lemma(m, held[t] == ((new - 1 - t)[:TB] < outstanding))
        self.lemma(m, (outstanding <= NT) & (used_hdr == sum_hdr + acc_hdr)
                   & (used_dat == sum_dat + acc_dat) & (free_rows + sum_rows + acc_rows == ROWS))
        self.lemma(m, started | ((state == 0) & ~iss.en & ~pli("d_iss_q") & (count == 0)
                                 & (room.room_hdr == 0) & (room.room_dat == 0)
                                 & ~room.hdr_free & ~room.dat_free))
        self.lemma(m, ~started | ((bki("lim_hdr") == lim_hdr) & (bki("lim_dat") == lim_dat)))
        # The planner: a booking never in ACT, never two in a row; the room ACT checks is no
        # more than what is left, once the last issue is counted.
        d_iss = pli("d_iss_q")
        self.lemma(m, ~iss.en | (state != ACT))
        self.lemma(m, ~(iss.en & d_iss))
        does = Cat(*(pli(f"k_do_{a}") for a in ("load", "pf", "data")))
        self.lemma(m, (does & (does - 1)) == 0)
        sel = pli("sel")
        # In ACT, a read's rows and the same less the buffer's (the top bit flipped), both
        # from CALC.
        self.lemma(m, (state != ACT)
                   | (pli("k_rows_less").as_unsigned() == (pli("k_rows") ^ ROWS)))
        # The actions are held for ACT only (the issue is decided outside the state machine
        # from them), and ACT's data read one-hot by channel is the selected channel's.
        self.lemma(m, (does == 0) | (state == ACT))
        for c in range(N_DMA_CHANNELS):
            self.lemma(m, ~pli(f"k_reading{c}") | (pli("k_do_data") & (sel == c)))
        # The accumulator holds one release, two after a booking cycle.
        self.lemma(m, (acc_hdr <= Mux(d_iss, 62, 31)) & (acc_dat <= Mux(d_iss, 254, 127)))
        late_hdr = Mux(d_iss, iss.hdr, 0)
        late_dat = Mux(d_iss, iss.dat, 0)
        self.lemma(m, ~started | (room.room_hdr + sum_hdr <= lim_hdr + late_hdr))
        self.lemma(m, ~started | (room.room_dat + sum_dat <= lim_dat + late_dat))
        self.lemma(m, ~started | (room.hdr_free == (lim_hdr == 0)))
        self.lemma(m, ~started | (room.dat_free == (lim_dat == 0)))
        in_act = state == ACT
        self.lemma(m, ~in_act | (pli("k_room_hdr") + sum_hdr <= lim_hdr))
        self.lemma(m, ~in_act | (pli("k_room_dat") + sum_dat <= lim_dat))
        fetch_ok = pli("k_fetch_ok")
        self.lemma(m, ~(in_act & fetch_ok)
                   | ((room.hdr_free | (FETCH_CREDITS[0] <= pli("k_room_hdr")))
                      & (room.dat_free | (FETCH_CREDITS[1] <= pli("k_room_dat")))))
        self.lemma(m, ~(in_act & (pli("k_tags") | fetch_ok)) | (outstanding < limit))
        # The queue room and the tag, also registered as one (what ``go_read`` looks at).
        self.lemma(m, pli("k_qroom_tags") == (pli("k_qroom") & pli("k_tags")))
        # A load that also issues its descriptor's read had its room checked in CALC: a tag,
        # the rows and the credits are still there in ACT.
        ld_one = pli("k_ld_one")
        self.lemma(m, ~(in_act & ld_one)
                   | (pli("k_tags") & (pli("k_ld_rows") <= free_rows)
                      & (room.hdr_free | (pli("k_ld_hdr") <= pli("k_room_hdr")))
                      & (room.dat_free | (pli("k_ld_dat") <= pli("k_room_dat")))))


def _select(values, index):
    """``values[index]`` (a list of signals, a value ``index``)."""
    result = values[0]
    for t, v in enumerate(values[1:], 1):
        result = Mux(index == t, v, result)
    return result


def _total(values):
    values = list(values)
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total
