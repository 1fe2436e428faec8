"""A completion queue whose entries wake the MPI progress engine at the time they become visible.

MVAPICH2's progress engine spins on ``ibv_poll_cq``; polling every picosecond in simulation
would be absurd, and polling at chosen times would lose the moment an entry appears.  This
queue instead schedules ``handler(wc)`` on the fabric's event engine at ``wc.t_ps``, the time the
entry lands in host memory, so a rank that is spinning sees it then (the handler adds the cost of
the poll and of handling it).  The HCA only sees a :class:`CompletionQueue`.
"""

from peach2.sim.verbs import CompletionQueue

__all__ = ["EventCQ"]


class EventCQ(CompletionQueue):
    """A :class:`~peach2.sim.infiniband.CompletionQueue` that calls back instead of queueing.

    Members
    -------
    fabric : Fabric
        Whose event engine runs the handler.
    port : int
        The rank's port (orders simultaneous events deterministically).
    handler : callable
        ``handler(wc)``, called at ``wc.t_ps``.
    entries : int
        Completions seen.
    """

    def __init__(self, fabric, port, handler, cq_num=0):
        super().__init__(cq_num)
        self.fabric = fabric
        self.port = port
        self.handler = handler
        self.entries = 0

    def push(self, wc):
        """Take a completion from the HCA: run the handler when it becomes visible."""
        self.entries += 1
        self.fabric.schedule(max(wc.t_ps, self.fabric.now), self.port, self.handler, wc)

    def poll(self, t_ps, max_entries=16):
        """Nothing is ever queued here: completions go to the handler."""
        return []
