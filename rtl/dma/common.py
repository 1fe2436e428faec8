"""What the DMA's blocks share: the enumerations, the layouts passed between them, small helpers.

The blocks (``docs/dma.md`` has the pipeline diagram and the legend of name prefixes):
:class:`~peach2.dma.receiver.Receiver` (completions into the buffer),
:class:`~peach2.dma.writer.Writer` (the in-order queue into memory writes), and the planner and
the bookkeeping in :class:`~peach2.dma.engine.DMA`.
"""

from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib import data, enum

from ..params import N_DMA_CHANNELS
from ..signatures import CH_CTRL_FIELDS, CH_STATUS_FIELDS, DMA_CONFIG_FIELDS
from ..tlp.layouts import Type
from .descring import RING_SLOTS, SLOT_BITS
from .descriptor import control_bits

__all__ = ["Chan", "Kind", "Act", "Item", "bits", "field", "end_mask", "mem_header", "select",
           "per_channel", "ceil_log2", "base_bits", "tag_info_layout", "entry_layout", "CH_CTRL", "DMA_CONFIG", "CH_STATUS",
           "MAX_ANNOUNCED"]


def _positions(rows):
    """``{name: (lsb, width)}`` of ``(name, lsb, width, description)`` rows."""
    return {name: (lsb, width) for name, lsb, width, _ in rows}


#: The register fields the DMA decodes or builds (described in :mod:`peach2.signatures`).
CH_CTRL = _positions(CH_CTRL_FIELDS)
DMA_CONFIG = _positions(DMA_CONFIG_FIELDS)
CH_STATUS = _positions(CH_STATUS_FIELDS)
#: The most descriptors a start announces after the head (``CH_CTRL.adj``): with the head, as
#: many as the channel's descriptor ring holds, so all of them are fetched at the start.
MAX_ANNOUNCED = (1 << CH_CTRL["adj"][1]) - 1
assert MAX_ANNOUNCED + 1 <= RING_SLOTS


def bits(value, name):
    """Return the descriptor control field ``name`` of ``value`` (``descriptor.CONTROL_BITS``)."""
    return control_bits(value, name)


def field(value, name, table):
    """Return the register field ``name`` of ``value``; ``table`` maps names to
    ``(lsb, width)`` (:data:`CH_CTRL`, :data:`DMA_CONFIG`, :data:`CH_STATUS`)."""
    lsb, width = table[name]
    return value[lsb:lsb + width]


class Chan(enum.Enum, shape=3):
    """A channel's state (the state machine is drawn in ``docs/dma.md``)."""
    IDLE  = 0   # not running
    WAIT  = 2   # fetch descriptors announced, wait for the next (or register-mode) one, load it
    RUN   = 3   # issue reads of the current descriptor, then its mark
    DRAIN = 4   # chain over (end or fault): wait until nothing of it is in flight


class Kind(enum.Enum, shape=2):
    """What an entry of the in-order queue is."""
    DATA  = 0   # a read whose data becomes writes
    FETCH = 1   # a descriptor read
    MARK  = 2   # end of a descriptor: completion write, counters, MSI
    FAULT = 3   # the planner found a fault: report it here, after the earlier descriptors


class Act(enum.Enum, shape=3):
    """What the planner's ACT does for the channel CALC looked at."""
    NONE  = 0   # nothing (IDLE or DRAIN)
    LOAD  = 2   # load the next descriptor (WAIT)
    PF    = 3   # fetch announced descriptors into the ring (WAIT, RUN)
    DATA  = 4   # issue the next read of the current burst (RUN); the last closes the descriptor


class Item(enum.Enum, shape=2):
    """What an item of the writer's split is."""
    WRITE = 0   # a memory write from buffer rows
    SEQ   = 1   # the 4-byte completion write (immediate data)
    # 2 is free
    NOP   = 3   # nothing to send; carries release and counter flags


def per_channel(name, shape, **kw):
    """Return an ``Array`` of one register per DMA channel, named ``ch<c>_<name>``."""
    return Array([Signal(shape, name=f"ch{c}_{name}", **kw) for c in range(N_DMA_CHANNELS)])


def ceil_log2(n):
    return max(1, (n - 1).bit_length())


def base_bits(row_bits):
    """Bits of a tag's ``base``: a buffer row, or a fetch's ``Cat(ring slot, 64-byte)``."""
    return max(row_bits, SLOT_BITS + 1)


def tag_info_layout(row_bits):
    """Per tag, the static facts the bookkeeping writes at issue and the receiver reads."""
    return data.StructLayout({"base": base_bits(row_bits), "src_lo": 2, "nbytes": 10, "fetch": 1,
                              "chan": 2})


def entry_layout(tag_bits, row_bits):
    """An entry of the in-order queue (planner to writer)."""
    return data.StructLayout({
        "kind": Kind, "chan": 2, "tag": tag_bits, "base": row_bits, "rows": row_bits + 1,
        "src_lo": 2, "nbytes": 10, "addr": 64, "value": 32,
        "seq": 1, "irq": 1, "desc": 64, "code": 4,
        "chdr": 5, "cdat": 7,
    })


def end_mask(n):
    """Return the mask of the first ``n`` of 4 lanes, ``n`` a 2-bit value with 0 meaning 4."""
    return Cat(Const(1, 1), n != 1, (n == 0) | (n == 3), n == 0)


def mem_header(addr, nbytes, tag, requester_id, write):
    """Return the 128-bit header of a memory request for ``nbytes`` (1..512) bytes at byte
    address ``addr``: 3-DW below 4 GiB, 4-DW above; byte enables from the address and length.

    One expression (no per-field assignments), so no bit of it is a lone constant.
    """
    lo = addr[:2]
    dws = (Cat(lo, Const(0, 8)) + nbytes + 3)[2:10]
    first = (Const(0xF, 4) << lo)[:4]
    last = end_mask((lo + nbytes)[:2])
    one = dws == 1
    four = addr[32:].any()
    fmt = Cat(four, Const(1 if write else 0, 1), Const(0, 1))      # 3/4-DW, with/without data
    dw0 = Cat(dws, Const(0, 2), Const(0, 14), Const(Type.MEM.value, 5), fmt)
    dw1 = Cat(Mux(one, first & last, first), Mux(one, 0, last), tag[:8], requester_id)
    dw2 = Mux(four, addr[32:64], Cat(Const(0, 2), addr[2:32]))
    dw3 = Mux(four, Cat(Const(0, 2), addr[2:32]), 0)
    return Cat(dw0, dw1, dw2, dw3)


def select(values, index):
    """Return ``values[index]`` as a tree of 4:1 multiplexers, two index bits a level (one LUT
    level each; Yosys maps a wide ``Array`` index or ``bit_select`` to a shifter)."""
    values = list(values)
    lsb = 0
    while len(values) > 1:
        nbits = min(2, (len(values) - 1).bit_length())
        sel = index[lsb:lsb + nbits]
        values = [Array(values[i:i + (1 << nbits)])[sel]
                  for i in range(0, len(values), 1 << nbits)]
        lsb += nbits
    return values[0]
