"""A completion queue that host software polls."""

import heapq

__all__ = ["CompletionQueue"]


class CompletionQueue:
    """Completions in the order they become visible: ``(t_ps, order of creation)``.

    The HCA adds an entry as soon as it knows the outcome, stamped with the time the entry
    lands in host memory; :meth:`poll` returns only entries visible at the polling time.
    Unbounded (a real CQ overflows; software here is expected to poll).

    Members
    -------
    cq_num : int
        Number of the queue on its HCA.
    """

    def __init__(self, cq_num):
        self.cq_num = cq_num
        self._heap = []
        self._count = 0

    def __len__(self):
        return len(self._heap)

    def push(self, wc):
        """Add a :class:`~.verbs.WorkCompletion` (called by the HCA)."""
        heapq.heappush(self._heap, (wc.t_ps, self._count, wc))
        self._count += 1

    def poll(self, t_ps, max_entries=16):
        """Remove and return up to ``max_entries`` completions visible at ``t_ps``, oldest first.

        Call it through ``HCA.poll_cq``, which first runs the fabric to ``t_ps`` so that every
        completion due by then exists.
        """
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be a positive integer, not {max_entries!r}")
        out = []
        while self._heap and self._heap[0][0] <= t_ps and len(out) < max_entries:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def next_time(self):
        """Time the oldest queued entry becomes visible, or ``None`` when empty."""
        return self._heap[0][0] if self._heap else None
