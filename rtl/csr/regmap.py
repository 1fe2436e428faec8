"""The PEACH2 register map, described once, and the generators that read it.

Everything about the control registers (BAR 0) is written here as Python data: offsets, access
kinds, fields, reset values, arrays and the names of their indices.  The gateware decode
(:class:`~peach2.csr.block.CSR`), ``docs/registers.md``, the C header, the JSON description, the
host driver model (:mod:`peach2.sim.driver`) and the testbenches all read it; nobody types an
offset twice.  Regenerate the documents with ``peach2 regmap --format md|c|json``.

For testbenches and scripts the default map is exported as :data:`REGMAP`, with :data:`REGS`
(register by name: ``REGS["OFFSET_LO"].offset``), :class:`Port` and :class:`CountReason`.
"""

import enum
import json
from dataclasses import dataclass, field

from amaranth.lib import data

__all__ = [
    "Access", "Field", "Register", "Group", "Enumeration", "RegisterMap",
    "peach2_regmap", "REGMAP", "REGS", "Port", "CountReason", "COUNT_REASONS", "RouteEntry",
    "ID_VALUE", "VERSION_MAJOR", "VERSION_MINOR", "N_PORTS", "N_REASONS", "MAX_ROUTES", "MAX_BUFFER_BEATS",
    "DEFAULT_BUFFER_BEATS", "BAR_SIZE", "N_DMA_CHANNELS", "N_DMA_SLOTS", "DMA_SLOT_MEMBERS",
    "DmaError", "DEFAULT_DMA_TAGS", "DEFAULT_DMA_BUFFER", "DEFAULT_DMA_TIMEOUT",
]


class Access(enum.Enum):
    """How software and hardware see a register."""
    CONST   = "ro-const"    #: read-only constant, fixed when the gateware is generated
    RO      = "ro"          #: read-only, value from the hardware (an ``In`` port)
    RW      = "rw"          #: read-write storage, value to the hardware (an ``Out`` port)
    ACTION  = "wo-action"   #: a write triggers an action; reads return 0
    COUNTER = "ro-counter"  #: read-only saturating event counter (``In`` strobes)


_ACCESS_TEXT = {
    Access.CONST:   "RO const",
    Access.RO:      "RO",
    Access.RW:      "RW",
    Access.ACTION:  "WO action",
    Access.COUNTER: "RO counter",
}


@dataclass(frozen=True)
class Field:
    """A bit field of a register: bits ``[lsb + width - 1 : lsb]``."""
    name: str
    lsb: int
    width: int
    doc: str = ""

    @property
    def mask(self):
        """The field's bits in the register."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def bits(self):
        """The bit range as text, ``"[5:1]"`` or ``"[0]"``."""
        msb = self.lsb + self.width - 1
        return f"[{msb}]" if msb == self.lsb else f"[{msb}:{self.lsb}]"


@dataclass(frozen=True)
class Register:
    """One register, or an array of registers with the same layout.

    Parameters
    ----------
    name : str
        Upper-case name; the gateware port is its lower-case form.
    offset : int
        Byte offset of element 0 in BAR 0.
    access : Access
    doc : str
        One-line description (more in ``notes``).
    fields : tuple of Field
        Named bits.  Empty means one field ``value`` over ``width`` bits.  Bits outside the
        fields are reserved: they read 0 and ignore writes.
    value : int
        Reset value (``RW``) or the constant (``CONST``).
    width : int
        Bits of the hardware port of an ``RO`` register, and the width of storage otherwise.
    dims : tuple of int
        Array dimensions, ``()`` for a single register.  Element ``(i, j)`` of a 2-D array is
        flat element ``i * dims[1] + j``.
    stride : int
        Bytes between consecutive flat elements.
    index_names : tuple of tuple of str
        Per dimension, optional names of the indices (``("N", "E", "W", "S")``) for documents.
    index_args : tuple of str
        Per dimension, the argument name in documents and C macros (``"p"``, ``"i"``).
    reserved : frozenset of int
        Flat elements that exist in the address map but not in hardware: they read 0.
    group : str or None
        Name of the :class:`Group` (an array of records) this register belongs to.
    notes : str
        Paragraphs for the document.
    """
    name: str
    offset: int
    access: Access
    doc: str
    fields: tuple = ()
    value: int = 0
    width: int = 32
    dims: tuple = ()
    stride: int = 4
    index_names: tuple = ()
    index_args: tuple = ()
    reserved: frozenset = frozenset()
    group: str = None
    notes: str = ""

    @property
    def port_name(self):
        """Name of the register's gateware port."""
        return self.name.lower()

    @property
    def all_fields(self):
        """The fields, or a single ``value`` field when none are declared."""
        return self.fields or (Field("value", 0, self.width),)

    @property
    def mask(self):
        """Implemented bits (union of the fields)."""
        m = 0
        for f in self.all_fields:
            m |= f.mask
        return m

    @property
    def count(self):
        """Number of (flat) elements; 1 for a single register."""
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def size(self):
        """Bytes from element 0 to the end of the last element."""
        return self.stride * (self.count - 1) + 4

    def flat(self, index=None):
        """Return the flat element number of ``index`` (int, tuple or index names)."""
        if not self.dims:
            if index not in (None, 0, ()):
                raise IndexError(f"{self.name} is a single register; it takes no index")
            return 0
        if index is None:
            raise IndexError(f"{self.name} is an array {list(self.dims)}; give an index")
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) != len(self.dims):
            raise IndexError(f"{self.name} has {len(self.dims)} dimension(s); "
                             f"index {index!r} has {len(index)}")
        flat = 0
        for dim, (i, size) in enumerate(zip(index, self.dims)):
            if isinstance(i, str):
                names = self.index_names[dim] if dim < len(self.index_names) else ()
                if i not in names:
                    raise IndexError(f"{self.name}: {i!r} is not one of {list(names)}")
                i = names.index(i)
            i = int(i)
            if not 0 <= i < size:
                raise IndexError(f"{self.name}: index {i} out of range 0..{size - 1}")
            flat = flat * size + i
        return flat

    def offset_of(self, index=None):
        """Return the byte offset of element ``index``."""
        return self.offset + self.stride * self.flat(index)

    def unflat(self, flat):
        """Return the index tuple of flat element ``flat``."""
        index = []
        for size in reversed(self.dims):
            index.append(flat % size)
            flat //= size
        return tuple(reversed(index))

    def element_name(self, flat):
        """Return ``"COUNT[N][RX_TLPS]"``-style text for flat element ``flat``."""
        if not self.dims:
            return self.name
        parts = []
        for dim, i in enumerate(self.unflat(flat)):
            names = self.index_names[dim] if dim < len(self.index_names) else ()
            parts.append(f"[{names[i] if i < len(names) and names[i] else i}]")
        return self.name + "".join(parts)

    def elements(self):
        """Yield ``(flat, offset)`` of every implemented element."""
        for flat in range(self.count):
            if flat not in self.reserved:
                yield flat, self.offset + self.stride * flat

    def encode(self, **values):
        """Return the register value with the given fields; unknown or too wide values raise."""
        by_name = {f.name: f for f in self.all_fields}
        word = 0
        for name, v in values.items():
            if name not in by_name:
                raise KeyError(f"{self.name} has no field {name!r}; fields: {list(by_name)}")
            f = by_name[name]
            v = int(v)
            if not 0 <= v < (1 << f.width):
                raise ValueError(f"{self.name}.{name} is {f.width} bit(s) wide; {v:#x} does "
                                 f"not fit")
            word |= v << f.lsb
        return word

    def decode(self, word):
        """Return a dict of field values of ``word``."""
        return {f.name: (word >> f.lsb) & ((1 << f.width) - 1) for f in self.all_fields}


