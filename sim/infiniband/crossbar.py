"""The packet rules of the flat switch, shared by :class:`~.fabric.Fabric` (the whole switch)
and :class:`peach2.sim.machine.PartitionFabric` (one partition's share of it).

:class:`Crossbar` holds the HCA transmit FIFOs, the uplinks and their credits, the switch input
buffers, the round-robin outputs, the downlinks and their credits and the receive drains, and
runs the model described in :mod:`.fabric`.  Two steps are left to a subclass, the only places
where the whole switch and one partition of it differ:

- :meth:`Crossbar._to_switch`: where a packet goes once it has started leaving its HCA;
- :meth:`Crossbar._return_credits`: how the input-buffer credits a forwarded packet frees get
  back to its sender;

and :meth:`Crossbar._not_before`, the earliest time :meth:`Crossbar.send` accepts.
"""

import math
from collections import deque
from fractions import Fraction

from .events import ARRIVE, DECIDE, DELIVER, EventQueue
from .message import Message
from .packet import Packet
from .params import Params

__all__ = ["Crossbar", "time_ps"]


class Crossbar:
    """The switch model for ``n_ports`` ports (at least 2), numbered from 0, with the link,
    header, credit and latency parameters ``params`` (members of those names); a base class.
    """

    def __init__(self, n_ports, params=None):
        if params is None:
            params = Params()
        if not isinstance(params, Params):
            raise TypeError(f"params must be a Params, not {type(params).__name__}")
        self.n_ports = n = n_ports
        self.params = params
        self._events = EventQueue()
        self._src_q = [deque() for _ in range(n)]     # HCA transmit FIFOs
        self._urgent_q = [deque() for _ in range(n)]  # ... for acknowledgements, served first
        self._up_free = [0] * n                        # uplink idle from
        self._up_credits = [params.switch_credits] * n
        self._in_q = [deque() for _ in range(n)]      # switch input buffers (FIFO)
        self._heads = [set() for _ in range(n)]       # per output: inputs whose head is for it
        self._down_free = [0] * n                      # switch output idle from
        self._down_credits = [params.hca_credits] * n
        self._rr = [n - 1] * n                          # last input served, per output
        self._rx_free = [0] * n                         # destination drain busy until
        self._drain = [None] * n                        # ps per wire byte of a slow receiver
        self._on_packet = [None] * n
        self._on_message = [None] * n
        self._wakes = set()                             # pending (kind, port, time) decisions
        self._seq = [0] * n                             # message sequence per source port
        self._delivered = []
        self._serialize = {}                            # wire bytes -> ps (Params' is slow)
        #: ``on_wire(link, port, start_ps, end_ps, packet)`` (optional) is told of every
        #: packet put on a link this model runs: ``link`` ``"up"`` (HCA ``port`` to the
        #: switch) or ``"down"`` (the switch to HCA ``port``), on the wire from ``start_ps``
        #: to ``end_ps``.  ``on_delivered(message)`` (optional) is told of every message
        #: delivered to a port this model runs.  Both only watch (a utilisation trace).
        self.on_wire = None
        self.on_delivered = None

    # -- time ------------------------------------------------------------------------------

    @property
    def now(self):
        """Current simulated time in picoseconds."""
        return self._events.now

    def next_event_time(self):
        """Return the time of the next pending event, or ``None`` when nothing is pending."""
        return self._events.next_time()

    # -- what callers attach ---------------------------------------------------------------------

    def attach(self, port, on_packet=None, on_message=None):
        """Route arrivals at ``port`` to callbacks instead of :meth:`delivered`.

        ``on_packet(t_ps, packet)`` runs when a packet has arrived (last bit plus
        ``hca_rx_ps``) and may return the time its buffer is drained (e.g. when its DMA write
        completes; ``None`` means at once).  ``on_message(message)`` runs at delivery.
        Either may call :meth:`send` and :meth:`schedule` for times not before ``t_ps``.
        """
        self._check_own(port, "port")
        self._on_packet[port] = on_packet
        self._on_message[port] = on_message

    def set_drain_rate(self, port, bytes_per_s):
        """Make the HCA on ``port`` drain received packets at ``bytes_per_s`` wire bytes/s.

        ``None`` restores the default, an HCA that keeps up with the link.  Ignored for a port
        whose ``on_packet`` handler returns drain times.
        """
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
        self._events.push(time_ps(t_ps, "t_ps"), DELIVER, port, fn, *args)

    # -- sending and collecting ------------------------------------------------------------------

    def send(self, t_ps, src, dst, nbytes, payload=None, tag=None, *, first_extra=0,
             last_extra=0, ready_ps=None, urgent=False):
        """Hand a message of ``nbytes`` data bytes from ``src`` to ``dst`` at ``t_ps``.

        ``first_extra`` / ``last_extra`` add header bytes to the first / last packet (RETH of an
        RDMA write, immediate data, AETH of an acknowledgement).  ``ready_ps`` optionally gives,
        per packet, the time its data is in the HCA (e.g. DMA read completions): a packet starts
        no earlier than ``max(t_ps, ready_ps[k]) + hca_tx_ps``.  An ``urgent`` message (an
        acknowledgement) overtakes the packets of ordinary messages still queued at the source
        HCA; urgent messages keep their order among themselves.  Returns the :class:`Message`.

        Raises ``ValueError`` for an unknown port, ``src == dst``, a negative or too large
        size, or a time before :attr:`now`; a refused message changes nothing.
        """
        p = self.params
        t_ps = time_ps(t_ps, "t_ps")
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
            ready_ps = [time_ps(t, "ready_ps") for t in ready_ps]
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
        """Return and forget the messages delivered so far, in ``(time, src, seq)`` order."""
        out, self._delivered = self._delivered, []
        return out

    def credits(self, port):
        """Return ``(uplink, downlink)`` credits now free at ``port``'s two receive buffers."""
        self._check_own(port, "port")
        return self._up_credits[port], self._down_credits[port]

    # -- what a subclass decides -------------------------------------------------------------------

    def _not_before(self, t_ps):
        """Refuse a message handed over at ``t_ps``, a time already past."""
        raise NotImplementedError

    def _to_switch(self, port, pkt, now):
        """``pkt`` started leaving HCA ``port`` at ``now``: bring it to the switch."""
        raise NotImplementedError

    def _return_credits(self, port, out, pkt, now, end):
        """``pkt`` of input ``port`` left the switch for ``out`` from ``now`` to ``end``: give
        its input-buffer credits back to the sender."""
        raise NotImplementedError

    # -- the model -----------------------------------------------------------------------------

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
        if self.on_wire is not None:
            self.on_wire("up", port, now, end, pkt)
        self._to_switch(port, pkt, now)
        if self._src_q[port] or self._urgent_q[port]:
            self._wake(self._try_tx, port, end)

    def _switch_in(self, pkt):
        q = self._in_q[pkt.src]
        pkt.eligible_ps = self.now + self.params.switch_ps
        q.append(pkt)
        if q[0] is pkt:
            self._heads[pkt.dst].add(pkt.src)
            self._wake(self._try_out, pkt.dst, pkt.eligible_ps)

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
        if self.on_wire is not None:
            self.on_wire("down", out, now, end, pkt)
        self._return_credits(chosen, out, pkt, now, end)
        self._events.push(end + self.params.cable_ps + self.params.hca_rx_ps, ARRIVE, out,
                          self._hca_in, pkt)
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
            t_free = now if t_free is None else time_ps(t_free, "drain time")
        elif self._drain[port] is not None:
            start = max(now, self._rx_free[port])
            t_free = start + math.ceil(pkt.wire_bytes * self._drain[port])
        else:
            t_free = now
        t_free = max(t_free, now, self._rx_free[port])    # the buffer drains in order
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
        if self.on_delivered is not None:
            self.on_delivered(m)
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

    def _check_port(self, port, name):
        if isinstance(port, bool) or not isinstance(port, int):
            raise ValueError(f"{name} must be a port number, not {port!r}")
        if not 0 <= port < self.n_ports:
            raise ValueError(f"{name} = {port} is not a port of this fabric "
                             f"(0..{self.n_ports - 1})")

    def _check_own(self, port, name):
        """Refuse a port this model does not run (every port, unless a subclass says)."""
        self._check_port(port, name)


def time_ps(t, name):
    """Return ``t``, checked to be a non-negative integer number of picoseconds."""
    if isinstance(t, bool) or not isinstance(t, int):
        raise ValueError(f"{name} must be an integer number of picoseconds, not {t!r}")
    if t < 0:
        raise ValueError(f"{name} must not be negative ({t} ps)")
    return t
