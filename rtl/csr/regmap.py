"""The PEACH2 register map, described once.

Everything about the control registers (BAR 0) is written here as Python data: offsets, access
kinds, fields, reset values, arrays and the names of their indices (the framework is
:mod:`peach2.csr.description`, the documents are rendered by :mod:`peach2.csr.render`).  The
gateware decode (:class:`~peach2.csr.block.CSR`), ``docs/registers.md``, the C header, the JSON
description, the simulated host driver (``docs/sim/driver.md``) and the testbenches all read it;
nobody types an offset twice.  Regenerate the documents with ``peach2 regmap --format md|c|json``.

For testbenches and scripts the default map is exported as :data:`REGMAP`, with :data:`REGS`
(register by name: ``REGS["OFFSET_LO"].offset``).  The chip-wide sizes and numbering the map
documents (``N_DMA_CHANNELS``, :class:`Port`, :class:`CountReason`, :class:`DmaError` ...) live in
:mod:`peach2.params` and the framework's names (:class:`Register`, :class:`Access` ...) in
:mod:`peach2.csr.description`; both are importable from here too, as is ``RouteEntry``
(:mod:`peach2.router.common`).
"""

from ..params import (
    BAR_SIZE,
    COUNT_REASONS,
    DEFAULT_BUFFER_BEATS,
    DEFAULT_DMA_BUFFER,
    DEFAULT_DMA_TAGS,
    DEFAULT_DMA_TIMEOUT,
    DEFAULT_N_ROUTES,
    DMA_ERROR_TABLE,
    MAX_BUFFER_BEATS,
    MAX_ROUTES,
    N_DMA_CHANNELS,
    N_DMA_SLOTS,
    N_PORTS,
    N_REASONS,
    PORT_TABLE,
    PUT_ERROR_TABLE,
    REASON_TABLE,
    CountReason,
    DmaError,
    Port,
)
from ..router.common import RouteEntry
from ..signatures import CH_CTRL_FIELDS, CH_STATUS_FIELDS, DMA_CONFIG_FIELDS, PUT_STATUS_FIELDS
from .description import Access, Enumeration, Field, Group, Register, RegisterMap
from .regmap_protect import protection_registers, window_group, window_registers

__all__ = [
    "Access", "Field", "Register", "Group", "Enumeration", "RegisterMap",
    "peach2_regmap", "REGMAP", "REGS", "Port", "CountReason", "COUNT_REASONS", "RouteEntry",
    "ID_VALUE", "VERSION_MAJOR", "VERSION_MINOR", "N_PORTS", "N_REASONS", "MAX_ROUTES",
    "MAX_BUFFER_BEATS", "DEFAULT_BUFFER_BEATS", "BAR_SIZE", "N_DMA_CHANNELS", "N_DMA_SLOTS", "DMA_SLOT_MEMBERS",
    "DmaError", "DEFAULT_DMA_TAGS", "DEFAULT_DMA_BUFFER", "DEFAULT_DMA_TIMEOUT",
]

ID_VALUE = 0x50434832          # "PCH2"
VERSION_MAJOR = 0
VERSION_MINOR = 2

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
counter (an event in that same cycle counts as the first after the clear).  Reasons 12-15 are
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
The simulated host driver `Driver` ([driver](sim/driver.md)) does all of this by
name; a C driver follows the same steps with the header of `peach2 regmap --format c`.

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
6. Watch `COUNT[p][r]` (`Driver.counters()`), clear them with `COUNTER_CLEAR`.
7. Optionally, write protection (`docs/errors.md`): `PROT_CONTROL.stamp` on every node, then on
   each node its windows `WIN[w]` (`Driver.set_window`) and `PROT_CONTROL.enable`."""


_DMA_NOTES = """\
Four channels (000 section 2.2), each with the registers `CH_*[c]` at `0x300 + 0x40 * c` and four
register-mode descriptor slots `SLOT_*[c][s]` at `0x400 + 0x100 * c + 0x40 * s`.  The
descriptor format is in `docs/dma.md` (generated from `rtl/dma/descriptor.py`).
- Chained mode: write the head pointer (`CH_HEAD`, bit 0 set when the head descriptor is 64
  bytes), then `CH_CTRL.start`.  The engine walks the chain until a descriptor with
  `control.end`.
- Register mode: write slots `0 .. n-1` of the channel (the same fields as a descriptor,
  without `next`), then `CH_CTRL` with `reg_start` and `slots` = n.  No descriptor is fetched.
