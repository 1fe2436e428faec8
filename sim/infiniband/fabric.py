"""Packet-level model of one flat InfiniBand switch and the HCA links on its ports.

::

    HCA 0 --cable--> [input buffer 0] --+              +--> [output 0] --cable--> HCA 0
    HCA 1 --cable--> [input buffer 1] --+-- crossbar --+--> [output 1] --cable--> HCA 1
     ...                                 round robin per output, cut-through      ...

A message is cut into MTU packets, each with its header bytes (:class:`Params`).  A packet

1. waits in its source HCA's transmit FIFO until it is ready (``t_send`` or its ``ready_ps``,
   plus ``hca_tx_ps``), the uplink is idle, and the switch input buffer has credits for it;
2. reaches the switch after the cable delay; cut-through: the switch may forward it
   ``switch_ps`` after its head arrived, once it is the oldest packet of its input buffer
   (one FIFO per input, so head-of-line blocking is modelled, as with a single data VL);
3. competes for the output port: packet-by-packet round robin over the inputs whose head
   packet is eligible and fits the downlink's credits (the rule of the VL arbiter in
   Mellanox's model, ``IBVLArb``: round robin over input ports within a VL); two senders into
   one port therefore share it evenly, whatever their message sizes;
4. frees its input-buffer credits when it has left the switch; the credits are back at the
   sender one cable delay later;
5. arrives at the destination HCA (last bit + ``hca_rx_ps``), is drained (at once, at a set
   rate, or when an attached handler says), and returns its credits one cable delay after that.

A message is delivered when its last packet has been drained.  Time is an integer number of
picoseconds; nothing is random, and equal times are ordered as :mod:`.events` states, with
deliveries ordered by ``(time, source port, sequence)``.

Simplified away: virtual lanes other than one data VL (no VL arbitration tables), adaptive
routing, packet loss and link-level retransmission, the bandwidth of flow-control packets and
of clock-compensation skip sequences, and per-QP arbitration inside an HCA (its transmit queue
is one FIFO in hand-over order).
"""

from .crossbar import Crossbar, time_ps
from .events import ARRIVE

__all__ = ["Fabric"]


class Fabric(Crossbar):
    """One flat switch with ``n_ports`` ports, an HCA on each.

    Members
    -------
    n_ports : int
        Number of switch ports (and HCAs), numbered from 0.
    params : Params
        Link, header, credit and latency parameters.
    """

    def __init__(self, n_ports, params=None):
        if isinstance(n_ports, bool) or not isinstance(n_ports, int) or n_ports < 2:
            raise ValueError(f"a fabric needs at least 2 ports, not {n_ports!r}")
        super().__init__(n_ports, params)
        self._in_flight = 0

    # -- time ------------------------------------------------------------------------------

    def run_until(self, t_ps):
        """Advance to ``t_ps``, running every event at or before it."""
        self._events.run_until(time_ps(t_ps, "t_ps"))

    def run(self, limit_ps=None):
        """Run until nothing is left to do (or until ``limit_ps``); return the time reached."""
        return self._events.run(limit_ps)

    def idle(self):
        """True when no event is pending and no message is in flight."""
        return not self._events and self._in_flight == 0

    def lookahead_ps(self):
        """Smallest HCA -> switch -> HCA latency (see :meth:`Params.lookahead_ps`)."""
        return self.params.lookahead_ps()

    def send(self, t_ps, src, dst, nbytes, payload=None, tag=None, **options):
        """Hand a message from ``src`` to ``dst``; see :meth:`Crossbar.send`."""
        message = super().send(t_ps, src, dst, nbytes, payload, tag, **options)
        self._in_flight += 1
        return message

    # -- the whole switch: every packet and credit stays here ---------------------------------------

    def _not_before(self, t_ps):
        if t_ps < self.now:
            raise ValueError(f"t_ps = {t_ps} is before the fabric's time {self.now} ps")

    def _to_switch(self, port, pkt, now):
        self._events.push(now + self.params.cable_ps, ARRIVE, port, self._switch_in, pkt)

    def _return_credits(self, port, out, pkt, now, end):
        self._events.push(end + self.params.cable_ps, ARRIVE, port, self._uplink_credit, port,
                          pkt.blocks)

    def _deliver(self, m):
        self._in_flight -= 1
        super()._deliver(m)