@dataclass(frozen=True)
class Group:
    """An array of records (``ROUTE[i]``): registers repeated at ``base + stride * i``."""
    name: str
    base: int
    stride: int
    count: int
    doc: str
    notes: str = ""


@dataclass(frozen=True)
class Enumeration:
    """Named values used by registers (ports, counter reasons)."""
    name: str
    doc: str
    values: tuple   # of (name, value, doc); name None marks a reserved value


@dataclass
class RegisterMap:
    """A register map: registers, groups and enumerations, with generators.

    Members
    -------
    name : str
        Prefix of generated C names.
    size : int
        Bytes of the BAR.
    registers : list of Register
        In offset order.
    params : dict
        Build parameters the map was made for.
    """
    name: str
    title: str
    size: int
    registers: list
    groups: list = field(default_factory=list)
    enums: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    notes: str = ""
    sections: list = field(default_factory=list)    # (title, text) for the document

    def __post_init__(self):
        self.registers = sorted(self.registers, key=lambda r: r.offset)
        self.by_name = {}
        self._at = {}
        for reg in self.registers:
            self._check(reg)
            if reg.name in self.by_name:
                raise ValueError(f"register {reg.name} declared twice")
            self.by_name[reg.name] = reg
            for flat in range(reg.count):
                off = reg.offset + reg.stride * flat
                if off in self._at:
                    other, oflat = self._at[off]
                    raise ValueError(f"{reg.element_name(flat)} at {off:#05x} overlaps "
                                     f"{other.element_name(oflat)}")
                self._at[off] = (reg, flat)

    def _check(self, reg):
        if reg.offset % 4 or reg.stride % 4 or reg.stride <= 0:
            raise ValueError(f"{reg.name}: offset and stride must be multiples of 4")
        if reg.offset + reg.size > self.size:
            raise ValueError(f"{reg.name} ends at {reg.offset + reg.size:#x}, beyond the "
                             f"{self.size:#x}-byte BAR")
        if not 1 <= reg.width <= 32:
            raise ValueError(f"{reg.name}: width {reg.width} is not 1..32")
        used = 0
        for f in reg.all_fields:
            if f.lsb < 0 or f.width < 1 or f.lsb + f.width > reg.width:
                raise ValueError(f"{reg.name}.{f.name} {f.bits} does not fit {reg.width} bits")
            if used & f.mask:
                raise ValueError(f"{reg.name}.{f.name} {f.bits} overlaps another field")
            used |= f.mask
        if reg.value & ~used:
            raise ValueError(f"{reg.name}: value {reg.value:#x} sets reserved bits")
        if any(not 0 <= r < reg.count for r in reg.reserved):
            raise ValueError(f"{reg.name}: reserved element out of range")

    def __getitem__(self, name):
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f"no register {name!r}; registers: {list(self.by_name)}") from None

    def __iter__(self):
        return iter(self.registers)

    def at(self, offset):
        """Return ``(register, flat element)`` at byte ``offset``, or ``None`` if unmapped.

        Reserved elements (in the map but not in hardware) are returned too.
        """
        return self._at.get(offset & ~3)

    def enum(self, name):
        """Return the :class:`Enumeration` called ``name``."""
        for e in self.enums:
            if e.name == name:
                return e
        raise KeyError(f"no enumeration {name!r}")

    # -- generators -------------------------------------------------------------------------

    def to_json(self):
        """Return the map as JSON text (stable key order)."""
        return _to_json(self)

    def to_c_header(self):
        """Return a C header with offsets, array macros, field masks/shifts and enums."""
        return _to_c_header(self)

    def to_markdown(self):
        """Return ``docs/registers.md``."""
        return _to_markdown(self)


