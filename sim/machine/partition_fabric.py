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

import math
from collections import deque
from fractions import Fraction

from peach2.sim.infiniband import Message, Packet, Params
from peach2.sim.infiniband.events import ARRIVE, DECIDE, DELIVER, EventQueue

from .crossing import CREDIT, PACKET, packet_fields, unpack_packet
from .layout import Layout

__all__ = ["PartitionFabric"]


class PartitionFabric:
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
        params = Params() if params is None else params
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {type(params).__name__}")
        self.layout = layout
        self.index = index
        self.n_ports = n = layout.n_ports
        self.params = params
        self.horizon_ps = None
        self.floor_ps = 0
        self._ran_to = None                            # last time run_until reached
        self._owner = layout.owners()
        self._events = EventQueue()
        self._src_q = [deque() for _ in range(n)]     # HCA transmit FIFOs (own ports)
        self._urgent_q = [deque() for _ in range(n)]  # ... for acknowledgements, served first
        self._up_free = [0] * n
        self._up_credits = [params.switch_credits] * n
        self._in_q = [deque() for _ in range(n)]      # input i -> this partition's outputs
        self._heads = [set() for _ in range(n)]       # per output: inputs whose head is for it
        self._down_free = [0] * n
        self._down_credits = [params.hca_credits] * n
        self._rr = [n - 1] * n
        self._rx_free = [0] * n
        self._drain = [None] * n
        self._on_packet = [None] * n
        self._on_message = [None] * n
        self._wakes = set()
        self._seq = [0] * n                            # message sequence per source port
        self._oseq = [0] * n                           # crossing sequence per origin port
        self._delivered = []
        self._outbox = []
        self._incoming = {}                            # (src, seq) -> Message arriving here
        self._serialize = {}                           # wire bytes -> ps (Params' is slow)
        self._lookahead = params.cable_ps + params.switch_ps

    # -- time ------------------------------------------------------------------------------

    @property
    def now(self):
        """Current simulated time in picoseconds."""
        return self._events.now

    def lookahead_ps(self):
        """Shortest time from an event here to its effect in another partition."""
        return self._lookahead

    def next_event_time(self):
        """Return the time of the next pending event, or ``None``."""
        return self._events.next_time()

    def run_until(self, t_ps):
        """Advance to ``t_ps``, running every event at or before it (within the window)."""
        t_ps = _time(t_ps, "t_ps")
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

    # -- what callers attach ----------------------------------------------------------------

    def attach(self, port, on_packet=None, on_message=None):
        """Route arrivals at ``port`` to callbacks, as :meth:`Fabric.attach` does."""
        self._check_own(port, "port")
        self._on_packet[port] = on_packet
        self._on_message[port] = on_message

    def set_drain_rate(self, port, bytes_per_s):
        """Make the HCA on ``port`` drain at ``bytes_per_s`` wire bytes/s (``None``: at once)."""
        self._check_own(port, "port")
        if bytes_per_s is None:
            self._drain[port] = None
            return
        if isinstance(bytes_per_s, bool) or not isinstance(bytes_per_s, (int, float)) \
                or not math.isfinite(bytes_per_s) or bytes_per_s <= 0:
            raise ValueError(f"drain rate must be a positive number of bytes/s, "
                             f"not {bytes_per_s!r}")
        self._drain[port] = Fraction(10 ** 12) / Fraction(str(bytes_per_s))

    def schedule(self, t_ps, port, fn, *args):
        """Call ``fn(*args)`` at ``t_ps`` (after arrivals and decisions at that picosecond)."""
        self._check_own(port, "port")
        self._events.push(self._not_before(_time(t_ps, "t_ps")), DELIVER, port, fn, *args)

    # -- sending and collecting ---------------------------------------------------------------

    def send(self, t_ps, src, dst, nbytes, payload=None, tag=None, *, first_extra=0,
             last_extra=0, ready_ps=None, urgent=False):
        """Hand a message from own port ``src`` to any port ``dst``; see :meth:`Fabric.send`."""
        p = self.params
        t_ps = _time(t_ps, "t_ps")
        self._check_own(src, "src")
        self._check_port(dst, "dst")
        if src == dst:
            raise ValueError(f"src and dst are both port {src}: a loopback never crosses "
                             f"the switch")
        if isinstance(nbytes, bool) or not isinstance(nbytes, int):
            raise ValueError(f"nbytes must be an integer, not {nbytes!r}")
        if nbytes < 0:
            raise ValueError(f"message size must not be negative ({nbytes} bytes)")
        if nbytes > p.max_message_bytes:
            raise ValueError(f"message of {nbytes} bytes exceeds the maximum "
                             f"{p.max_message_bytes} (Params.max_message_bytes)")
        for name, extra in (("first_extra", first_extra), ("last_extra", last_extra)):
            if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {extra!r}")
        self._not_before(t_ps)
        count = max(1, -(-nbytes // p.mtu))
        if ready_ps is not None:
            ready_ps = [_time(t, "ready_ps") for t in ready_ps]
            if len(ready_ps) != count:
                raise ValueError(f"ready_ps has {len(ready_ps)} times for {count} packets")
        largest = p.packet_bytes(min(nbytes, p.mtu), first_extra + last_extra)
        if p.blocks(largest) > min(p.switch_credits, p.hca_credits):
            raise ValueError(f"a packet of {largest} bytes needs more credits than a "
                             f"receive buffer holds")
        message = Message(src, dst, nbytes, payload, tag, self._seq[src], t_ps)
        self._seq[src] += 1
        packets = []
        for k in range(count):
            size = min(p.mtu, nbytes - k * p.mtu)
            extra = (first_extra if k == 0 else 0) + (last_extra if k == count - 1 else 0)
            pbytes = p.packet_bytes(size, extra)
            ready = t_ps if ready_ps is None else max(t_ps, ready_ps[k])
            packets.append(Packet(message, k, count, k * p.mtu, size, pbytes,
                                  pbytes + p.delimiter_bytes, p.blocks(pbytes),
                                  ready + p.hca_tx_ps))
        self._events.push(t_ps, ARRIVE, src, self._inject, packets, bool(urgent))
        return message

    def delivered(self):
        """Return and forget the messages delivered here so far, in ``(time, src, seq)`` order."""
        out, self._delivered = self._delivered, []
        return out

    def credits(self, port):
        """Return ``(uplink, downlink)`` credits now free at own ``port``'s receive buffers."""
        self._check_own(port, "port")
        return self._up_credits[port], self._down_credits[port]

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

    # -- the model (as Fabric, but for the crossings) -------------------------------------------

    def _inject(self, packets, urgent):
        src = packets[0].src
        (self._urgent_q if urgent else self._src_q)[src].extend(packets)
        self._wake(self._try_tx, src, self.now)

    def _wake(self, fn, port, t):
        key = (fn.__name__, port, t)
        if key not in self._wakes:
            self._wakes.add(key)
            self._events.push(t, DECIDE, port, self._woken, key, fn, port)

    def _woken(self, key, fn, port):
        self._wakes.discard(key)
        fn(port)

    def _try_tx(self, port):
        now = self.now
        if now < self._up_free[port]:
            self._wake(self._try_tx, port, self._up_free[port])
            return
        q = pkt = soonest = None
        for candidates in (self._urgent_q[port], self._src_q[port]):
            if candidates:
                head = candidates[0]
                if head.ready_ps <= now:
                    q, pkt = candidates, head
                    break
                soonest = head.ready_ps if soonest is None else min(soonest, head.ready_ps)
        if pkt is None:
            if soonest is not None:
                self._wake(self._try_tx, port, soonest)
            return
        if self._up_credits[port] < pkt.blocks:
            return                                   # a credit return wakes us
        q.popleft()
        self._up_credits[port] -= pkt.blocks
        end = now + self._serialize_ps(pkt.wire_bytes)
        self._up_free[port] = end
        m = pkt.message
        if pkt.first:
            m.t_first_wire_ps = now
        if pkt.last:
            m.t_last_wire_ps = end
        if self._owner[m.dst] == self.index:
            self._events.push(now + self.params.cable_ps, ARRIVE, port, self._switch_in, pkt)
        else:
            self._cross(now + self._lookahead, port, *packet_fields(pkt, now))
        if self._src_q[port] or self._urgent_q[port]:
            self._wake(self._try_tx, port, end)

    def _switch_in(self, pkt):
        q = self._in_q[pkt.src]
        pkt.eligible_ps = self.now + self.params.switch_ps
        q.append(pkt)
        if q[0] is pkt:
            self._heads[pkt.dst].add(pkt.src)
            self._wake(self._try_out, pkt.dst, pkt.eligible_ps)

    def _switch_arrive(self, pkt):
        # a packet from another partition's input, at the time it may be forwarded
        q = self._in_q[pkt.src]
        q.append(pkt)
        if q[0] is pkt:
            self._heads[pkt.dst].add(pkt.src)
            self._wake(self._try_out, pkt.dst, self.now)

    def _try_out(self, out):
        now = self.now
        if now < self._down_free[out]:
            self._wake(self._try_out, out, self._down_free[out])
            return
        n = self.n_ports
        credits = self._down_credits[out]
        chosen = soonest = None
        last = self._rr[out]
        # the inputs whose head packet is for ``out``, in round-robin order after the last one
        for i in sorted(self._heads[out], key=lambda i: (i - last - 1) % n):
            head = self._in_q[i][0]
            if head.eligible_ps > now:
                soonest = head.eligible_ps if soonest is None else min(soonest, head.eligible_ps)
            elif head.blocks <= credits:
                chosen = i
                break
        if chosen is None:
            if soonest is not None:
                self._wake(self._try_out, out, soonest)
            return                                   # else a credit return wakes us
        pkt = self._in_q[chosen].popleft()
        self._heads[out].discard(chosen)
        if self._in_q[chosen]:
            self._heads[self._in_q[chosen][0].dst].add(chosen)
        self._rr[out] = chosen
        self._down_credits[out] -= pkt.blocks
        end = now + self._serialize_ps(pkt.wire_bytes)
        self._down_free[out] = end
        cable = self.params.cable_ps
        if self._owner[chosen] == self.index:
            self._events.push(end + cable, ARRIVE, chosen, self._uplink_credit, chosen,
                              pkt.blocks)
        else:
            self._cross(max(end + cable, now + self._lookahead), out, CREDIT, chosen,
                        pkt.blocks)
        self._events.push(end + cable + self.params.hca_rx_ps, ARRIVE, out, self._hca_in, pkt)
        q = self._in_q[chosen]
        if q:
            self._wake(self._try_out, q[0].dst, max(now, q[0].eligible_ps))
        self._wake(self._try_out, out, end)

    def _uplink_credit(self, port, blocks):
        self._up_credits[port] += blocks
        assert self._up_credits[port] <= self.params.switch_credits
        self._wake(self._try_tx, port, self.now)

    def _hca_in(self, pkt):
        port = pkt.dst
        now = self.now
        handler = self._on_packet[port]
        if handler is not None:
            t_free = handler(now, pkt)
            t_free = now if t_free is None else _time(t_free, "drain time")
        elif self._drain[port] is not None:
            start = max(now, self._rx_free[port])
            t_free = start + math.ceil(pkt.wire_bytes * self._drain[port])
        else:
            t_free = now
        t_free = max(t_free, now, self._rx_free[port])
        self._rx_free[port] = t_free
        self._events.push(t_free + self.params.cable_ps, ARRIVE, port, self._downlink_credit,
                          port, pkt.blocks)
        m = pkt.message
        m.packet_times.append(t_free)
        if pkt.last:
            self._events.push(t_free, DELIVER, m.src, self._deliver, m, order=m.seq)

    def _downlink_credit(self, port, blocks):
        self._down_credits[port] += blocks
        assert self._down_credits[port] <= self.params.hca_credits
        self._wake(self._try_out, port, self.now)

    def _deliver(self, m):
        m.t_deliver_ps = self.now
        handler = self._on_message[m.dst]
        if handler is not None:
            handler(m)
        elif self._on_packet[m.dst] is None:
            self._delivered.append(m)

    def _serialize_ps(self, wire_bytes):
        ps = self._serialize.get(wire_bytes)
        if ps is None:
            ps = self._serialize[wire_bytes] = self.params.serialize_ps(wire_bytes)
        return ps

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


def _time(t, name):
    if isinstance(t, bool) or not isinstance(t, int):
        raise ValueError(f"{name} must be an integer number of picoseconds, not {t!r}")
    if t < 0:
        raise ValueError(f"{name} must not be negative ({t} ps)")
    return t
