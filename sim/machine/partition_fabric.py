"""One partition's share of the flat InfiniBand switch: the same packet rules as
:class:`peach2.sim.infiniband.Fabric`, cut where partitions meet.

::

    partition A (owns port s)                      partition B (owns port d)
    HCA s --uplink--> [switch input s] ..crossing..> [input FIFO s->B] --+
                          credits <......crossing.....  output d (round robin) --> HCA d

The partition that owns a port owns everything on that port's side of the crossbar: the HCA's
transmit FIFOs, the uplink and its credits (the switch input buffer's free space, as the sender
sees it), the switch output, the downlink and its credits, and the HCA's receive side.  Two
things cross between partitions, each stamped with the time it takes effect:

- a **packet** leaving HCA ``s`` at ``t`` for a port of another partition is handed to that
  partition to be forwarded from ``t + cable_ps + switch_ps`` (cut-through: head at the switch
  plus the switch latency); its output contention is resolved there, where every input meets;
- the **credits** a packet frees when the switch has forwarded it go back to its input's
  partition at ``max(end + cable_ps, start + lookahead)``, where ``start`` / ``end`` are when
  it started and finished leaving the switch.

So nothing one partition does at ``t`` changes another before ``t + lookahead_ps()``, with
``lookahead_ps() = cable_ps + switch_ps`` (115 ns by default), and a window of synchronisation
no longer than that is exact.  With one partition this is :class:`Fabric` event for event.
With several it differs from :class:`Fabric` in two places only, both under contention:

- the switch input FIFO is one FIFO per (input, destination partition): a packet stuck at an
  output of one partition does not block the packets behind it bound for another partition
  (head-of-line blocking stays exact within a partition);
- credits freed by a packet whose input belongs to another partition come back no earlier than
  one lookahead after it started leaving (an MTU packet's own serialisation is longer, so only
  packets below about 400 bytes see a later credit).

What crosses is described in :mod:`.crossing`.
"""

from peach2.sim.infiniband.crossbar import Crossbar, time_ps
from peach2.sim.infiniband.events import ARRIVE, DELIVER

from .crossing import CREDIT, PACKET, packet_fields, unpack_packet
from .layout import Layout

__all__ = ["PartitionFabric"]