# -- the PEACH2 map -------------------------------------------------------------------------------

BAR_SIZE = 0x1000
ID_VALUE = 0x50434832          # "PCH2"
VERSION_MAJOR = 0
VERSION_MINOR = 2
N_PORTS = 4
N_REASONS = 16
MAX_ROUTES = 16
MAX_BUFFER_BEATS = (1 << 16) - 1   # CONFIG.buffer_beats is 16 bits wide
DEFAULT_BUFFER_BEATS = 128     # the top's default (eight 256-byte TLPs)
N_DMA_CHANNELS = 4             # 000 section 2.2: four DMA channels
N_DMA_SLOTS = 4                # register-mode descriptor slots per channel
DEFAULT_DMA_TAGS = 128         # reads outstanding (tags) of the default build
DEFAULT_DMA_BUFFER = 16384     # completion buffer bytes of the default build
DEFAULT_DMA_TIMEOUT = 250_000  # completion timeout, core cycles (1 ms at 250 MHz)

_PORTS = (
    ("N", 0, "north: the host (root complex side)"),
    ("E", 1, "east: ring neighbour"),
    ("W", 2, "west: ring neighbour"),
    ("S", 3, "south: the other ring"),
)

_REASONS = (
    ("RX_TLPS", 0, "TLPs from the port that reached the router (at their first beat)"),
    ("TX_TLPS", 1, "TLPs sent whole on the port (not dropped, not nullified)"),
    ("UNROUTABLE", 2, "requests no enabled route entry matched"),
    ("WINDOW_CLOSED", 3, "requests dropped because PIO_ENABLE or ROUTE_ENABLE is off"),
    ("UNSUPPORTED", 4, "configuration, I/O, message TLPs; locked reads (UR as CplLk); "
                       "N requests outside BARs 0, 2"),
    ("READ_REJECTED", 5, "reads from E/W/S, and host reads into the TCA window"),
    ("MALFORMED", 6, "TLPs whose framing disagrees with their header, or with a TLP prefix"),
    ("POISONED", 7, "TLPs with EP (poisoned) set"),
    ("RX_ERR", 8, "TLPs the hard IP flagged with rx_st_err"),
    ("UNEXPECTED_CPL", 9, "completions that match no outstanding request"),
    ("UR_SENT", 10, "UR completions generated for requests from this port"),
)

_ROUTE_MEMBERS = (
    ("MASK_LO", 0x00, "bits [31:0] of the address mask"),
    ("MASK_HI", 0x04, "bits [63:32] of the address mask"),
    ("LOWER_LO", 0x08, "bits [31:0] of the lower bound (inclusive)"),
    ("LOWER_HI", 0x0C, "bits [63:32] of the lower bound"),
    ("UPPER_LO", 0x10, "bits [31:0] of the upper bound (inclusive)"),
    ("UPPER_HI", 0x14, "bits [63:32] of the upper bound"),
    ("TARGET", 0x18, "output port and enable"),
)

_ROUTE_NOTES = """\
Entry *i* matches a request address *A* when `TARGET.enable` is 1 and
`LOWER <= (A & MASK) <= UPPER`, all 64-bit values (`_LO` holds bits 31:0, `_HI` bits 63:32).
The first matching entry in index order wins; disabled entries never match; an address no entry
matches is unroutable (counted in `COUNT[p][UNROUTABLE]`).  A request leaving through port N has
the node offset (`OFFSET_HI:OFFSET_LO`) subtracted from its address.

The router uses the registers as they are: an entry whose fields are being rewritten can match
with a mix of old and new values.  Clear `TARGET.enable` first, rewrite the bounds and mask,
then write `TARGET` with `enable` set (the driver's `set_route` does this)."""

_COUNT_NOTES = """\
Counters run while traffic flows and can be read at any time; a read returns the value of one
cycle.  Each counter stops at 0xFFFFFFFF.  Writing 1 to `COUNTER_CLEAR.clear` zeroes every
counter (an event in that same cycle counts as the first after the clear).  Reasons 11-15 are
reserved: their offsets read 0 and have no hardware."""

_ACCESS_NOTES = """\
- BAR 0 is 4 KiB of 32-bit little-endian registers.  Reads and writes of 1 or 2 DWs (a 32-bit or
  a 64-bit access) at any DW address are supported; a 2-DW access touches the DW at the address
  and the next one.
- Every offset not listed below, and every reserved bit, reads 0 with a successful completion;
  writes to them are ignored.  Writes to read-only registers are ignored.
- A read returns one completion with data (status SC).  A read of more than 2 DWs, or a 2-DW
  read of the last DW of the BAR (it would cross the 4 KiB boundary), is answered with a
  completion without data, status CA (completer abort), byte count 4.  A zero-length read
  (`first_be` = 0) returns 1 DW, byte count 1.
- Writes honour `first_be`/`last_be`.  Writes longer than 2 DWs are applied one DW after the
  other, walking the addresses; DWs past the end of the BAR are dropped.
- Poisoned writes, packets ended with `err` and TLPs other than memory reads and writes are
  dropped.  The register block raises `bad_req` once for each request it could not serve in
  full (CA completions included): an output for diagnosis, not wired to a counter in this
  version.  A write longer than 4 DWs (more than one stream beat) that ends with `err` has its
  earlier beats applied: the block does not store whole packets.  Hosts map BAR 0 uncached and
  never send such writes.
- Reads have no side effects.  Register accesses are served in order, one at a time, so a read
  returns the effect of every earlier write."""