- Queue mode (register mode appended while it runs): `CH_CTRL` with `reg_start`, `queue` and
  `slots` = n (0..4) runs slots `0 .. n-1`, then waits (busy); write the next slots (after
  the last appended, wrapping after 3) and `CH_CTRL` with `append` and `slots` = k to run
  them; `CH_CTRL.stop` ends the queue once they are done.  At most four slots are held
  (`CH_STATUS.held`: appended, not yet closed); a held slot is not written (the write is
  dropped, `CH_STATUS.slot_refused`), an append that would hold more is refused
  (`CH_STATUS.append_refused`), and neither changes what runs.
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
    named = {v: (n, d) for n, v, d in REASON_TABLE}
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
    ("CONTROL", 0x14, "`control` (`end`, `adj` and `next` are ignored)"),
    ("COUNT", 0x20, "`count` (used with `control.ext`)"),
    ("SRC_GAP", 0x24, "`src_gap`"),
    ("DST_GAP", 0x28, "`dst_gap`"),
    ("SEQ_VALUE", 0x2C, "`seq_value`"),
    ("SEQ_ADDR_LO", 0x30, "`seq_addr` [31:0]"),
    ("SEQ_ADDR_HI", 0x34, "`seq_addr` [63:32]"),
)


def _port_names():
    """Port names in number order, for index names."""
    return tuple(n for n, _, _ in PORT_TABLE)


def _reason_names():
    """Reason names by number, ``""`` for a reserved reason."""
    return tuple(n or "" for n, _, _ in _reason_values())


def _chip_registers(n_routes, buffer_beats, s_is_rc):
    """Identification, node, control, port status, PCIe ID and MSI (0x000-0x037)."""
    config = Register("CONFIG", 0x008, Access.CONST, "build parameters", fields=(
        Field("n_routes", 0, 8, "route table entries"),
        Field("s_is_rc", 8, 1, "port S is a root port"),
        Field("n_ports", 12, 4, "PCIe ports (4: N, E, W, S)"),
        Field("buffer_beats", 16, 16, "router buffer depth, stream beats"),
    ))
    config_value = config.encode(n_routes=n_routes, s_is_rc=int(bool(s_is_rc)),
                                 n_ports=N_PORTS, buffer_beats=buffer_beats)
    return [
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
                 stride=4, index_names=(_port_names(),), index_args=("p",), fields=(
                     Field("link_up", 0, 1, "data link layer up"),
                     Field("ltssm", 1, 5, "hard IP LTSSM state"),
                     Field("dropping", 6, 1, "the router drops TLPs toward this port: its link "
                                             "is down, or came back and what the chip held for "
                                             "it is still being flushed"),
                 ), notes="`link_up` and `ltssm` are the hard IP's status one cycle late. "
                          "`dropping` rises with the link's loss and falls once the link is up "
                          "again and no TLP queued before is left in the chip; after a reset, "
                          "until the link's first loss, as soon as the link is up and nothing is "
                          "held for the port ([errors.md](errors.md), \"Reset and link loss\")."),
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


def _fields(rows):
    """``Field`` s from ``(name, lsb, width, description)`` rows (:mod:`peach2.signatures`)."""
    return tuple(Field(*row) for row in rows)