class PartitionFabric(Crossbar):
    """The ports of partition ``index`` of ``layout`` and their side of the switch.

    Its public methods are those of :class:`~peach2.sim.infiniband.Fabric`, for the ports it
    owns.  :meth:`run_until` stops at :attr:`horizon_ps`, the last picosecond of the current
    window: what other partitions send for later times is not known before the next exchange.

    Members
    -------
    layout : Layout
        Every partition's ports.
    index : int
        This partition.
    ports : range
        The ports it owns.
    n_ports : int
        Ports on the whole switch.
    params : Params
        Link, header, credit and latency parameters (the same in every partition).
    horizon_ps : int or None
        Latest time :meth:`run_until` may reach; ``None``: unbounded (one partition alone).
    floor_ps : int
        Earliest time :meth:`send` and :meth:`schedule` accept: the current window's start
        (what happens before it has been exchanged already).
    """

    def __init__(self, layout, index, params=None):
        if not isinstance(layout, Layout):
            raise TypeError(f"layout must be a Layout, not {type(layout).__name__}")
        self.ports = layout.ports(index)
        super().__init__(layout.n_ports, params)
        self.layout = layout
        self.index = index
        self.horizon_ps = None
        self.floor_ps = 0
        self._ran_to = None                            # last time run_until reached
        self._owner = layout.owners()
        self._oseq = [0] * self.n_ports                # crossing sequence per origin port
        self._outbox = []
        self._incoming = {}                            # (src, seq) -> Message arriving here
        self._lookahead = self.params.cable_ps + self.params.switch_ps

    # -- time ------------------------------------------------------------------------------

    def lookahead_ps(self):
        """Shortest time from an event here to its effect in another partition."""
        return self._lookahead

    def run_until(self, t_ps):
        """Advance to ``t_ps``, running every event at or before it (within the window)."""
        t_ps = time_ps(t_ps, "t_ps")
        if self.horizon_ps is not None and t_ps > self.horizon_ps:
            raise ValueError(
                f"partition {self.index} cannot run to {t_ps} ps: its window ends at "
                f"{self.horizon_ps + 1} ps, and what other partitions send after that is "
                f"not known before the next exchange")
        self._events.run_until(t_ps)
        self._ran_to = t_ps

    def idle(self):
        """True when nothing is pending here: no event, no crossing to hand over, no packet."""
        return (not self._events and not self._outbox
                and not any(self._src_q) and not any(self._urgent_q) and not any(self._in_q))

    def schedule(self, t_ps, port, fn, *args):
        """Call ``fn(*args)`` at ``t_ps`` (after arrivals and decisions at that picosecond)."""
        self._check_own(port, "port")
        self._events.push(self._not_before(time_ps(t_ps, "t_ps")), DELIVER, port, fn, *args)

    # -- crossings -----------------------------------------------------------------------------

    def take_crossings(self):
        """Return and forget the items produced for other partitions since the last call."""
        out, self._outbox = self._outbox, []
        return out

    def inject(self, items):
        """Schedule items other partitions produced, each at its stamp, in the order given.

        Callers pass them sorted by ``(stamp, origin port, origin sequence)``.  A stamp before
        the next picosecond to run means the window was longer than the lookahead.
        """
        for item in items:
            stamp = item[0]
            if self._ran_to is not None and stamp <= self._ran_to:
                raise RuntimeError(f"item stamped {stamp} ps reached partition {self.index} "
                                   f"at {self.now} ps: the window exceeds the lookahead")
            if item[3] == PACKET:
                pkt = unpack_packet(item, self._incoming, self._serialize_ps)
                self._events.push(stamp, ARRIVE, pkt.src, self._switch_arrive, pkt)
            else:
                self._events.push(stamp, ARRIVE, item[4], self._uplink_credit, item[4], item[5])

    def _cross(self, stamp, origin, *fields):
        self._outbox.append((stamp, origin, self._oseq[origin]) + fields)
        self._oseq[origin] += 1

    # -- the model (Crossbar's, but for the crossings) -------------------------------------------

    def _to_switch(self, port, pkt, now):
        if self._owner[pkt.dst] == self.index:
            self._events.push(now + self.params.cable_ps, ARRIVE, port, self._switch_in, pkt)
        else:
            self._cross(now + self._lookahead, port, *packet_fields(pkt, now))

    def _switch_arrive(self, pkt):
        # a packet from another partition's input, at the time it may be forwarded
        q = self._in_q[pkt.src]
        q.append(pkt)
        if q[0] is pkt:
            self._heads[pkt.dst].add(pkt.src)
            self._wake(self._try_out, pkt.dst, self.now)

    def _return_credits(self, port, out, pkt, now, end):
        cable = self.params.cable_ps
        if self._owner[port] == self.index:
            self._events.push(end + cable, ARRIVE, port, self._uplink_credit, port, pkt.blocks)
        else:
            self._cross(max(end + cable, now + self._lookahead), out, CREDIT, port, pkt.blocks)

    def _not_before(self, t_ps):
        if t_ps < self.now:
            raise ValueError(f"t_ps = {t_ps} is before partition {self.index}'s time "
                             f"{self.now} ps")
        if t_ps < self.floor_ps:
            raise ValueError(f"t_ps = {t_ps} is before partition {self.index}'s window, "
                             f"which starts at {self.floor_ps} ps")
        return t_ps

    def _check_port(self, port, name):
        if isinstance(port, bool) or not isinstance(port, int) \
                or not 0 <= port < self.n_ports:
            raise ValueError(f"{name} = {port!r} is not a port of this switch "
                             f"(0..{self.n_ports - 1})")

    def _check_own(self, port, name):
        self._check_port(port, name)
        if self._owner[port] != self.index:
            raise ValueError(f"{name} = {port} belongs to partition {self._owner[port]}, not "
                             f"to partition {self.index}: use the partition that owns it")
