"""What a rank program yields: a wait for requests, or for time to pass.

A rank program is a generator; it blocks by yielding a :class:`Wait` from :meth:`Rank.wait`,
:meth:`Rank.waitall`, :meth:`Rank.send`, :meth:`Rank.recv` or :meth:`Rank.elapse`, and the
:class:`~.world.World` resumes it at the simulated time the wait ends::

    status = yield rank.wait(rank.irecv(buf, source=0, tag=7))
    statuses = yield rank.waitall([rank.isend(a, 1, 0), rank.irecv(b, 1, 0)])
    yield rank.elapse(2_000_000)                  # compute for 2 us

A wait on a request that failed raises its :class:`~.errors.MPIError` at the ``yield``
(``waitall`` waits for all of its requests first, then raises the first error).
"""

__all__ = ["Wait"]


class Wait:
    """A blocking point of a rank program.

    Members
    -------
    rank : int
        The waiting rank.
    requests : list of Request
        Requests to wait for (empty for a pure delay).
    many : bool
        True for ``waitall`` (the result is a list of statuses).
    delay_ps : int
        Time the rank computes before the wait can end (``elapse``).
    """

    def __init__(self, rank, requests=(), many=False, delay_ps=0):
        self.rank = rank
        self.requests = list(requests)
        self.many = many
        self.delay_ps = delay_ps

    def __repr__(self):
        if not self.requests:
            return f"Wait(rank {self.rank}, {self.delay_ps} ps)"
        pending = [r for r in self.requests if not r.done]
        return f"Wait(rank {self.rank}, {len(pending)} of {len(self.requests)} pending: {pending})"

    def ready(self):
        """True when every request is complete."""
        return all(r.done for r in self.requests)

    def t_ready(self):
        """Time the last request completed (0 when there is none)."""
        return max((r.t_done for r in self.requests), default=0)

    def result(self):
        """Return the status (list of statuses) or raise the first request's error."""
        for r in self.requests:
            if r.error is not None:
                raise r.error
        if self.many:
            return [r.status for r in self.requests]
        return self.requests[0].status if self.requests else None