def _dma_registers(dma_tags, dma_buffer):
    """DMA configuration and build parameters (0x040-0x04B)."""
    return [
        Register("DMA_CONFIG", 0x040, Access.RW, "DMA request sizes and tags",
                 value=(1 << 0) | (2 << 4) | (1 << 8),
                 fields=_fields(DMA_CONFIG_FIELDS),
                 notes="Set `mps` and `mrrs` to the values the host programmed into the "
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


def _put_registers():
    """The put engine's registers (0x060-0x06F); the puts themselves are written into BAR 4."""
    return [
        Register("PUT_CFG", 0x060, Access.RW, "inline puts: interrupt vector",
                 fields=(Field("msi_vector", 0, 5, "MSI vector of puts with irq"),)),
        Register("PUT_STATUS", 0x064, Access.RO, "inline puts: queue and refusals",
                 fields=_fields(PUT_STATUS_FIELDS),
                 notes="A refused put is dropped whole (nothing of it is sent) and the puts "
                       "after it go on; `docs/put.md` lists what is refused."),
        Register("PUT_DONE", 0x068, Access.RO, "inline puts sent (wrapping count)",
                 notes="Counts a put when its last write (the completion write, with `seq`) "
                       "has entered the output port of this chip."),
        Register("PUT_CLEAR", 0x06C, Access.ACTION, "clear PUT_STATUS.error and .refused",
                 fields=(Field("clear", 0, 1, "1 clears"),)),
    ]


def _channel_registers():
    """The CH group: one record of registers per DMA channel (0x300)."""
    ch = dict(dims=(N_DMA_CHANNELS,), stride=0x40, index_args=("c",), group="CH")
    return [
        Register("CH_HEAD_LO", 0x300, Access.RW, "channel c: head pointer, bits [31:0]",
                 **ch, notes="Bit 0: the head descriptor is 64 bytes (`ext`).  Bits [4:1]: "
                             "descriptors that follow the head immediately in memory, up to "
                             "15 (`CH_CTRL.adj` announces up to 63)."),
        Register("CH_HEAD_HI", 0x304, Access.RW, "channel c: head pointer, bits [63:32]", **ch),
        Register("CH_CTRL", 0x308, Access.ACTION, "channel c: start or abort",
                 fields=_fields(CH_CTRL_FIELDS), **ch),
        Register("CH_CFG", 0x30C, Access.RW, "channel c: interrupt vector",
                 fields=(Field("msi_vector", 0, 5, "MSI vector of descriptors with irq"),),
                 **ch),
        Register("CH_STATUS", 0x310, Access.RO, "channel c: state",
                 fields=_fields(CH_STATUS_FIELDS), **ch),
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


def _slot_registers():
    """The SLOT group: register-mode descriptor slots (0x400)."""
    slot = dict(dims=(N_DMA_CHANNELS, N_DMA_SLOTS), stride=0x40, index_args=("c", "s"),
                group="SLOT")
    return [Register(f"SLOT_{name}", 0x400 + off, Access.RW,
                     f"register-mode slot s of channel c: {doc}", **slot)
            for name, off, doc in DMA_SLOT_MEMBERS]


def _route_registers(n_routes):
    """The ROUTE group: the route table (0x100)."""
    target_fields = (Field("port", 0, 2, "output port: 0 N, 1 E, 2 W, 3 S"),
                     Field("enable", 31, 1, "entry takes part in matching"))
    return [Register(f"ROUTE_{suffix}", 0x100 + off, Access.RW, f"route entry i: {doc}",
                     fields=target_fields if suffix == "TARGET" else (),
                     dims=(n_routes,), stride=0x20, index_args=("i",), group="ROUTE")
            for suffix, off, doc in _ROUTE_MEMBERS]


def _counter_registers():
    """COUNT[p][r], the event counters (0x800)."""
    port_names, reason_names = _port_names(), _reason_names()
    reserved = frozenset(p * N_REASONS + r for p in range(N_PORTS) for r in range(N_REASONS)
                         if reason_names[r] == "")
    return [Register("COUNT", 0x800, Access.COUNTER, "event counter of port p, reason r",
                     dims=(N_PORTS, N_REASONS), stride=4,
                     index_names=(port_names, reason_names), index_args=("p", "r"),
                     reserved=reserved, notes=_COUNT_NOTES)]


def peach2_regmap(*, n_routes=DEFAULT_N_ROUTES, buffer_beats=DEFAULT_BUFFER_BEATS, s_is_rc=True,
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
    regs = (_chip_registers(n_routes, buffer_beats, s_is_rc)
            + _dma_registers(dma_tags, dma_buffer) + _route_registers(n_routes)
            + _channel_registers() + _slot_registers() + _counter_registers()
            + protection_registers() + window_registers() + _put_registers())
    return RegisterMap(
        name="peach2", title="PEACH2 control registers (BAR 0)", size=BAR_SIZE,
        registers=regs,
        groups=[Group("ROUTE", 0x100, 0x20, n_routes, "route table entry i", notes=_ROUTE_NOTES),
                Group("CH", 0x300, 0x40, N_DMA_CHANNELS, "DMA channel c", notes=_DMA_NOTES),
                Group("SLOT", 0x400, 0x40, N_DMA_CHANNELS * N_DMA_SLOTS,
                      "register-mode descriptor slot s of DMA channel c (element 4c + s)"),
                window_group()],
        enums=[Enumeration("PORT", "port numbers (PORT_STATUS, COUNT and ROUTE_TARGET.port)",
                           PORT_TABLE),
               Enumeration("COUNT_REASON", "counter reasons r of COUNT[p][r]", _reason_values()),
               Enumeration("DMA_ERROR", "DMA error codes (CH_STATUS.error)", DMA_ERROR_TABLE),
               Enumeration("PUT_ERROR", "inline put error codes (PUT_STATUS.error)",
                           PUT_ERROR_TABLE)],
        params={"n_routes": n_routes, "buffer_beats": buffer_beats, "s_is_rc": bool(s_is_rc),
                "dma_tags": dma_tags, "dma_buffer": dma_buffer},
        notes=_ACCESS_NOTES, sections=[("Programming sequence", _SOFTWARE_NOTES)])


#: The map of the default build.
REGMAP = peach2_regmap()
#: Registers of the default build by name.
REGS = REGMAP.by_name
