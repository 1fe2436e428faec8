"""The register-map framework: registers, fields, groups and enumerations as Python data.

A :class:`RegisterMap` is a list of :class:`Register` (offsets, :class:`Access` kinds,
:class:`Field` bits, reset values, arrays and the names of their indices) with the
:class:`Group` records and :class:`Enumeration` values they use.  It checks itself when built
(alignment, overlaps, fields within the width, values within the fields) and answers lookups by
name (``rm["ID"]``) and by offset (:meth:`RegisterMap.at`).  The chip's map is built in
:mod:`peach2.csr.regmap`; the documents are rendered from it by :mod:`peach2.csr.render`.
"""

import enum
from dataclasses import dataclass, field

__all__ = ["Access", "ACCESS_TEXT", "Field", "Register", "Group", "Enumeration", "RegisterMap"]


class Access(enum.Enum):
    """How software and hardware see a register."""
    CONST   = "ro-const"    #: read-only constant, fixed when the gateware is generated
    RO      = "ro"          #: read-only, value from the hardware (an ``In`` port)
    RW      = "rw"          #: read-write storage, value to the hardware (an ``Out`` port)
    ACTION  = "wo-action"   #: a write triggers an action; reads return 0
    COUNTER = "ro-counter"  #: read-only saturating event counter (``In`` strobes)


#: How documents name each access kind.
ACCESS_TEXT = {
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
