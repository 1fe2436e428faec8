"""A message handed to the fabric, and what became of it."""

from dataclasses import dataclass, field

__all__ = ["Message"]


@dataclass(eq=False)
class Message:
    """One message from ``src`` to ``dst``, cut into MTU packets by the fabric.

    The fabric fills the timing fields as the message travels; :attr:`t_deliver_ps` is set when
    its last packet has been drained at the destination HCA.  Messages are delivered in the
    order ``(t_deliver_ps, src, seq)``.

    Members
    -------
    src, dst : int
        Source and destination ports.
    nbytes : int
        Data bytes (headers excluded).
    payload : object
        Whatever the sender attached; the fabric never looks inside.
    tag : object
        A label for the caller's bookkeeping.
    seq : int
        Per-source sequence number, in the order ``send`` was called.
    t_send_ps : int
        Time the message was handed to the source HCA's transmit side.
    t_first_wire_ps : int or None
        Time its first packet's first bit left the source HCA.
    t_last_wire_ps : int or None
        Time its last packet's last bit left the source HCA.
    t_deliver_ps : int or None
        Time its last packet was drained at the destination (the delivery time).
    packet_times : list of int
        Drain time of each packet at the destination, in packet order.
    """

    src: int
    dst: int
    nbytes: int
    payload: object = None
    tag: object = None
    seq: int = 0
    t_send_ps: int = 0
    t_first_wire_ps: int = None
    t_last_wire_ps: int = None
    t_deliver_ps: int = None
    packet_times: list = field(default_factory=list)

    @property
    def delivered(self):
        """True once the last packet has been drained at the destination."""
        return self.t_deliver_ps is not None

    @property
    def latency_ps(self):
        """Delivery time minus send time, or ``None`` before delivery."""
        return None if self.t_deliver_ps is None else self.t_deliver_ps - self.t_send_ps

    def key(self):
        """Return the delivery order key ``(t_deliver_ps, src, seq)``."""
        return (self.t_deliver_ps, self.src, self.seq)
