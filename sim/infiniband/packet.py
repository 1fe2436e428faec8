"""One InfiniBand packet of a message, as the fabric moves it."""

__all__ = ["Packet"]


class Packet:
    """An MTU-sized piece of a :class:`~peach2.sim.infiniband.message.Message`.

    Receive handlers get packets (``Fabric.attach(port, on_packet=...)``); they read the data
    slice ``message.payload[offset:offset + payload_bytes]`` when the payload is bytes-like.

    Members
    -------
    message : Message
        The message this packet belongs to.
    index, count : int
        Position of the packet in its message and the message's number of packets.
    offset, payload_bytes : int
        Where this packet's data starts in the message, and how many data bytes it carries.
    packet_bytes : int
        Bytes from LRH to VCRC (headers, padded data, CRCs): what credits are counted on.
    wire_bytes : int
        ``packet_bytes`` plus the start/end delimiters: what serialisation is timed on.
    blocks : int
        Flow-control credits (64-byte blocks) the packet needs at the next receiver.
    ready_ps : int
        Earliest time its first bit may leave the source HCA.
    eligible_ps : int
        Earliest time the switch may forward it (head arrival plus switch latency).
    """

    __slots__ = ("message", "index", "count", "offset", "payload_bytes", "packet_bytes",
                 "wire_bytes", "blocks", "ready_ps", "eligible_ps")

    def __init__(self, message, index, count, offset, payload_bytes, packet_bytes, wire_bytes,
                 blocks, ready_ps):
        self.message = message
        self.index = index
        self.count = count
        self.offset = offset
        self.payload_bytes = payload_bytes
        self.packet_bytes = packet_bytes
        self.wire_bytes = wire_bytes
        self.blocks = blocks
        self.ready_ps = ready_ps
        self.eligible_ps = None

    @property
    def first(self):
        """True for the first packet of its message."""
        return self.index == 0

    @property
    def last(self):
        """True for the last packet of its message."""
        return self.index == self.count - 1

    @property
    def src(self):
        """Source port."""
        return self.message.src

    @property
    def dst(self):
        """Destination port."""
        return self.message.dst

    def data(self):
        """Return this packet's slice of the message payload (bytes-like payloads only)."""
        payload = self.message.payload
        return bytes(payload[self.offset:self.offset + self.payload_bytes])

    def __repr__(self):
        m = self.message
        return (f"Packet({m.src}->{m.dst} seq={m.seq} {self.index + 1}/{self.count} "
                f"{self.payload_bytes}B)")
