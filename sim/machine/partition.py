"""One partition of the machine as the layers above see it: its ports, the models attached to
it, and the step that advances both by one window.

::

    Machine ──step(start, end)──> Partition ──advance(end)──> attached models (e.g. a cocotb
       ^                             │                          sub-cluster), which may send
       │ crossings                   └──run_until(end - 1)──> PartitionFabric   and poll
       └─────────── take_crossings() <───────────────────────┘

Inside a window the attached models go first: each may call :meth:`Partition.run_until` up to
the window's last picosecond, :meth:`Partition.send`, read :meth:`Partition.delivered`, or let
delivery callbacks run; then the fabric runs what is left of the window.  Everything another
partition can change in this window was injected before it began, so the order in which the
partitions (or the ranks) are stepped does not matter.
"""

from .layout import Layout
from .partition_fabric import PartitionFabric

__all__ = ["Partition"]


class Partition:
    """Partition ``index`` of ``layout``: its ports on the switch and what drives them.

    Members
    -------
    index : int
        The partition's number.
    ports : range
        The switch ports (HCAs) it owns.
    fabric : PartitionFabric
        Its share of the switch; it has :class:`~peach2.sim.infiniband.Fabric`'s methods for
        its own ports, so a verbs HCA or an MPI layer can be built on it.
    """

    def __init__(self, layout, index, params=None):
        if not isinstance(layout, Layout):
            raise TypeError(f"layout must be a Layout, not {type(layout).__name__}")
        self.fabric = PartitionFabric(layout, index, params)
        self.index = index
        self.ports = self.fabric.ports
        self._models = []

    # -- the driver API ---------------------------------------------------------------------

    @property
    def now(self):
        """This partition's simulated time in picoseconds."""
        return self.fabric.now

    @property
    def params(self):
        """The fabric parameters."""
        return self.fabric.params

    def send(self, t_ps, src, dst, nbytes, payload=None, tag=None, **options):
        """Hand a message from own port ``src`` to port ``dst`` (of any partition) at ``t_ps``.

        ``options`` are those of :meth:`Fabric.send` (``first_extra``, ``last_extra``,
        ``ready_ps``, ``urgent``).  ``t_ps`` may lie in a later window: the message waits in
        this partition's event queue.  Returns the sender's :class:`Message`; the receiving
        partition delivers its own copy (the payload travels pickled between ranks, so it must
        be picklable and is best treated as immutable once sent).
        """
        return self.fabric.send(t_ps, src, dst, nbytes, payload, tag, **options)

    def schedule(self, t_ps, port, fn, *args):
        """Call ``fn(*args)`` at ``t_ps`` in this partition (own ``port``: the tie-break key)."""
        self.fabric.schedule(t_ps, port, fn, *args)

    def on_deliver(self, port, fn):
        """Call ``fn(message)`` at each delivery to own ``port`` (``None``: back to polling)."""
        self.fabric.attach(port, on_message=fn)

    def delivered(self):
        """Return and forget the messages delivered to polled ports, in ``(time, src, seq)``."""
        return self.fabric.delivered()

    def run_until(self, t_ps):
        """Run this partition's events up to ``t_ps``, at most the current window's end - 1."""
        self.fabric.run_until(t_ps)

    def attach_model(self, model):
        """Advance ``model`` with this partition, one window per step.

        ``model.advance(until_ps)`` is called once per window and must simulate up to (not
        including) ``until_ps`` from where its last call stopped, interacting with this
        partition only through its methods at the model's simulated times.  If the model has
        ``next_event_ps()`` (its earliest time of activity, or ``None``), windows in which
        nothing happens anywhere are skipped; without it the model is stepped every window.
        Several models of one partition are advanced in the order they were attached, each
        through the whole window, so only the first may call :meth:`run_until`.
        """
        if not callable(getattr(model, "advance", None)):
            raise TypeError(f"a model needs an advance(until_ps) method; "
                            f"{type(model).__name__} has none")
        self._models.append(model)

    # -- the engine side -----------------------------------------------------------------------

    def next_event_ps(self, edge):
        """Return the earliest time this partition may act, ``edge`` if a model cannot say."""
        times = [self.fabric.next_event_time()]
        for model in self._models:
            probe = getattr(model, "next_event_ps", None)
            times.append(edge if probe is None else probe())
        times = [t for t in times if t is not None]
        return max(min(times), edge) if times else None

    def has_opaque_model(self):
        """True when a model cannot tell when it is next active (no ``next_event_ps``)."""
        return any(getattr(m, "next_event_ps", None) is None for m in self._models)

    def step(self, start, end):
        """Run the window ``[start, end)``: models first, then the fabric; return crossings."""
        fabric = self.fabric
        fabric.floor_ps = start
        fabric.horizon_ps = end - 1
        for model in self._models:
            model.advance(end)
        fabric.run_until(end - 1)
        return fabric.take_crossings()

    def inject(self, items):
        """Schedule the crossings other partitions produced (sorted by their key)."""
        self.fabric.inject(items)

    def settle(self, t_ps):
        """Stand at ``t_ps`` after the machine ran every event up to it."""
        self.fabric.horizon_ps = t_ps
        if t_ps > self.fabric.now:
            self.fabric.run_until(t_ps)
        self.fabric.floor_ps = t_ps

    def __repr__(self):
        return (f"Partition({self.index}, ports {self.ports.start}..{self.ports.stop - 1}, "
                f"now={self.now} ps)")
