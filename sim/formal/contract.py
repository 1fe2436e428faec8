"""The internal TLP stream contract as properties of one stream (``docs/stream.md``, section 2).

The same observer serves both sides: on a block's input its rules are assumptions (the traffic
obeys the contract), on an output they are assertions.
"""

from amaranth.hdl import Assume, Mux, Signal, Value

from peach2.tlp.stream import DATA_DWS

__all__ = ["StreamContract", "RULES"]

#: The contract's rules this observer checks, each one property (``docs/stream.md``, section 2).
RULES = {
    "hold":   "rule 9 (amaranth.lib.stream): valid and the whole payload are held until ready",
    "frame":  "rule 1: first on the first beat of a packet only, no beat outside a packet",
    "err":    "rule 6: err only on a last beat",
    "dw_en":  "rule 5: dw_en 0b1111 except on the last beat, contiguous from lane 0 there",
    "length": "rule 5: the beat count and the last dw_en agree with hdr.common.length "
              "(fewer beats only for a packet ended with err)",
}

#: Most beats of a TLP (1024 payload DWs).
MAX_BEATS = 1024 // DATA_DWS


class StreamContract:
    """Observer of one :func:`~peach2.tlp.stream.TLPStream` (``valid``, ``ready``, ``p``).

    ``first`` overrides the beat's own ``first`` (the ingress marks a packet it hands to the
    packet buffer for discarding by clearing ``first`` and setting ``o_refuse`` or
    ``o_linkdown``, ``rtl/router/ingress.py``).  ``restart`` is a 1-bit value that, while set,
    clears the observer and suspends its rules (the link gate's ``dropping``: the TX adapter
    behind it is held in reset and forgets a packet it had begun, ``rtl/router/linkstate.py``).
    ``ready`` overrides the stream's ``ready`` (for a stream without one).
    """

    def __init__(self, stream, name, *, first=None, restart=0, ready=None):
        self.stream = stream
        self.name = name
        self.first = stream.p.first if first is None else first
        self.restart = restart
        self.ready = stream.ready if ready is None else ready

    def signals(self, m):
        """Add the observer's registers to ``m``; return ``{rule: test}`` (1-bit values)."""
        s, p, n = self.stream, self.stream.p, self.name
        moved = s.valid & self.ready
        held = Signal(name=f"{n}_held")             # last cycle: valid and not ready
        held_p = Signal.like(p, name=f"{n}_held_p")
        in_pkt = Signal(name=f"{n}_in_pkt")         # after a first beat, before the last one
        beat = Signal(range(MAX_BEATS + 1), name=f"{n}_beat")   # beats of the packet moved
        want = Signal(range(1024 + 1), name=f"{n}_want")        # payload DWs of the packet
        m.d.sync += [held.eq(s.valid & ~self.ready & ~self.restart), held_p.eq(p)]
        with m.If(self.restart):
            m.d.sync += [in_pkt.eq(0), beat.eq(0)]
        with m.Elif(moved):
            m.d.sync += [r.eq(v) for r, v in zip((in_pkt, beat, want),
                                                   _after((in_pkt, beat, want), p, self.first))]
        self.state = (in_pkt, beat, want)
        ok = ~self.restart
        rules = _beat_rules(self.state, p, self.first)
        return {
            "hold":   ~ok | ~held | (s.valid & (Value.cast(p) == Value.cast(held_p))),
            **{rule: ~ok | ~s.valid | test for rule, test in rules.items()},
        }

    def chain(self, before, slots):
        """Lemmas for k-induction: the beats a block holds (``slots``: ``(valid, beat)``
        oldest first, valid ones contiguous) obeyed the contract when they entered, and lead
        from observer ``before``'s state (the block's output side) to this observer's (its
        input side).  Call after both observers' :meth:`signals`."""
        state = before.state
        tests = []
        for valid, beat in slots:
            rules = _beat_rules(state, beat, beat.first)
            tests += [~valid | test for test in rules.values()]
            after = _after(state, beat, beat.first)
            state = tuple(Mux(valid, a, b) for a, b in zip(after, state))
        tests += [a == b for a, b in zip(state, self.state)]
        return tests

    def assume(self, m, rules=RULES):
        """Add the rules as assumptions (an input that obeys the contract)."""
        for rule, test in self.signals(m).items():
            if rule in rules:
                m.d.comb += Assume(test)

    def assert_into(self, harness, m, prefix=""):
        """State every rule as the harness's property ``prefix + rule``."""
        for rule, test in self.signals(m).items():
            harness.claim(m, prefix + rule, test)


def _after(state, p, first):
    """The observer's ``(in_pkt, beat, want)`` after beat ``p`` moved."""
    in_pkt, beat, want = state
    return (~p.last, Mux(p.last, 0, Mux(first, 1, beat + 1)),
            Mux(first, _payload_dws(p.hdr), want))


def _beat_rules(state, p, first):
    """The rules on one valid beat ``p`` moving in observer state ``state``."""
    in_pkt, beat, want = state
    length = Mux(first, _payload_dws(p.hdr), want)
    beats = Mux(length == 0, 1, (length + DATA_DWS - 1) >> 2)
    lanes = (length - 1)[:2] + 1                     # payload DWs on the last beat, 1..4
    last_dw_en = Mux(length == 0, 0, (1 << lanes) - 1)
    index = Mux(first, 0, beat)
    dw_en = p.dw_en
    return {
        "frame":  first == ~in_pkt,
        "err":    ~p.err | p.last,
        "dw_en":  Mux(p.last, (dw_en == 0) | (dw_en == 1) | (dw_en == 3) | (dw_en == 7)
                      | (dw_en == 15), dw_en == 15),
        "length": (index < beats) & Mux(p.err, 1, (p.last == (index == beats - 1))
                                        & (~p.last | (dw_en == last_dw_en[:4]))),
    }


def _payload_dws(hdr):
    """Payload DWs the header announces: 0 without data, else ``length`` (0 meaning 1024)."""
    has_data = hdr.common.fmt.as_value()[1]
    length = hdr.common.length
    return Mux(has_data, Mux(length == 0, 1024, length), 0)
