"""The DMA descriptor format, described once (002 section 3.4, 000 section 2.3).

A descriptor is 32 bytes in host memory, little-endian, 32-byte aligned: source PCIe address,
destination PCIe address, burst length, control word and the pointer to the next descriptor, as
in the paper ("source and destination PCIe addresses and the size, linked by pointers", 32
bytes).  A descriptor whose control word sets ``ext`` is 64 bytes: a 32-byte extension follows
it with the block-stride fields (burst count, source gap, destination gap; 000 section 2.3:
"burst length and gap") and the completion write (sequence number and its address).

Everything about the format lives in :data:`FIELDS` and :data:`CONTROL_BITS`; the gateware
layout :data:`Descriptor`, the driver's :func:`pack`/:func:`unpack` and the table in
``docs/dma.md`` (:func:`to_markdown`) are made from them.

Pointers
--------
A pointer to a descriptor (``CH_HEAD`` and the ``next`` field) is its 32-byte aligned address
with bit 0 set when the descriptor it points to is 64 bytes (``ext``).  The engine fetches
exactly 32 or 64 bytes; a descriptor whose ``ext`` bit disagrees with the pointer's bit 0 is
malformed.  Bits [4:1] of ``next`` must be 0 (the descriptor is malformed otherwise); in
``CH_HEAD`` they announce up to 15 descriptors right after the head (see below).  A 64-byte
descriptor is 64-byte aligned (so that no fetch of it crosses a read-request or 4 KiB
boundary): a pointer with bit 0 and bit 5 set is malformed.

Adjacent runs (block fetch)
---------------------------
``control.adj`` says how many descriptors of the chain follow this one immediately in memory,
each the same size as it and each ``next`` pointing to the one after it (as Xilinx XDMA's
``Nxt_adj``, but counting from this descriptor; for the head the start does it: the most of
``CH_HEAD`` bits [4:1], up to 15, and ``CH_CTRL.adj``, up to 63).  When the engine loads a descriptor, the descriptors known to follow it are the
most of those known to follow the one before it, less one, and its ``adj``; those not fetched yet
are fetched in blocks of up to ``min(MRRS, 512)`` bytes (ending on such a boundary) into the
channel's descriptor ring, without waiting for each to be loaded.  ``adj = 0`` is a scattered chain: ``next`` is followed, one
fetch (one host round trip) per descriptor.  A descriptor inside a run, or with ``adj > 0``, and
without ``end``, must have ``next`` pointing to the descriptor right after it (malformed
otherwise), so a wrong count is caught, not followed.  ``end`` inside a run ends the chain.
"""

import struct

from amaranth.lib import data

__all__ = ["FIELDS", "CONTROL_BITS", "MAGIC", "BASE_BYTES", "EXT_BYTES", "Descriptor",
           "control_bits", "pack", "unpack", "pointer", "to_markdown", "format_table"]

#: Bytes of a descriptor without / with its extension.
BASE_BYTES, EXT_BYTES = 32, 64

#: ``control.magic`` must hold this value (a descriptor read from the wrong address is caught).
MAGIC = 0xD5

#: (name, byte offset, bytes, description).  Offsets 0x00-0x1F are the base descriptor,
#: 0x20-0x3F the extension.
FIELDS = (
    ("src",       0x00, 8, "PCIe address of the first source byte: local memory read through "
                           "port N (host or GPU); any byte alignment"),
    ("dst",       0x08, 8, "TCA address of the first destination byte (routed by the route "
                           "table: the local host through N after offset subtraction, or a "
                           "remote node through E/W/S); any byte alignment"),
    ("length",    0x10, 4, "bytes per burst, 1 .. 2^32-1 (0 is malformed); without `ext` "
                           "the whole transfer"),
    ("control",   0x14, 4, "flags, see the control word table"),
    ("next",      0x18, 8, "pointer to the next descriptor (bit 0: it is 64 bytes); ignored "
                           "when `control.end` is set and in register mode"),
    ("count",     0x20, 4, "bursts, 1 .. 2^32-1 (0 is malformed)"),
    ("src_gap",   0x24, 4, "source bytes skipped after each burst (source stride = "
                           "length + src_gap)"),
    ("dst_gap",   0x28, 4, "destination bytes skipped after each burst"),
    ("seq_value", 0x2C, 4, "value of the completion write"),
    ("seq_addr",  0x30, 8, "TCA address of the 4-byte completion write (routed like `dst`); "
                           "4-byte aligned"),
    ("reserved",  0x38, 8, "must be 0"),
)

#: Bits of the control word: (name, lsb, width, description).
CONTROL_BITS = (
    ("magic", 0, 8, f"must be {MAGIC:#04x}"),
    ("ext",   8, 1, "a 32-byte extension follows (block-stride, completion write)"),
    ("irq",   9, 1, "raise the channel's MSI (CH_CFG.msi_vector) when this descriptor is done"),
    ("seq",  10, 1, "after the data, write `seq_value` (4 bytes) to `seq_addr`; needs `ext`"),
    ("end",  11, 1, "last descriptor of the chain"),
    ("adj",  12, 8, "descriptors that follow this one immediately in memory, each of its size "
                    "and each `next` pointing to the one after it (0 .. 255; see \"Adjacent "
                    "runs\"); ignored in register mode"),
)

