"""The inline put descriptor, described once.

An inline put carries up to :data:`DATA_BYTES` bytes of data inside its descriptor, as the K
computer's Tofu carries up to 32 bytes in its "Piggy Back RDMA", and is written by software
straight into the chip, as Tofu's "Direct Descriptor" is written into eight consecutive 64-bit
registers (004, "The Design of MPI Communication Facility for K computer", section 5; 32 bytes,
section 6.1): no descriptor fetch and no data read, the two host round trips a DMA put pays before
a byte moves.

A put is **one 64-byte memory write** into BAR 4 (:data:`~peach2.params.PUT_BAR`) at a
64-byte aligned offset: what an x86 write-combining buffer sends for a 64-byte store sequence
ended by a fence.  Every offset of the window feeds the same queue, in arrival order.
Little-endian; byte ``k`` of the descriptor is bits ``[8k+7:8k]`` of :data:`PutDescriptor`.

Everything about the format lives in :data:`FIELDS` and :data:`CONTROL_BITS`; the gateware
layout, the driver's :func:`pack` and the table in ``docs/put.md`` (:func:`to_markdown`) are
made from them.
"""

import struct

from amaranth.lib import data

from ..dma.descriptor import MAGIC, format_table

__all__ = ["FIELDS", "CONTROL_BITS", "CONTROL_RESERVED", "MAGIC", "PUT_BYTES", "DATA_BYTES",
           "PutDescriptor", "pack", "unpack", "to_markdown"]

#: Bytes of a put descriptor (one write-combined store sequence) and of its data field.
PUT_BYTES, DATA_BYTES = 64, 32

#: (name, byte offset, bytes, description).
FIELDS = (
    ("dst",       0x00, 8, "TCA address of the first destination byte, routed like a DMA "
                           "write (the local host through N after offset subtraction, or a "
                           "remote node through E/W/S); any byte alignment; the put must not "
                           "cross a 4 KiB boundary"),
    ("seq_addr",  0x08, 8, "TCA address of the 4-byte completion write (with `seq`; routed "
                           "like `dst`); 4-byte aligned"),
    ("length",    0x10, 4, f"bytes of `data` to send, 1 .. {DATA_BYTES}"),
    ("control",   0x14, 4, "flags, see the control word table"),
    ("seq_value", 0x18, 4, "value of the completion write"),
    ("reserved",  0x1C, 4, "must be 0"),
    ("data",      0x20, DATA_BYTES, "the data: byte 0 goes to `dst`; bytes past `length` are "
                                    "ignored"),
)

#: Bits of the control word: (name, lsb, width, description).
CONTROL_BITS = (
    ("magic", 0, 8, f"must be {MAGIC:#04x} (as a DMA descriptor's)"),
    ("irq",   9, 1, "raise an MSI (PUT_CFG.msi_vector) once the put has left"),
    ("seq",  10, 1, "after the data, write `seq_value` (4 bytes) to `seq_addr`"),
)

#: Control bits that must be 0 (bit 8 too: a put has no extension).
CONTROL_RESERVED = 0xFFFFF900

#: The descriptor as the gateware holds it.
PutDescriptor = data.StructLayout({name: 8 * size for name, _, size, _ in FIELDS})


def pack(*, dst, data, seq_addr=None, seq_value=0, irq=False, length=None, control=None,
         reserved=0):
    """Return the 64 bytes of an inline put of ``data`` (1 .. 32 bytes) to ``dst``.

    With ``seq_addr`` the put ends with a completion write of ``seq_value``.  ``length``,
    ``control`` and ``reserved`` override what ``data`` and the flags give (tests build malformed
    puts with them); ``data`` may then be empty or up to :data:`DATA_BYTES` bytes.
    """
    data_ = bytes(data)
    if length is None:
        length = len(data_)
        if not 1 <= length <= DATA_BYTES:
            raise ValueError(f"an inline put carries 1 .. {DATA_BYTES} bytes, not {length}")
    if len(data_) > DATA_BYTES:
        raise ValueError(f"the data field holds {DATA_BYTES} bytes, not {len(data_)}")
    if control is None:
        control = MAGIC | (int(bool(irq)) << 9) | (int(seq_addr is not None) << 10)
    values = {"dst": dst, "seq_addr": seq_addr or 0, "length": length, "control": control,
              "seq_value": seq_value, "reserved": reserved}
    out = bytearray(PUT_BYTES)
    for name, off, size, _ in FIELDS[:-1]:
        v = int(values[name])
        if not 0 <= v < (1 << (8 * size)):
            raise ValueError(f"put field {name} ({size} bytes) cannot hold {v:#x}")
        struct.pack_into("<Q" if size == 8 else "<I", out, off, v)
    out[0x20:0x20 + len(data_)] = data_
    return bytes(out)


def unpack(raw):
    """Return a dict of the fields of a 64-byte put descriptor, control bits included."""
    raw = bytes(raw)
    if len(raw) != PUT_BYTES:
        raise ValueError(f"a put descriptor is {PUT_BYTES} bytes, not {len(raw)}")
    d = {name: int.from_bytes(raw[off:off + size], "little")
         for name, off, size, _ in FIELDS[:-1]}
    d["data"] = raw[0x20:0x20 + DATA_BYTES]
    for name, lsb, width, _ in CONTROL_BITS:
        d[name] = (d["control"] >> lsb) & ((1 << width) - 1)
    return d


def to_markdown():
    """Return the byte-by-byte description of the format (for ``docs/put.md``)."""
    return format_table(FIELDS, CONTROL_BITS, "[8], [31:11]")
