"""What carries the crossings between partitions at every window edge.

A transport places partitions on ranks and runs two collective operations; the synchronisation
itself (:class:`~peach2.sim.machine.machine.Machine`) is the same whatever carries the data.
Every rank calls every collective in the same order (SPMD), as MPI requires.
"""

__all__ = ["Transport"]


class Transport:
    """Base of :class:`LocalTransport` and :class:`MpiTransport`: one rank's view.

    Partitions are placed on ranks in blocks: with ``M`` partitions on ``R`` ranks, rank ``r``
    owns partitions ``r * M // R`` to ``(r + 1) * M // R - 1``, so neighbouring sub-clusters
    share a rank when there are fewer ranks than partitions.

    Members
    -------
    rank : int
        This process's rank.
    size : int
        Number of ranks.
    """

    rank = 0
    size = 1

    def placement(self, n_partitions):
        """Return the rank of every partition; refuse more ranks than partitions."""
        if self.size > n_partitions:
            raise ValueError(f"{self.size} ranks for {n_partitions} partitions: every rank "
                             f"needs at least one partition (start fewer ranks)")
        return [next(r for r in range(self.size)
                     if r * n_partitions // self.size <= p < (r + 1) * n_partitions // self.size)
                for p in range(n_partitions)]

    def exchange(self, outgoing):
        """Send ``outgoing[r]`` to rank ``r`` for every ``r``; return what each rank sent here.

        A blocking all-to-all: it returns when every rank has called it.
        """
        raise NotImplementedError

    def allgather(self, value):
        """Return the list of every rank's ``value``, in rank order, on every rank."""
        raise NotImplementedError

    def describe(self):
        """Return a short text naming the transport, for reports."""
        return f"{type(self).__name__}({self.size} rank{'s' if self.size != 1 else ''})"
