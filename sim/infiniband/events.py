"""Deterministic event queue: integer picoseconds, ties broken by a stated key.

An event is ordered by ``(time, phase, port, order)``:

- ``phase`` puts state changes before the decisions that read them: at one picosecond, packet
  and credit arrivals (:data:`ARRIVE`) are applied first, then links and switch outputs decide
  what to send (:data:`DECIDE`), then messages are delivered and user callbacks run
  (:data:`DELIVER`).  So a decision never depends on the order in which two simultaneous
  arrivals were scheduled.
- ``port`` is the port the event belongs to (the source port for a delivery).
- ``order`` is the caller's tie-breaker (a message's sequence number for a delivery); events
  equal so far run in the order they were scheduled.

Nothing here reads a clock or a random source: the same calls give the same order.
"""

import heapq

__all__ = ["EventQueue", "ARRIVE", "DECIDE", "DELIVER"]

ARRIVE = 0
DECIDE = 1
DELIVER = 2


class EventQueue:
    """A priority queue of callbacks keyed by ``(time, phase, port, order, scheduling index)``.

    Members
    -------
    now : int
        Time of the event being run, or of the last one run (picoseconds).
    """

    def __init__(self):
        self._heap = []
        self._count = 0
        self.now = 0

    def __len__(self):
        return len(self._heap)

    def push(self, t_ps, phase, port, fn, *args, order=0):
        """Schedule ``fn(*args)`` at ``t_ps``; refuse a time before :attr:`now`."""
        if t_ps < self.now:
            raise ValueError(f"event at {t_ps} ps is before the current time {self.now} ps")
        heapq.heappush(self._heap, (t_ps, phase, port, order, self._count, fn, args))
        self._count += 1

    def next_time(self):
        """Return the time of the earliest pending event, or ``None`` when there is none."""
        return self._heap[0][0] if self._heap else None

    def run_until(self, t_ps):
        """Run every event at or before ``t_ps`` in key order; then :attr:`now` is ``t_ps``.

        Events scheduled while running (at or after the current time) are run too when they
        fall at or before ``t_ps``.
        """
        if t_ps < self.now:
            raise ValueError(f"cannot run back to {t_ps} ps: the time is already {self.now} ps")
        heap = self._heap
        while heap and heap[0][0] <= t_ps:
            t, _phase, _port, _order, _index, fn, args = heapq.heappop(heap)
            self.now = t
            fn(*args)
        self.now = t_ps

    def run(self, limit_ps=None):
        """Run until no event is left (or until ``limit_ps``); return the final time."""
        while self._heap:
            t = self._heap[0][0]
            if limit_ps is not None and t > limit_ps:
                self.run_until(limit_ps)
                return self.now
            self.run_until(t)
        return self.now
