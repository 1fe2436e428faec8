"""What MPI puts on the wire: message kinds in the immediate data, control payloads as bytes.

Every message MPI sends over a queue pair carries 32 bits of immediate data: the communicator
context in the top bit, the kind in the next 3 bits and a 28-bit field below (the tag of an eager
message or a request to send, the receiver's request id on a rendezvous data block).  Control
payloads are real little-endian bytes, sent inline from the CPU and parsed from the receiving
eager buffer:

=========  ==============  ===============================================================
kind       field           payload
=========  ==============  ===============================================================
EAGER      tag             the message itself (lands in an eager buffer)
RTS        tag             sender request id (u32), message size (u64)
CTS        0               sender id (u32), receiver id (u32), target address (u64),
                           rkey (u32), receiver's block size (u64; 0: any)
DATA       receiver id     none: an RDMA write with immediate into the target
=========  ==============  ===============================================================

The context (0: user point-to-point, 1: collectives; see :data:`~.request.P2P`) is matched with
the tag, so a collective's message never matches a user receive nor the reverse, as MPI's
separate collective context of a communicator requires.  Only EAGER and RTS carry one: CTS and
DATA name a request directly.  Context 0 leaves the bit clear, so point-to-point immediate data
is what it was before contexts existed.

MVAPICH2 puts a packet header of a few tens of bytes in front of eager data and sends a
separate FIN after a rendezvous write; here the envelope rides in the immediate data and the
write carries its own notification (write with immediate).  Both cost a few bytes on the wire
and keep the order MPI needs (one reliable-connected queue pair per peer, delivered in order).
"""

import struct

__all__ = ["EAGER", "RTS", "CTS", "DATA", "KINDS", "imm", "split", "context_of", "rts",
           "parse_rts", "cts", "parse_cts", "FIELD_MASK", "CONTEXTS"]

EAGER = 1
RTS = 2
CTS = 3
DATA = 4
KINDS = {EAGER: "EAGER", RTS: "RTS", CTS: "CTS", DATA: "DATA"}

FIELD_MASK = (1 << 28) - 1
CONTEXTS = 2                    # contexts the top bit holds
_MATCHED = (EAGER, RTS)         # the kinds matched to receives, which carry a context

_RTS = struct.Struct("<IQ")
_CTS = struct.Struct("<IIQIQ")


def imm(kind, field=0, context=0):
    """Immediate data for a message of ``kind`` with a 28-bit ``field`` in ``context``."""
    if kind not in KINDS:
        raise ValueError(f"unknown message kind {kind!r}")
    if not 0 <= field <= FIELD_MASK:
        raise ValueError(f"field {field} does not fit 28 bits")
    if context not in range(CONTEXTS) or (context and kind not in _MATCHED):
        raise ValueError(f"context {context!r} on a {KINDS[kind]} message (only EAGER and RTS "
                         f"carry one, 0..{CONTEXTS - 1})")
    return (context << 31) | (kind << 28) | field


def split(value):
    """Return ``(kind, field)`` of immediate data; ``ValueError`` for an unknown kind."""
    kind, field = (value >> 28) & 7, value & FIELD_MASK
    if kind not in KINDS:
        raise ValueError(f"immediate data {value:#x} carries no MPI message kind")
    return kind, field


def context_of(value):
    """Return the communicator context (0 or 1) of immediate data."""
    return value >> 31


def rts(sid, size):
    """Payload of a request to send."""
    return _RTS.pack(sid, size)


def parse_rts(data):
    """Return ``(sid, size)`` from a request to send."""
    return _RTS.unpack(bytes(data[:_RTS.size]))


def cts(sid, rid, target, rkey, block):
    """Payload of a clear to send."""
    return _CTS.pack(sid, rid, target, rkey, block)


def parse_cts(data):
    """Return ``(sid, rid, target, rkey, block)`` from a clear to send."""
    return _CTS.unpack(bytes(data[:_CTS.size]))
