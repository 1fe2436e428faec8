"""Harness: :class:`~peach2.router.buffer.PacketBuffer` (its two ``SyncFIFOBuffered``: no
overflow or underflow, occupancy, every beat and header once and in order, ``queued`` exact)."""

from amaranth.hdl import Assume, Cat, Signal, Value

from peach2.router.buffer import PacketBuffer

from ..contract import StreamContract
from ..harness import Harness
from ..tracker import BeatTracker

__all__ = ["BufferHarness"]

#: Destinations (crossbar outputs) in the harness.
DESTS = 2


class BufferHarness(Harness):
    """The real packet buffer with a beat FIFO of ``depth`` and a header FIFO of
    ``max_packets`` entries, ``DESTS`` destinations, no N translation (``translate_bit`` None;
    the translation itself is the ``egress`` block's proof).

    The input obeys the framing rule of the ingress's output (``docs/stream.md`` section 2):
    a packet kept has ``first`` on its first beat only; a packet discarded (``i_refuse`` or
    ``i_linkdown``, held for the whole packet) comes without ``first``.  ``i_dest`` is one-hot
    with a first beat.  Two free bits of data, of ``dw_en`` and of the header, the flags, any
    ``ready`` at the output.

    ``mutant="late_count"`` gives the ``queued`` reference one cycle less of delay than the
    documented two (so ``queued`` fails).
    """

    PROPERTIES = {
        "overflow":  "nothing is written into a full FIFO (beat or header): i_tlp.ready is low "
                     "when a write would be lost",
        "underflow": "the header FIFO is never read empty, and its output holds a header "
                     "whenever the beat FIFO's output holds a first beat",
        "level":     "occupancy: the beats and packets inside are those written and not yet "
                     "out, at most depth + 2 beats and max_packets + 2 headers",
        "order":     "every beat kept leaves once, unchanged, in order (one symbolic beat)",
        "heads":     "every kept packet's header, BAR hit and destination leave with its first "
                     "beat, once and in order (one symbolic packet)",
        "queued":    "queued[j] is 1 exactly when, two cycles before, the buffer held a packet "
                     "bound for j (from the cycle after its first beat is written until two "
                     "cycles after that beat leaves); its counter equals that number, never wraps",
    }

    def __init__(self, prop, *, mutant=None, depth=1, max_packets=1):
        super().__init__(prop, mutant=mutant)
        self.depth, self.max_packets = depth, max_packets

    def build(self, m, platform):
        dut = self.add_block(m, "dut", PacketBuffer(depth=self.depth,
                                                    max_packets=self.max_packets,
                                                    dest_width=DESTS), platform)
        i, o = dut.i_tlp, dut.o_tlp
        m.d.comb += [
            i.valid.eq(self.anyseq(m, 1, "in_valid")),
            i.p.data[:2].eq(self.anyseq(m, 2, "in_data")),
            i.p.dw_en[:2].eq(self.anyseq(m, 2, "in_dw_en")),
            Value.cast(i.p.hdr)[:2].eq(self.anyseq(m, 2, "in_hdr")),
            i.p.bar[:1].eq(self.anyseq(m, 1, "in_bar")),
            i.p.first.eq(self.anyseq(m, 1, "in_first")),
            i.p.last.eq(self.anyseq(m, 1, "in_last")),
            i.p.err.eq(self.anyseq(m, 1, "in_err")),
            dut.i_dest.eq(self.anyseq(m, DESTS, "in_dest")),
            dut.i_refuse.eq(self.anyseq(m, 1, "in_refuse")),
            dut.i_linkdown.eq(self.anyseq(m, 1, "in_linkdown")),
            o.ready.eq(self.anyseq(m, 1, "out_ready")),
        ]
        discard = dut.i_refuse | dut.i_linkdown
        observer = StreamContract(i, "in", first=i.p.first | discard)
        m.d.comb += Assume(observer.signals(m)["frame"])
        in_pkt = observer.state[0]
        m.d.comb += Assume(~(i.valid & discard & i.p.first))
        m.d.comb += Assume(~(i.valid & i.p.first) | (dut.i_dest != 0) & (
            (dut.i_dest & (dut.i_dest - 1)) == 0))
        held = Signal(2, name="in_held_discard")    # refuse, linkdown of the packet moving
        with m.If(i.valid & i.ready):
            m.d.sync += held.eq(Cat(dut.i_refuse, dut.i_linkdown))
        m.d.comb += Assume(~(i.valid & in_pkt) | (held == Cat(dut.i_refuse, dut.i_linkdown)))

        names = ("w_en", "w_rdy", "r_en", "r_rdy", "level", "r_data")
        dfifo = {n: getattr(self.submodule(("dfifo",)), n) for n in names}
        hfifo = {n: getattr(self.submodule(("hfifo",)), n) for n in names}
        skid = self.internal("skid", ("out",))
        skid_valid = self.internal("skid_valid", ("out",))

        self.claim(m, "overflow", ~(dfifo["w_en"] & ~dfifo["w_rdy"])
                   & ~(hfifo["w_en"] & ~hfifo["w_rdy"]))
        beat_first = dfifo["r_data"][132]           # _DataEntry: data 128, dw_en 4, first
        self.claim(m, "underflow", ~(hfifo["r_en"] & ~hfifo["r_rdy"])
                   & ~(dfifo["r_rdy"] & beat_first & ~hfifo["r_rdy"]))

        # Beats: (data, dw_en, first, last, err) in, the same fields out.
        def beat(p):
            return Cat(p.data, p.dw_en, p.first, p.last, p.err)
        moved = o.valid & o.ready
        beats = BeatTracker("beat", self.depth + 2, i.valid & ~discard, i.ready, beat(i.p),
                            o.valid, o.ready, beat(o.p), self.anyseq(m, 1, "pick_beat"))
        heads = BeatTracker("head", self.max_packets + 2, i.valid & i.p.first, i.ready,
                            Cat(i.p.hdr, i.p.bar, dut.i_dest), o.valid & o.p.first, o.ready,
                            Cat(o.p.hdr, o.p.bar, dut.o_dest), self.anyseq(m, 1, "pick_head"))
        props_b, props_h = beats.add(m), heads.add(m)
        self.claim(m, "order", props_b["order"])
        self.claim(m, "heads", props_h["order"])
        self.claim(m, "level", props_b["bound"] & props_h["bound"]
                   & (dfifo["level"] <= self.depth) & (hfifo["level"] <= self.max_packets))

        # queued: packets bound for j inside, and that number two cycles late.
        late = 1 if self.mutant == "late_count" else 2
        packets = []
        for j in range(DESTS):
            inside = Signal(range(self.max_packets + 4), name=f"packets_{j}")
            packets.append(inside)
            m.d.sync += inside.eq(inside + (hfifo["w_en"] & dut.i_dest[j])
                                  - (moved & o.p.first & dut.o_dest[j]))
            seen = inside
            for step in range(late - 1):
                seen_r = Signal.like(inside, name=f"packets_{j}_late{step + 1}")
                m.d.sync += seen_r.eq(seen)
                seen = seen_r
            count = self.internal(f"queued_{j}")
            self.claim(m, "queued", (dut.queued[j] == (seen != 0)) & (count == seen))
            if self.mutant is None:
                self.lemma(m, inside == (seen + self.internal("put_r")[j]
                                         - self.internal("got_r")[j])[:len(inside)])

        skid_beat = skid[:135]
        if self.mutant is None:
            self.lemma(m, ~skid_valid | o.valid)
            self.lemma(m, beats.inside == dfifo["level"] + o.valid + skid_valid)
        if self.mutant is None and self.depth == 1 and self.max_packets == 1:
            # Lemmas (single-register FIFOs only: a FIFO in block RAM keeps its entries in a
            # memory no assertion can name).  Storage oldest first: output, skid, FIFO.
            fifo_valid = dfifo["level"] != 0
            out_beat = Cat(o.p.data, o.p.dw_en, o.p.first, o.p.last, o.p.err)
            stored = [(o.valid, out_beat), (skid_valid, skid_beat),
                      (fifo_valid, dfifo["r_data"])]
            self.lemma(m, ~fifo_valid | dfifo["r_rdy"])
            for test in beats.sparse_lemmas(stored):
                self.lemma(m, test)
            head_w = len(Value.cast(i.p.hdr)) + 8 + DESTS
            out_head = Cat(o.p.hdr, o.p.bar, dut.o_dest)
            firsts = [(o.valid & o.p.first, out_head),
                      (skid_valid & skid[132], skid[135:135 + head_w]),
                      (hfifo["level"] != 0, hfifo["r_data"])]
            self.lemma(m, (hfifo["level"] != 0) == (fifo_valid & beat_first))
            self.lemma(m, ~(hfifo["level"] != 0) | hfifo["r_rdy"])
            for test in heads.sparse_lemmas(firsts):
                self.lemma(m, test)
            for j in range(DESTS):
                held_for_j = sum((v & h[-DESTS + j]).as_unsigned() for v, h in firsts)
                self.lemma(m, packets[j] == held_for_j)
