"""What crosses between partitions: plain tuples, cheap to pickle, with a total order.

Every crossing starts with ``(stamp, origin port, origin sequence)``: the picosecond it takes
effect at the receiving partition, the port whose partition produced it, and that port's
count of crossings so far.  The three are unique, so sorting by them (:data:`KEY`) orders any
set of crossings the same way whatever rank produced or received them.  Field 4 is the port
whose partition receives it (:func:`destination`).

- packet: ``(stamp, src, oseq, PACKET, dst, seq, index, count, offset, payload_bytes,
  packet_bytes, wire_bytes, blocks, ready_ps, tx_ps, meta)``; ``stamp`` is the time the switch
  may forward it, ``tx_ps`` when its first bit left the HCA, ``meta`` is ``(nbytes, payload,
  tag, t_send_ps)`` on a message's first packet (the payload travels once) and ``None`` after;
- credit: ``(stamp, out, oseq, CREDIT, input, blocks)``: ``blocks`` of switch input buffer
  ``input`` freed by output ``out``, back at the sender at ``stamp``.
"""

from operator import itemgetter

from peach2.sim.infiniband import Message, Packet

__all__ = ["PACKET", "CREDIT", "KEY", "destination", "packet_fields", "unpack_packet"]

PACKET = 0
CREDIT = 1
KEY = itemgetter(0, 1, 2)


def destination(item):
    """Return the port whose partition receives crossing ``item``."""
    return item[4]


def packet_fields(pkt, tx_ps):
    """Return the fields after the key of packet ``pkt``, whose first bit left at ``tx_ps``."""
    m = pkt.message
    meta = (m.nbytes, m.payload, m.tag, m.t_send_ps) if pkt.first else None
    return (PACKET, m.dst, m.seq, pkt.index, pkt.count, pkt.offset, pkt.payload_bytes,
            pkt.packet_bytes, pkt.wire_bytes, pkt.blocks, pkt.ready_ps, tx_ps, meta)


def unpack_packet(item, incoming, serialize_ps):
    """Rebuild the :class:`Packet` of crossing ``item`` at its receiver.

    ``incoming`` maps ``(src, seq)`` to the :class:`Message` being received (a copy of the
    sender's, made at its first packet and forgotten at its last); ``serialize_ps(wire_bytes)``
    gives a packet's time on the wire.
    """
    (stamp, src, _oseq, _kind, dst, seq, index, count, offset, payload_bytes, packet_bytes,
     wire_bytes, blocks, ready_ps, tx_ps, meta) = item
    key = (src, seq)
    if index == 0:
        nbytes, payload, tag, t_send = meta
        incoming[key] = Message(src, dst, nbytes, payload, tag, seq, t_send,
                                t_first_wire_ps=tx_ps)
    m = incoming[key]
    if index == count - 1:
        m.t_last_wire_ps = tx_ps + serialize_ps(wire_bytes)
        del incoming[key]
    pkt = Packet(m, index, count, offset, payload_bytes, packet_bytes, wire_bytes, blocks,
                 ready_ps)
    pkt.eligible_ps = stamp
    return pkt
