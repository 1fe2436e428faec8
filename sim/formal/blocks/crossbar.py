"""Harness: :class:`~peach2.router.crossbar.Crossbar` (one grant per output, whole packets,
every beat once and in order between an input and the output its packet is routed to)."""

from amaranth.hdl import Array, Assume, Cat, Const, Mux, Signal, Value

from peach2.router.crossbar import Crossbar
from peach2.tlp.stream import TLPBeat

from ..contract import StreamContract
from ..harness import Harness
from ..tracker import BeatTracker

__all__ = ["CrossbarHarness"]

#: Free payload bits per beat besides the source tag (the rest of the beat is held at zero:
#: the crossbar never looks at the payload, it moves it as a whole).
FREE_BITS = 2


class CrossbarHarness(Harness):
    """The real crossbar with ``n_in`` inputs and ``n_out`` outputs (every pair reachable).

    Each input obeys the framing rule (``first`` on the first beat only, ``docs/stream.md``
    section 2; rule 1, the one the crossbar relies on) and gives a one-hot ``i_dest`` with a
    first beat; a beat carries its input's number in ``data[0:2]`` (a tag the harness writes,
    so that a beat at an output names the input it came from) and ``FREE_BITS`` free bits; any
    ``ready`` at the outputs.

    ``mutant="no_lock"`` feeds the crossbar a ``first`` on every beat of an input (so it never
    locks), while the harness's framing still sees the real packets: the crossbar then lets
    another input's packet in between, and ``packet`` fails.
    """

    PROPERTIES = {
        "grant":  "an output takes beats from at most one input in a cycle, and an input's "
                  "beat goes to at most one output",
        "packet": "at each output, a packet's beats all come from one input, first on the "
                  "first beat only (no interleaving)",
        "order":  "every beat of an input leaves once, unchanged, in order, at the output its "
                  "packet was routed to (one symbolic beat of one input/output pair tracked)",
        "bound":  "at most two beats of one input inside one output (its register slice), none "
                  "leaves there that did not enter for it",
    }

    def __init__(self, prop, *, mutant=None, n_in=2, n_out=2):
        super().__init__(prop, mutant=mutant)
        self.n_in, self.n_out = n_in, n_out

    def build(self, m, platform):
        n_in, n_out = self.n_in, self.n_out
        dut = self.add_block(m, "dut", Crossbar(n_in, n_out), platform)
        dest = [Signal(n_out, name=f"dest_{k}") for k in range(n_in)]   # of the packet at k
        in_pkt = []
        for k in range(n_in):
            i = dut.i[k]
            first = self.anyseq(m, 1, f"in{k}_first")
            m.d.comb += [
                i.valid.eq(self.anyseq(m, 1, f"in{k}_valid")),
                i.p.data.eq(Cat(Const(k, 2), self.anyseq(m, FREE_BITS, f"in{k}_free"))),
                i.p.first.eq(first if self.mutant != "no_lock" else 1),
                i.p.last.eq(self.anyseq(m, 1, f"in{k}_last")),
                dut.i_dest[k].eq(self.anyseq(m, n_out, f"in{k}_dest")),
            ]
            observer = StreamContract(i, f"in{k}", first=first)
            m.d.comb += Assume(observer.signals(m)["frame"])
            m.d.comb += Assume(~(i.valid & first) | _one_hot(dut.i_dest[k]))
            in_pkt.append(observer.state[0])
            with m.If(i.valid & i.ready & first):
                m.d.sync += dest[k].eq(dut.i_dest[k])
        for j in range(n_out):
            m.d.comb += dut.o[j].ready.eq(self.anyseq(m, 1, f"out{j}_ready"))

        take = [[self.internal(f"take_{j}_{k}") for k in range(n_in)] for j in range(n_out)]
        pick = [self.internal(f"pick_{j}") for j in range(n_out)]
        locked = [self.internal(f"locked_{j}") for j in range(n_out)]
        after = [self.internal(f"after_{j}") for j in range(n_out)]

        # grant
        for j in range(n_out):
            self.claim(m, "grant", _at_most_one(Cat(*take[j])))
        for k in range(n_in):
            self.claim(m, "grant", _at_most_one(Cat(*(take[j][k] for j in range(n_out)))
                                                & dut.i[k].valid.replicate(n_out)))

        # packet: an observer per output (in a packet, its source)
        slots = []
        for j in range(n_out):
            o = dut.o[j]
            skid = TLPBeat(self.internal("skid", (f"out{j}",)))
            skid_valid = self.internal("skid_valid", (f"out{j}",))
            slots.append([(o.valid, o.p), (skid_valid, skid)])
            opkt = Signal(name=f"out{j}_pkt")
            osrc = Signal(2, name=f"out{j}_src")
            with m.If(o.valid & o.ready):
                m.d.sync += [opkt.eq(~o.p.last), osrc.eq(o.p.data[:2])]
            self.claim(m, "packet", ~o.valid | _continues((opkt, osrc), o.p))
            # Lemmas: the beats in the output's register slice continue the packet the output
            # observer has seen, and end in the state of the output's lock.
            state = (opkt, osrc)
            if self.mutant is None:
                for valid, beat in slots[j]:
                    self.lemma(m, ~valid | _continues(state, beat))
                    state = (Mux(valid, ~beat.last, state[0]),
                             Mux(valid, beat.data[:2], state[1]))
                self.lemma(m, ~skid_valid | o.valid)
                self.lemma(m, state[0] == locked[j])
                self.lemma(m, ~locked[j] | pick[j].bit_select(state[1], 1))
                self.lemma(m, _one_hot(pick[j]) & _one_hot(after[j]))
                for k in range(n_in):
                    self.lemma(m, (locked[j] & pick[j][k]) == (in_pkt[k] & dest[k][j]))
        if self.mutant is None:
            for k in range(n_in):
                self.lemma(m, ~in_pkt[k] | _one_hot(dest[k]))

        # order, bound: one input/output pair (chosen once), one symbolic beat of it
        src = self.constant(m, range(n_in), "track_in")
        out = self.constant(m, range(n_out), "track_out")
        m.d.comb += Assume(src < n_in)
        m.d.comb += Assume(out < n_out)
        in_valid = _chosen([i.valid for i in dut.i], src)
        in_ready = _chosen([i.ready for i in dut.i], src)
        in_p = TLPBeat(_chosen([i.p for i in dut.i], src))
        routed = Mux(in_p.first, _chosen(dut.i_dest, src), _chosen(dest, src)).bit_select(out, 1)
        out_valid = _chosen([o.valid for o in dut.o], out)
        out_ready = _chosen([o.ready for o in dut.o], out)
        out_p = TLPBeat(_chosen([o.p for o in dut.o], out))
        tracker = BeatTracker("track", 2, in_valid & routed, in_ready, in_p,
                              out_valid & (out_p.data[:2] == src), out_ready, out_p,
                              self.anyseq(m, 1, "pick"))
        for prop, test in tracker.add(m).items():
            self.claim(m, prop, test)
        if self.mutant is None:
            mine = [[(valid & (beat.data[:2] == src), beat) for valid, beat in slots[j]]
                    for j in range(n_out)]
            for j in range(n_out):
                for test in tracker.sparse_lemmas(mine[j]):
                    self.lemma(m, (out != j) | test)


def _chosen(values, index):
    """``values[index]`` for a value ``index``."""
    return Array(Value.cast(v) for v in values)[index]


def _one_hot(value):
    return (value != 0) & _at_most_one(value)


def _at_most_one(value):
    return (value & (value - 1)) == 0


def _continues(state, beat):
    """The beat continues the packet of observer ``state`` ``(in_pkt, src)``: ``first`` exactly
    outside a packet, and inside one the same source."""
    in_pkt, src = state
    return (beat.first == ~in_pkt) & (~in_pkt | (beat.data[:2] == src))
