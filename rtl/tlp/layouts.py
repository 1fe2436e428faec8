"""TLP header layouts, declared once for gateware, simulation and tests.

A TLP header is kept inside the chip as 128 bits holding header DWs 0-3, DW ``i`` in bits
``[32*i+31 : 32*i]``.  Within each DW the PCIe byte order is kept: header byte 0 of the DW sits in
bits ``[31:24]`` (this is also how the Stratix IV hard IP presents header DWs on its Avalon-ST
interface, per the vendor's IP Compiler for PCI Express user guide).  Reading one DW as a
big-endian 32-bit number therefore gives the PCIe specification's bit numbering, and the fields
below are declared LSB first in that numbering.  DW 3 of a 3-DW header is zero inside the chip.

The field names follow the PCIe base specification and cocotbext-pcie's ``Tlp`` attributes, so
gateware and testbench read the same; ``tb/tlp/test_layouts.py`` checks every layout against
``Tlp.pack()``/``Tlp.unpack()``.
"""

from amaranth.lib import data, enum

__all__ = [
    "Fmt", "Type", "FmtType", "CplStatus",
    "DW0", "MemRequest32", "MemRequest64", "Completion", "TLPHeader",
    "HEADER_BITS", "header_dws", "has_data",
    "header_from_bytes", "header_to_bytes",
]


HEADER_BITS = 128


class Fmt(enum.Enum, shape=3):
    """The ``fmt`` field: header size and whether a payload follows."""
    DW3_NO_DATA = 0b000
    DW4_NO_DATA = 0b001
    DW3_DATA    = 0b010
    DW4_DATA    = 0b011
    PREFIX      = 0b100


class Type(enum.Enum, shape=5):
    """The ``type`` field (message types use ``MSG | routing``)."""
    MEM        = 0b00000
    MEM_LOCKED = 0b00001
    IO         = 0b00010
    CFG0       = 0b00100
    CFG1       = 0b00101
    CPL        = 0b01010
    CPL_LOCKED = 0b01011
    MSG        = 0b10000


class FmtType(enum.Enum, shape=8):
    """``fmt`` and ``type`` together (``fmt << 5 | type``), for classifying a TLP in one compare.

    Values equal cocotbext-pcie's ``TlpType`` encodings.
    """
    MRD32     = 0x00
    MRD64     = 0x20
    MRD32_LK  = 0x01
    MRD64_LK  = 0x21
    MWR32     = 0x40
    MWR64     = 0x60
    IORD      = 0x02
    IOWR      = 0x42
    CFGRD0    = 0x04
    CFGWR0    = 0x44
    CFGRD1    = 0x05
    CFGWR1    = 0x45
    CPL       = 0x0A
    CPLD      = 0x4A
    CPL_LK    = 0x0B
    CPLD_LK   = 0x4B


class CplStatus(enum.Enum, shape=3):
    """Completion status."""
    SC  = 0b000  # successful completion
    UR  = 0b001  # unsupported request
    CRS = 0b010  # configuration request retry status
    CA  = 0b100  # completer abort


# -- field groups, LSB first within each DW -------------------------------------------------------

_DW0 = {
    "length": 10,
    "at":     2,
    "attr":   2,    # attr[1:0]: relaxed ordering (bit 1), no snoop (bit 0)
    "ep":     1,    # poisoned
    "td":     1,    # TLP digest present
    "th":     1,
    "ln":     1,
    "attr2":  1,    # ID-based ordering
    "t8":     1,
    "tc":     3,
    "t9":     1,
    "type":   Type,
    "fmt":    Fmt,
}

_REQ_DW1 = {
    "first_be":     4,
    "last_be":      4,
    "tag":          8,
    "requester_id": 16,
}

_CPL_DW1 = {
    "byte_count":   12,
    "bcm":          1,
    "status":       CplStatus,
    "completer_id": 16,
}

_CPL_DW2 = {
    "lower_address": 7,
    "_rsvd_cpl":     1,
    "tag":           8,
    "requester_id":  16,
}


def _pad_to_header(fields):
    width = sum(data.StructLayout({k: v}).size for k, v in fields.items())
    return data.StructLayout({**fields, "_unused": HEADER_BITS - width})


#: DW 0, common to every TLP.
DW0 = data.StructLayout(_DW0)

#: Memory request with a 3-DW header (32-bit address). ``address`` holds address bits [31:2].
MemRequest32 = _pad_to_header({
    **_DW0, **_REQ_DW1,
    "ph":      2,
    "address": 30,
})

#: Memory request with a 4-DW header (64-bit address). The address is split across DW 2 and
#: DW 3: ``address_hi`` holds bits [63:32], ``address_lo`` bits [31:2].
MemRequest64 = _pad_to_header({
    **_DW0, **_REQ_DW1,
    "address_hi": 32,
    "ph":         2,
    "address_lo": 30,
})

#: Completion (with or without data), always a 3-DW header.
Completion = _pad_to_header({**_DW0, **_CPL_DW1, **_CPL_DW2})


class TLPHeader(data.Union):
    """A TLP header (3 or 4 DWs) in the chip's 128-bit header format.

    Members
    -------
    common : :data:`DW0`
        DW 0, valid for every TLP.
    mem32, mem64 : :data:`MemRequest32`, :data:`MemRequest64`
        Memory request views (also I/O and configuration requests, whose DW 1 is the same).
    cpl : :data:`Completion`
        Completion view.
    dw : ArrayLayout(32, 4)
        The raw header DWs, PCIe byte order within each DW.
    """
    common: DW0
    mem32:  MemRequest32
    mem64:  MemRequest64
    cpl:    Completion
    dw:     data.ArrayLayout(32, 4)


# -- plain-Python helpers (simulation, tests, driver) ---------------------------------------------

def header_dws(fmt):
    """Return the header length in DWs for a ``fmt`` value."""
    return 4 if int(fmt) & 1 else 3


def has_data(fmt):
    """Return whether a TLP with this ``fmt`` carries a payload."""
    return bool(int(fmt) & 0b010)


def header_from_bytes(raw):
    """Convert header bytes in wire order (``Tlp.pack()[:12 or 16]``) to the 128-bit integer."""
    if len(raw) not in (12, 16):
        raise ValueError(f"a TLP header is 12 or 16 bytes, not {len(raw)}")
    value = 0
    for i in range(len(raw) // 4):
        value |= int.from_bytes(raw[4*i:4*i+4], "big") << (32 * i)
    return value


def header_to_bytes(value, dws):
    """Convert the 128-bit header integer back to ``dws`` header DWs in wire order."""
    if dws not in (3, 4):
        raise ValueError(f"a TLP header has 3 or 4 DWs, not {dws}")
    return b"".join(((value >> (32 * i)) & 0xffffffff).to_bytes(4, "big") for i in range(dws))
