"""One symbolic beat followed through a block: no beat lost, duplicated, changed or reordered.

The standard technique: the solver picks, by a free input, one beat entering the block (any
beat of any run, so every beat is covered); the tracker records its payload and how many beats
entered before it are still inside; each beat leaving counts that down, and the beat that
leaves when it is zero must be the recorded one.  The tracker also counts the beats inside, so
that an overflow past ``capacity`` or a beat leaving an empty block fails too.
"""

from amaranth.hdl import Signal, Value

__all__ = ["BeatTracker"]


class BeatTracker:
    """Follow one beat from ``(in_valid, in_ready, in_payload)`` to ``(out_valid, out_ready,
    out_payload)``; ``capacity`` bounds the beats inside.  :meth:`add` returns the properties
    ``{"order": ..., "bound": ...}`` and the registers for lemmas."""

    def __init__(self, name, capacity, in_valid, in_ready, in_payload,
                 out_valid, out_ready, out_payload, pick):
        self.name = name
        self.capacity = capacity
        self.i = (in_valid, in_ready, in_payload)
        self.o = (out_valid, out_ready, out_payload)
        self.pick = pick

    def add(self, m):
        n = self.name
        in_valid, in_ready, in_payload = self.i
        out_valid, out_ready, out_payload = self.o
        inside = Signal(range(self.capacity + 2), name=f"{n}_inside")
        armed = Signal(name=f"{n}_armed")           # the tracked beat is inside
        ahead = Signal(range(self.capacity + 1), name=f"{n}_ahead")
        value = Signal.like(in_payload, name=f"{n}_value")
        put = in_valid & in_ready
        got = out_valid & out_ready
        m.d.sync += inside.eq(inside + put - got)
        with m.If(armed & got):
            m.d.sync += ahead.eq(ahead - 1)
            with m.If(ahead == 0):
                m.d.sync += armed.eq(0)
        with m.If(~armed & put & self.pick):
            m.d.sync += [armed.eq(1), value.eq(in_payload), ahead.eq(inside - got)]
        self.inside, self.armed, self.ahead, self.value = inside, armed, ahead, value
        return {
            # The beat leaving when the tracked one is the oldest inside is the tracked one.
            "order": ~(armed & got & (ahead == 0))
                     | (Value.cast(out_payload) == Value.cast(value)),
            # Never more than ``capacity`` beats inside, never a beat out of an empty block.
            "bound": (inside <= self.capacity) & (~got | (inside != 0)),
        }

    def lemmas(self, slots):
        """Invariants tying the tracker to the block's storage: ``slots`` lists ``(valid,
        payload)`` of the stored beats, oldest first, valid ones contiguous from the first."""
        tests = [self.inside == sum(v.as_unsigned() for v, _ in slots),
                 ~self.armed | (self.ahead < self.inside)]
        for k, (valid, payload) in enumerate(slots):
            tests.append(~(self.armed & (self.ahead == k)) | (valid & (
                Value.cast(payload) == Value.cast(self.value))))
        return tests

    def sparse_lemmas(self, slots):
        """Like :meth:`lemmas` for ``slots`` whose valid ones need not be contiguous (a
        register slice followed by a FIFO, or the beats of one source among others): the
        ``n``-th valid slot, oldest first, holds the ``n``-th beat inside."""
        tests = [self.inside == sum(v.as_unsigned() for v, _ in slots),
                 ~self.armed | (self.ahead < self.inside)]
        before = 0
        for valid, payload in slots:
            here = self.armed & valid & (self.ahead == before)
            tests.append(~here | (Value.cast(payload) == Value.cast(self.value)))
            before = before + valid.as_unsigned()
        return tests