#: Control bits that must be 0.
CONTROL_RESERVED = 0xFFF00000

#: The 64-byte descriptor as the gateware holds it (base and extension, little-endian bit order:
#: byte k of the descriptor is bits [8k+7:8k]).
Descriptor = data.StructLayout({
    name: 8 * size for name, _, size, _ in FIELDS
})

_FMT = {4: "I", 8: "Q"}
_CONTROL_AT = {name: (lsb, width) for name, lsb, width, _ in CONTROL_BITS}


def control_bits(value, name):
    """The control word field ``name`` (:data:`CONTROL_BITS`) of ``value``, in the gateware."""
    lsb, width = _CONTROL_AT[name]
    return value[lsb:lsb + width]


def _control(**flags):
    word = flags.pop("magic", MAGIC)
    for name, lsb, width, _ in CONTROL_BITS[1:]:
        v = int(flags.pop(name, 0))
        if not 0 <= v < (1 << width):
            raise ValueError(f"control.{name} is {width} bit(s) wide; {v} does not fit")
        word |= v << lsb
    if flags:
        raise TypeError(f"unknown control flags {sorted(flags)}")
    return word


def pack(*, src, dst, length, next=0, count=None, src_gap=0, dst_gap=0, seq_value=None,
         seq_addr=None, irq=False, end=False, ext=None, adj=0, control=None):
    """Return the bytes of one descriptor (32, or 64 with an extension).

    The extension is added when ``ext`` is true, or when ``count``, a gap or a completion write
    (``seq_addr``) is given.  ``next`` is a pointer (see :func:`pointer`); ``adj`` the number of
descriptors that follow this one immediately in memory (``control.adj``).  ``control`` overrides
    the control word (tests build malformed descriptors with it).
    """
    seq = seq_addr is not None
    if ext is None:
        ext = count is not None or src_gap != 0 or dst_gap != 0 or seq
    if (count is not None or src_gap or dst_gap or seq) and not ext:
        raise ValueError("count, gaps and the completion write need ext=True")
    if control is None:
        control = _control(ext=ext, irq=irq, seq=seq, end=end, adj=adj)
    values = {"src": src, "dst": dst, "length": length, "control": control, "next": next,
              "count": 1 if count is None else count, "src_gap": src_gap, "dst_gap": dst_gap,
              "seq_value": seq_value or 0, "seq_addr": seq_addr or 0, "reserved": 0}
    out = bytearray(EXT_BYTES)
    for name, off, size, _ in FIELDS:
        v = int(values[name])
        if not 0 <= v < (1 << (8 * size)):
            raise ValueError(f"descriptor field {name} ({size} bytes) cannot hold {v:#x}")
        struct.pack_into("<" + _FMT[size], out, off, v)
    return bytes(out[:EXT_BYTES if ext else BASE_BYTES])


def unpack(raw):
    """Return a dict of the fields of a 32- or 64-byte descriptor, control bits included."""
    raw = bytes(raw) + bytes(EXT_BYTES - len(raw))
    d = {name: struct.unpack_from("<" + _FMT[size], raw, off)[0]
         for name, off, size, _ in FIELDS}
    for name, lsb, width, _ in CONTROL_BITS:
        d[name] = (d["control"] >> lsb) & ((1 << width) - 1)
    return d


def pointer(address, ext=False):
    """Return the pointer to a descriptor at ``address`` (32-byte aligned, 64-byte aligned when
    ``ext``) of the given size."""
    if address % (EXT_BYTES if ext else BASE_BYTES):
        raise ValueError(f"{EXT_BYTES if ext else BASE_BYTES}-byte descriptors are "
                         f"{EXT_BYTES if ext else BASE_BYTES}-byte aligned; {address:#x} is not")
    return address | int(bool(ext))


def to_markdown():
    """Return the byte-by-byte description of the format (for ``docs/dma.md``)."""
    return format_table(FIELDS, CONTROL_BITS, "[31:20]")


def format_table(fields, control_bits, reserved_bits):
    """The Markdown tables of a descriptor format: ``fields`` byte by byte, then the control word
    (``control_bits``; ``reserved_bits`` names the bits that must be 0).  Shared with the put
    descriptor (:mod:`peach2.put.descriptor`)."""
    lines = ["| offset | bytes | field | meaning |", "| --- | --- | --- | --- |"]
    for name, off, size, doc in fields:
        lines.append(f"| `{off:#04x}` | {size} | `{name}` | {doc} |")
    lines += ["", "Control word (`control`, offset `0x14`):", "",
              "| bits | name | meaning |", "| --- | --- | --- |"]
    for name, lsb, width, doc in control_bits:
        bits = f"[{lsb + width - 1}:{lsb}]" if width > 1 else f"[{lsb}]"
        lines.append(f"| {bits} | `{name}` | {doc} |")
    lines.append(f"| {reserved_bits} | reserved | must be 0 |")
    return "\n".join(lines) + "\n"