_SOFTWARE_NOTES = """\
The host driver model `peach2.sim.driver.Driver` (numpydoc in `sim/driver.py`) does all of this
by name; a C driver follows the same steps with the header of `peach2 regmap --format c`.

1. Check the chip: `ID` reads `0x50434832` and `VERSION.major` is the one the driver knows
   (`Driver.id_check()`); `CONFIG` gives the number of route entries.
2. Close the windows: write `CONTROL` = 0.
3. Program the route table (`Driver.program(topology, address_map, node, phys_base)` computes it
   from the topology): for each entry clear `ROUTE_TARGET.enable`, write the 64-bit `MASK`,
   `LOWER` and `UPPER` (one 64-bit write each, or two 32-bit writes), then `ROUTE_TARGET` with
   the port and `enable`.  Disable unused entries.
4. Write the node offset (`OFFSET_LO`, `OFFSET_HI`): the node's region base minus the physical
   address that region maps to in this host, modulo 2^64.  Write `NODE`.
5. Open the windows: `CONTROL.pio_enable` and `CONTROL.route_enable`.
6. Watch `COUNT[p][r]` (`Driver.counters()`), clear them with `COUNTER_CLEAR`."""


_DMA_ERRORS = (
    ("NONE", 0, "no error"),
    ("DESC_MALFORMED", 1, "a descriptor failed its checks: magic, reserved bits, zero length or "
                          "count, ext disagreeing with the pointer, misaligned next or seq_addr, "
                          "seq without ext; or a register-mode start with 0 or more than 4 "
                          "slots"),
    ("CPL_TIMEOUT", 2, "a read was not completed within DMA_TIMEOUT cycles"),
    ("CPL_UR", 3, "a read was answered with Unsupported Request"),
    ("CPL_CA", 4, "a read was answered with Completer Abort (or another non-SC status)"),
    ("CPL_POISONED", 5, "a read completion was poisoned (EP)"),
    ("CPL_MALFORMED", 6, "a read completion's data fell outside the request or did not "
                         "continue where the tag's last one ended, its byte count or lower "
                         "address was wrong, or the receiver cut it short (err)"),
    ("DST_UNROUTABLE", 7, "a destination or completion-write address matched no enabled route"),
    ("ABORTED", 8, "software wrote CH_CTRL.abort"),
)

_DMA_NOTES = """\
Four channels (000 section 2.2), each with the registers `CH_*[c]` at `0x300 + 0x40 * c` and four
register-mode descriptor slots `SLOT_*[c][s]` at `0x400 + 0x100 * c + 0x40 * s`.  The
descriptor format is in `docs/dma.md` (generated from `rtl/dma/descriptor.py`).
- Chained mode: write the head pointer (`CH_HEAD`, bit 0 set when the head descriptor is 64
  bytes), then `CH_CTRL.start`.  The engine walks the chain until a descriptor with
  `control.end`.
- Register mode: write slots `0 .. n-1` of the channel (the same fields as a descriptor,
  without `next`), then `CH_CTRL` with `reg_start` and `slots` = n.  No descriptor is fetched.
- A start clears `CH_DESC_DONE`, `CH_BYTES` and the error code.  A start while the channel is
  busy is ignored and sets `CH_STATUS.start_ignored` (cleared by the next accepted start).
- `CH_STATUS.busy` falls when the last descriptor is done or after a fault, once every read the
  channel had outstanding is completed or timed out.  `CH_DESC_DONE` counts a descriptor when
  its last write (and its completion write) has entered the chip's output port; for a local
  destination that write is ahead of the completion of any later register read, so polling
  `CH_DESC_DONE` is safe; for a remote destination poll the completion write.
- A fault stops the chain: `CH_STATUS.error` holds the code (`DMA_ERROR`), `CH_DESC_ADDR` the
  failing descriptor (register mode: the slot number), writes not yet made are dropped, the
  channel's tags and buffer space are released; the next start works.  Other channels go on."""


def _reason_values():
    named = {v: (n, d) for n, v, d in _REASONS}
    return tuple((named[r][0], r, named[r][1]) if r in named else (None, r, "reserved")
                 for r in range(N_REASONS))


#: Register-mode slot members: (name, offset in the slot, description).  The slot holds the
#: fields of a 64-byte descriptor at the same offsets (``docs/dma.md``), without ``next``.
DMA_SLOT_MEMBERS = (
    ("SRC_LO", 0x00, "`src` [31:0]"),
    ("SRC_HI", 0x04, "`src` [63:32]"),
    ("DST_LO", 0x08, "`dst` [31:0]"),
    ("DST_HI", 0x0C, "`dst` [63:32]"),
    ("LENGTH", 0x10, "`length`"),
    ("CONTROL", 0x14, "`control` (`end` and `next` are ignored)"),
    ("COUNT", 0x20, "`count` (used with `control.ext`)"),
    ("SRC_GAP", 0x24, "`src_gap`"),
    ("DST_GAP", 0x28, "`dst_gap`"),
    ("SEQ_VALUE", 0x2C, "`seq_value`"),
    ("SEQ_ADDR_LO", 0x30, "`seq_addr` [31:0]"),
    ("SEQ_ADDR_HI", 0x34, "`seq_addr` [63:32]"),
)


def peach2_regmap(*, n_routes=8, buffer_beats=DEFAULT_BUFFER_BEATS, s_is_rc=True,
                  dma_tags=DEFAULT_DMA_TAGS, dma_buffer=DEFAULT_DMA_BUFFER):
    """Return the PEACH2 register map for a build with these parameters.

    Parameters
    ----------
    n_routes : int
        Route table entries, 1..16.
    buffer_beats : int
        Router buffer depth in stream beats (reported in ``CONFIG``), 0..65535.
    s_is_rc : bool
        Whether port S is a root port (reported in ``CONFIG``).
    dma_tags, dma_buffer : int
        DMA reads outstanding and completion buffer bytes (reported in ``DMA_INFO``).
    """
    if not 1 <= n_routes <= MAX_ROUTES:
        raise ValueError(f"n_routes must be 1..{MAX_ROUTES} (ROUTE[i] must end below the "
                         f"counters at 0x800), not {n_routes}")
    if not 0 <= buffer_beats <= MAX_BUFFER_BEATS:
        raise ValueError(f"buffer_beats must fit CONFIG.buffer_beats (16 bits), not "
                         f"{buffer_beats}")
    port_names = tuple(n for n, _, _ in _PORTS)
    reason_names = tuple(n or "" for n, _, _ in _reason_values())

    config = Register("CONFIG", 0x008, Access.CONST, "build parameters", fields=(
        Field("n_routes", 0, 8, "route table entries"),
        Field("s_is_rc", 8, 1, "port S is a root port"),
        Field("n_ports", 12, 4, "PCIe ports (4: N, E, W, S)"),
        Field("buffer_beats", 16, 16, "router buffer depth, stream beats"),
    ))
    config_value = config.encode(n_routes=n_routes, s_is_rc=int(bool(s_is_rc)),
                                 n_ports=N_PORTS, buffer_beats=buffer_beats)
    regs = [
        Register("ID", 0x000, Access.CONST, 'chip identifier, "PCH2"', value=ID_VALUE,
                 fields=(Field("id", 0, 32, 'ASCII "PCH2"'),)),
        Register("VERSION", 0x004, Access.CONST, "register map version",
                 value=VERSION_MAJOR << 16 | VERSION_MINOR,
                 fields=(Field("minor", 0, 16, "compatible additions"),
                         Field("major", 16, 16, "incompatible changes"))),
        Register("CONFIG", 0x008, Access.CONST, config.doc, fields=config.fields,
                 value=config_value,
                 notes="The value depends on the build parameters; the one shown is this "
                       "build's."),
        Register("NODE", 0x00C, Access.RW, "this node's number (informational)",
                 fields=(Field("node_id", 0, 4, "software's own node number"),)),
        Register("OFFSET_LO", 0x010, Access.RW, "node offset, bits [31:0]",
                 notes="The 64-bit node offset `OFFSET_HI:OFFSET_LO` is subtracted (modulo "
                       "2^64) from the address of every request leaving through port N."),
        Register("OFFSET_HI", 0x014, Access.RW, "node offset, bits [63:32]"),
        Register("CONTROL", 0x018, Access.RW, "traffic enables", fields=(
            Field("pio_enable", 0, 1, "host writes into the TCA window are routed; when 0 "
                                      "they are dropped as window closed"),
            Field("route_enable", 1, 1, "E/W/S ingress routing; when 0 everything arriving "
                                        "there is dropped as window closed"),
        )),
        Register("COUNTER_CLEAR", 0x01C, Access.ACTION, "clear every counter",
                 fields=(Field("clear", 0, 1, "write 1 to zero every COUNT register"),)),
        Register("PORT_STATUS", 0x020, Access.RO, "link status of port p", dims=(N_PORTS,),
                 stride=4, index_names=(port_names,), index_args=("p",), fields=(
                     Field("link_up", 0, 1, "data link layer up"),
                     Field("ltssm", 1, 5, "hard IP LTSSM state"),
                 )),
        Register("PCIE_ID", 0x030, Access.RO, "bus/device/function of the chip on port N",
                 width=16, fields=(Field("function", 0, 3, "function number"),
                                   Field("device", 3, 5, "device number"),
                                   Field("bus", 8, 8, "bus number")),
                 notes="Captured by the hard IP from configuration writes of the host; also the "
                       "completer ID of the chip's completions."),
        Register("MSI", 0x034, Access.ACTION, "raise an MSI",
                 fields=(Field("vector", 0, 5, "MSI vector number; the write raises it"),),
                 notes="A write with byte 0 enabled sends one MSI request with this vector "
                       "(`app_msi_req`/`app_msi_num` of the hard IP on port N)."),
    ]
    regs += [
        Register("DMA_CONFIG", 0x040, Access.RW, "DMA request sizes and tags",
                 value=(1 << 0) | (2 << 4) | (1 << 8), fields=(
                     Field("mps", 0, 2, "max payload size of DMA writes: 0 128 B, 1 256 B, "
                                        "2 512 B (3 is taken as 2)"),
                     Field("mrrs", 4, 2, "max read request size: 0 128 B, 1 256 B, 2 512 B "
                                         "(3 is taken as 2)"),
                     Field("ext_tags", 8, 1, "8-bit tags (the host enabled Extended Tag "
                                             "Field); 0: 5-bit tags, at most 32 reads "
                                             "outstanding"),
                 ), notes="Set `mps` and `mrrs` to the values the host programmed into the "
                          "device control register of port N (and no larger than the MPS of "
                          "every link a write crosses).  Change them only while every channel "
                          "is idle."),
        Register("DMA_TIMEOUT", 0x044, Access.RW, "completion timeout, core cycles",
                 value=DEFAULT_DMA_TIMEOUT,
                 notes="A read not completed this many cycles after it reached the head of the "
                       "read queue fails its channel with CPL_TIMEOUT (0: never).  A completion "
                       "arriving later is counted as UNEXPECTED_CPL on port N (POISONED if it "
                       "is poisoned)."),
        Register("DMA_INFO", 0x048, Access.CONST, "DMA build parameters", fields=(
            Field("channels", 0, 4, "DMA channels"),
            Field("slots", 4, 4, "register-mode slots per channel"),
            Field("tags", 8, 9, "reads outstanding at most (8-bit tags)"),
            Field("buffer_kib", 20, 12, "completion buffer, KiB"),
        ), value=(N_DMA_CHANNELS | N_DMA_SLOTS << 4 | dma_tags << 8
                  | (dma_buffer // 1024) << 20)),
    ]
    ch = dict(dims=(N_DMA_CHANNELS,), stride=0x40, index_args=("c",), group="CH")
    regs += [
        Register("CH_HEAD_LO", 0x300, Access.RW, "channel c: head pointer, bits [31:0]",
                 **ch, notes="Bit 0: the head descriptor is 64 bytes (`ext`).  Bits [4:1] are "
                             "ignored (descriptors are 32-byte aligned)."),
        Register("CH_HEAD_HI", 0x304, Access.RW, "channel c: head pointer, bits [63:32]", **ch),
        Register("CH_CTRL", 0x308, Access.ACTION, "channel c: start or abort", fields=(
            Field("start", 0, 1, "walk the chain from CH_HEAD"),
            Field("reg_start", 1, 1, "run register-mode slots 0 .. slots-1"),
            Field("abort", 2, 1, "stop the chain (error ABORTED)"),
            Field("slots", 8, 3, "register mode: number of slots, 1..4"),
        ), **ch),
        Register("CH_CFG", 0x30C, Access.RW, "channel c: interrupt vector",
                 fields=(Field("msi_vector", 0, 5, "MSI vector of descriptors with irq"),),
                 **ch),
        Register("CH_STATUS", 0x310, Access.RO, "channel c: state", fields=(
            Field("busy", 0, 1, "the channel runs a chain"),
            Field("start_ignored", 1, 1, "a start arrived while busy"),
            Field("error", 4, 4, "error code of the last chain (DMA_ERROR)"),
        ), **ch),
        Register("CH_DESC_DONE", 0x314, Access.RO, "channel c: descriptors done since the start",
                 **ch),
        Register("CH_BYTES_LO", 0x318, Access.RO, "channel c: bytes written since the start, "
                                                  "[31:0]", **ch),
        Register("CH_BYTES_HI", 0x31C, Access.RO, "channel c: bytes written, [63:32]", **ch),
        Register("CH_DESC_ADDR_LO", 0x320, Access.RO, "channel c: current or failing "
                                                      "descriptor address (register mode: slot), "
                                                      "[31:0]", **ch),
        Register("CH_DESC_ADDR_HI", 0x324, Access.RO, "channel c: descriptor address, [63:32]",
                 **ch),
    ]
    slot = dict(dims=(N_DMA_CHANNELS, N_DMA_SLOTS), stride=0x40, index_args=("c", "s"),
                group="SLOT")
    for name, off, doc in DMA_SLOT_MEMBERS:
        regs.append(Register(f"SLOT_{name}", 0x400 + off, Access.RW,
                             f"register-mode slot s of channel c: {doc}", **slot))
    target_fields = (Field("port", 0, 2, "output port: 0 N, 1 E, 2 W, 3 S"),
                     Field("enable", 31, 1, "entry takes part in matching"))
    for suffix, off, doc in _ROUTE_MEMBERS:
        regs.append(Register(f"ROUTE_{suffix}", 0x100 + off, Access.RW, f"route entry i: {doc}",
                             fields=target_fields if suffix == "TARGET" else (),
                             dims=(n_routes,), stride=0x20, index_args=("i",), group="ROUTE"))
    reserved = frozenset(p * N_REASONS + r for p in range(N_PORTS) for r in range(N_REASONS)
                         if reason_names[r] == "")
    regs.append(Register("COUNT", 0x800, Access.COUNTER, "event counter of port p, reason r",
                         dims=(N_PORTS, N_REASONS), stride=4,
                         index_names=(port_names, reason_names), index_args=("p", "r"),
                         reserved=reserved, notes=_COUNT_NOTES))
    return RegisterMap(
        name="peach2", title="PEACH2 control registers (BAR 0)", size=BAR_SIZE,
        registers=regs,
        groups=[Group("ROUTE", 0x100, 0x20, n_routes, "route table entry i", notes=_ROUTE_NOTES),
                Group("CH", 0x300, 0x40, N_DMA_CHANNELS, "DMA channel c", notes=_DMA_NOTES),
                Group("SLOT", 0x400, 0x40, N_DMA_CHANNELS * N_DMA_SLOTS,
                      "register-mode descriptor slot s of DMA channel c (element 4c + s)")],
        enums=[Enumeration("PORT", "port numbers (PORT_STATUS, COUNT and ROUTE_TARGET.port)",
                           _PORTS),
               Enumeration("COUNT_REASON", "counter reasons r of COUNT[p][r]", _reason_values()),
               Enumeration("DMA_ERROR", "DMA error codes (CH_STATUS.error)", _DMA_ERRORS)],
        params={"n_routes": n_routes, "buffer_beats": buffer_beats, "s_is_rc": bool(s_is_rc),
                "dma_tags": dma_tags, "dma_buffer": dma_buffer},
        notes=_ACCESS_NOTES, sections=[("Programming sequence", _SOFTWARE_NOTES)])


#: The map of the default build.
REGMAP = peach2_regmap()
#: Registers of the default build by name.
REGS = REGMAP.by_name
#: Port numbers (N, E, W, S).
#: One route table entry as the router sees it (registers ROUTE[i]; the router's lookup in
#: ``rtl/router/table.py``): a request to ``A`` matches when ``enable`` and
#: ``lower <= (A & mask) <= upper``; ``port`` numbers as :class:`Port`.
RouteEntry = data.StructLayout({
    "mask":   64,
    "lower":  64,
    "upper":  64,
    "port":   2,
    "enable": 1,
})

Port = enum.IntEnum("Port", {n: v for n, v, _ in _PORTS})
Port.__doc__ = "Port numbers, as in PORT_STATUS[p], COUNT[p][r] and ROUTE_TARGET.port."
#: Counter reasons r of COUNT[p][r] (reserved reasons left out).
CountReason = enum.IntEnum("CountReason", {n: v for n, v, _ in _REASONS})
CountReason.__doc__ = "Counter reasons r of COUNT[p][r]."
#: Reason name -> number, implemented reasons only.
COUNT_REASONS = {n: v for n, v, _ in _REASONS}

#: DMA error codes of CH_STATUS.error.
DmaError = enum.IntEnum("DmaError", {n: v for n, v, _ in _DMA_ERRORS})
DmaError.__doc__ = "DMA error codes (CH_STATUS.error)."


# -- generators -----------------------------------------------------------------------------------

def _to_json(rm):
    def reg(r):
        d = {
            "name": r.name, "offset": r.offset, "access": r.access.value, "doc": r.doc,
            "width": r.width,
            "fields": [{"name": f.name, "lsb": f.lsb, "width": f.width, "doc": f.doc}
                       for f in r.all_fields],
        }
        if r.access in (Access.CONST, Access.RW):
            d["value" if r.access is Access.CONST else "reset"] = r.value
        if r.dims:
            d.update(dims=list(r.dims), stride=r.stride,
                     index_names=[list(n) for n in r.index_names])
        if r.reserved:
            d["reserved_elements"] = sorted(r.reserved)
        if r.group:
            d["group"] = r.group
        return d
    doc = {
        "name": rm.name, "title": rm.title, "size": rm.size, "register_width": 32,
        "byte_order": "little", "params": rm.params,
        "registers": [reg(r) for r in rm.registers],
        "groups": [{"name": g.name, "base": g.base, "stride": g.stride, "count": g.count,
                    "doc": g.doc} for g in rm.groups],
        "enums": {e.name: [{"name": n, "value": v, "doc": d} for n, v, d in e.values if n]
                  for e in rm.enums},
    }
    return json.dumps(doc, indent=2) + "\n"


def _c_offset_expr(r):
    args = r.index_args or tuple(f"i{k}" for k in range(len(r.dims)))
    if len(r.dims) == 1:
        flat = f"({args[0]})"
    else:
        flat = f"({args[0]})"
        for a, size in zip(args[1:], r.dims[1:]):
            flat = f"({flat} * {size}u + ({a}))"
    return f"({r.offset:#05x}u + {r.stride:#x}u * {flat})", ", ".join(args)


def _c_comment(text):
    return text.replace("*/", "* /")


def _to_c_header(rm):
    P = rm.name.upper()
    guard = f"{P}_REGS_H"
    out = [
        f"/* {rm.title}.",
        " *",
        f" * Generated by `peach2 regmap --format c` from rtl/csr/regmap.py; do not edit.",
        f" * Build parameters: " + ", ".join(f"{k}={v}" for k, v in rm.params.items()) + ".",
        " */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        f"#define {P}_REGS_SIZE {rm.size:#x}u",
        "",
    ]
    for g in rm.groups:
        out += [f"/* {g.name}[i]: {_c_comment(g.doc)} */",
                f"#define {P}_{g.name}_BASE {g.base:#05x}u",
                f"#define {P}_{g.name}_STRIDE {g.stride:#x}u",
                f"#define {P}_{g.name}_COUNT {g.count}u",
                f"#define {P}_{g.name}_OFFSET(i) ({P}_{g.name}_BASE + {P}_{g.name}_STRIDE * (i))",
                ""]
    for r in rm.registers:
        N = f"{P}_{r.name}"
        out.append(f"/* {r.name}: {_c_comment(r.doc)} ({_ACCESS_TEXT[r.access]}) */")
        if r.dims:
            expr, args = _c_offset_expr(r)
            out.append(f"#define {N}_OFFSET({args}) {expr}")
            out.append(f"#define {N}_STRIDE {r.stride:#x}u")
            if len(r.dims) == 1:
                out.append(f"#define {N}_COUNT {r.dims[0]}u")
            else:
                for k, size in enumerate(r.dims):
                    out.append(f"#define {N}_DIM{k} {size}u")
            if r.group:
                g = next(g for g in rm.groups if g.name == r.group)
                out.append(f"#define {N}_MEMBER_OFFSET {r.offset - g.base:#04x}u")
        else:
            out.append(f"#define {N}_OFFSET {r.offset:#05x}u")
        if r.access is Access.CONST:
            out.append(f"#define {N}_VALUE {r.value:#010x}u")
        elif r.access is Access.RW and r.value:
            out.append(f"#define {N}_RESET {r.value:#010x}u")
        for f in r.fields:
            F = f"{N}_{f.name.upper()}"
            out += [f"#define {F}_SHIFT {f.lsb}",
                    f"#define {F}_WIDTH {f.width}",
                    f"#define {F}_MASK {f.mask:#010x}u"]
        out.append("")
    for e in rm.enums:
        tag = f"{rm.name}_{e.name.lower()}"
        out.append(f"/* {_c_comment(e.doc)} */")
        out.append(f"enum {tag} {{")
        for n, v, d in e.values:
            if n:
                out.append(f"\t{P}_{e.name}_{n} = {v},\t/* {_c_comment(d)} */")
        out.append(f"\t{P}_{e.name}_COUNT = {len(e.values)}")
        out.append("};")
        out.append("")
    out.append(f"#endif /* {guard} */")
    return "\n".join(out) + "\n"


def _md_value(r):
    if r.access is Access.CONST:
        return f"`{r.value:#010x}`"
    if r.access is Access.RW:
        return f"`{r.value:#x}`"
    return "—"


def _md_offset(r):
    if not r.dims:
        return f"`{r.offset:#05x}`"
    expr = " + ".join([f"{r.offset:#05x}"] + [f"{r.stride:#x}*{a}" for a in
                                               _flat_terms(r)])
    return f"`{expr}`"


def _flat_terms(r):
    args = r.index_args or tuple(f"i{k}" for k in range(len(r.dims)))
    if len(r.dims) == 1:
        return [args[0]]
    return [f"({args[0]}*{r.dims[1]} + {args[1]})"]


def _md_name(r):
    args = r.index_args or ()
    return r.name + "".join(f"[{a}]" for a in args)


def _to_markdown(rm):
    out = [
        f"<!-- Generated by `peach2 regmap --format md -o docs/registers.md` from",
        f"     rtl/csr/regmap.py; do not edit. -->",
        "",
        f"# {rm.title}",
        "",
        "One Python description (`rtl/csr/regmap.py`) generates this page, the gateware decode "
        "(`peach2.csr.CSR`), the C header (`peach2 regmap --format c`) and JSON "
        "(`peach2 regmap --format json`).  Testbenches and the host driver model "
        "(`peach2.sim.driver.Driver`) read the same description.",
        "",
        "Build parameters of this page: " +
        ", ".join(f"`{k}` = {v}" for k, v in rm.params.items()) + ".",
        "",
        "## Access rules",
        "",
        rm.notes,
        "",
        "Access kinds: **RO const** fixed when the gateware is generated; **RO** value from the "
        "hardware; **RW** read-write; **WO action** a write acts, reads return 0; **RO "
        "counter** saturating event counter.",
        "",
    ]
    for title, text in rm.sections:
        out += [f"## {title}", "", text, ""]
    out += [
        "## Summary",
        "",
        "| Offset | Register | Access | Value / reset | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rm.registers:
        out.append(f"| {_md_offset(r)} | [{_md_name(r)}](#{r.name.lower()}) | "
                   f"{_ACCESS_TEXT[r.access]} | {_md_value(r)} | {r.doc} |")
    out += ["", "Every other offset reads 0; writes there are ignored.", ""]
    out += ["## Registers", ""]
    groups_done = set()
    for r in rm.registers:
        if r.group:
            if r.group not in groups_done:
                groups_done.add(r.group)
                out += _md_group(rm, r.group)
            continue
        out.append(f"### {r.name}")
        out.append("")
        where = f"offset {_md_offset(r)}"
        if r.dims:
            dims = " x ".join(f"{a} = 0..{n - 1}" for a, n in
                              zip(r.index_args or (), r.dims))
            where += f", {dims}"
        out.append(f"{r.doc[0].upper() + r.doc[1:]}; {_ACCESS_TEXT[r.access]}, {where}.")
        out.append("")
        if r.access is Access.CONST:
            out += [f"Value `{r.value:#010x}`.", ""]
        out += ["| Bits | Field | Description |", "| --- | --- | --- |"]
        for f in sorted(r.all_fields, key=lambda f: -f.lsb):
            out.append(f"| {f.bits} | `{f.name}` | {f.doc or '—'} |")
        out.append("")
        if r.notes:
            out += [r.notes, ""]
        if len(r.dims) == 2 and r.index_names:
            out += _md_matrix(r)
    for e in rm.enums:
        out += [f"## {e.name}", "", e.doc[0].upper() + e.doc[1:] + ".", "",
                "| Value | Name | Meaning |", "| --- | --- | --- |"]
        for n, v, d in e.values:
            out.append(f"| {v} | {f'`{n}`' if n else '—'} | {d} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _md_group(rm, name):
    g = next(g for g in rm.groups if g.name == name)
    members = [r for r in rm.registers if r.group == name]
    access = {_ACCESS_TEXT[r.access] for r in members}
    out = [f"### {g.name}[i]", "",
           f"{g.doc[0].upper() + g.doc[1:]}; {', '.join(sorted(access))}, at "
           f"`{g.base:#05x} + {g.stride:#x}*i`, i = 0..{g.count - 1}.", "",
           "| Offset in entry | Register | Reset | Description |", "| --- | --- | --- | --- |"]
    for r in members:
        doc = r.doc.split(": ", 1)[-1]
        out.append(f"| `+{r.offset - g.base:#04x}` | <a id=\"{r.name.lower()}\"></a>"
                   f"`{r.name}[i]` | {_md_value(r)} | {doc} |")
    out.append("")
    for r in members:
        if r.fields:
            out += [f"`{r.name}` fields:", "", "| Bits | Field | Description |",
                    "| --- | --- | --- |"]
            for f in sorted(r.fields, key=lambda f: -f.lsb):
                out.append(f"| {f.bits} | `{f.name}` | {f.doc or '—'} |")
            out.append("")
    return out + [g.notes, ""]


def _md_matrix(r):
    rows, cols = r.index_names
    out = ["Offsets:", "",
           "| r | reason | " + " | ".join(rows) + " |",
           "| --- | --- | " + " | ".join("---" for _ in rows) + " |"]
    for j, reason in enumerate(cols):
        cells = []
        for i in range(len(rows)):
            flat = i * r.dims[1] + j
            cells.append("—" if flat in r.reserved else f"`{r.offset + r.stride * flat:#05x}`")
        out.append(f"| {j} | {f'`{reason}`' if reason else 'reserved'} | " +
                   " | ".join(cells) + " |")
    return out + [""]
