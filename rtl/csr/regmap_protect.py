"""Registers of the write protection: PROT_* (0x050-0x05F) and the windows WIN[w] (0x900).

Part of the register map (:mod:`peach2.csr.regmap`), kept in a file of its own.  The idea is
Tofu's STAG (004: memory is registered before a remote node may write it by RDMA); the behaviour
is in ``docs/errors.md`` ("Write protection") and in :class:`~peach2.router.ingress.Ingress`.
"""

from ..params import N_NODES, N_WINDOWS, PORT_TABLE
from .description import Access, Field, Group, Register

__all__ = ["protection_registers", "window_registers", "window_group", "WINDOW_MEMBERS",
           "WIN_BASE", "WIN_PAGE_BITS"]

#: The protection window group's base offset and stride.
WIN_BASE, WIN_STRIDE = 0x900, 0x20
#: Windows are whole 4 KiB pages: address bits [11:0] of BASE and LIMIT are not stored.
WIN_PAGE_BITS = 12

#: Window members: (name, offset in the window, description).
WINDOW_MEMBERS = (
    ("BASE_LO", 0x00, "first byte's address, bits [31:12]"),
    ("BASE_HI", 0x04, "first byte's address, bits [63:32]"),
    ("LIMIT_LO", 0x08, "last byte's address, bits [31:12] (bits [11:0] are taken as 0xFFF)"),
    ("LIMIT_HI", 0x0C, "last byte's address, bits [63:32]"),
    ("CTRL", 0x10, "open, writable"),
    ("SOURCES", 0x14, "source nodes the window applies to"),
)

_WINDOW_NOTES = """\
Protection windows (the idea is Tofu's STAG, 004 in [papers](papers.md): a remote node may write
only memory its owner has registered). With `PROT_CONTROL.enable` set, a memory write arriving on
E, W or S whose route leaves through N (a write into this node's host or GPU memory) is passed only
if it lies entirely in an open window that is writable and admits its source node, and in no open
read-only window that admits its source node; otherwise the whole TLP is dropped, counted in
`COUNT[p][PROTECTED]` of the port it arrived on, and its source recorded in `PROT_STATUS` and
`PROT_SOURCES`.

- Addresses are those of the TCA space as the write arrives (the node's region, before the node
  offset is subtracted): host and GPU memory alike, any range of whole 4 KiB pages.  Window *w*
  covers `BASE` to `LIMIT | 0xFFF`, both 64-bit (`_LO` bits [31:12], `_HI` bits [63:32]); it is
  empty when `LIMIT < BASE`.
- "Entirely": the first byte is in the window and the TLP does not cross a 4 KiB boundary (the
  PCIe base specification forbids requests that do; such a TLP is refused whatever the windows
  say).  A write straddling a window's end therefore is refused whole, never truncated.
- The source node is bits [15:8] (the bus number) of the write's requester ID: the sending chip
  puts its `NODE.node_id` there when its `PROT_CONTROL.stamp` is set (host PIO writes into the TCA
  window and every DMA write).  `SOURCES` bit *n* admits node *n*; a bus number of 16 or more
  matches no window.
- Each TLP is checked once, against the registers in the cycle its header is classified: a
  window opened or closed while traffic runs applies to whole TLPs.  Rewrite a window as a route
  entry: clear `WIN_CTRL.open`, write `BASE`, `LIMIT` and `SOURCES`, then `WIN_CTRL` with `open`
  (the driver's `set_window` does this).
- Not checked: the host's own writes looping back to N, the DMA's writes to this node's host (both
  programmed by this node), writes passing through toward another port (checked where they
  arrive), reads (refused anyway: READ_REJECTED)."""

_PROT_NOTES = """\
After reset `PROT_CONTROL` is 0: nothing is checked and no requester ID is changed, so a cluster
programmed without windows works as before.  Enable `stamp` on every node before `enable` on
any, and open the windows a node's peers need before its `enable`."""


def protection_registers():
    """PROT_CONTROL, PROT_STATUS, PROT_SOURCES, PROT_CLEAR (0x050-0x05F)."""
    ports = ", ".join(f"{v} {n}" for n, v, _ in PORT_TABLE)
    return [
        Register("PROT_CONTROL", 0x050, Access.RW, "write protection enables", fields=(
            Field("enable", 0, 1, "check writes from E, W and S toward N against WIN[w]"),
            Field("stamp", 1, 1, "put NODE.node_id into bits [15:8] of the requester ID of "
                                 "the host's TCA-window writes and of the DMA's writes"),
        ), notes=_PROT_NOTES),
        Register("PROT_STATUS", 0x054, Access.RO, "the last write the windows refused",
                 width=16, fields=(
                     Field("valid", 0, 1, "a write was refused since the last PROT_CLEAR"),
                     Field("port", 1, 2, f"port it arrived on ({ports})"),
                     Field("source", 8, 8, "its source: requester ID bits [15:8] (the node)"),
                 ), notes="When writes on several ports are refused in the same cycle, the "
                          "lowest-numbered port's is recorded."),
        Register("PROT_SOURCES", 0x058, Access.RO, "every source refused since PROT_CLEAR",
                 fields=(Field("nodes", 0, N_NODES, "bit n: a write from node n was refused"),
                         Field("other", 31, 1, "a write with a source of 16 or more was "
                                               "refused"))),
        Register("PROT_CLEAR", 0x05C, Access.ACTION, "clear PROT_STATUS and PROT_SOURCES",
                 fields=(Field("clear", 0, 1, "write 1 to clear them (a refusal in the same "
                                              "cycle is recorded after the clear)"),)),
    ]


def window_registers():
    """The WIN group: N_WINDOWS protection windows (0x900)."""
    win = dict(dims=(N_WINDOWS,), stride=WIN_STRIDE, index_args=("w",), group="WIN")
    page = (Field("addr", WIN_PAGE_BITS, 32 - WIN_PAGE_BITS, "address bits [31:12]"),)
    fields = {
        "BASE_LO": page, "LIMIT_LO": page,
        "CTRL": (Field("open", 0, 1, "the window takes part in the check"),
                 Field("writable", 1, 1, "1: admits writes; 0: read-only, refuses them")),
        "SOURCES": (Field("nodes", 0, N_NODES, "bit n: applies to writes from node n"),),
    }
    return [Register(f"WIN_{name}", WIN_BASE + off, Access.RW, f"window w: {doc}",
                     fields=fields.get(name, ()), **win)
            for name, off, doc in WINDOW_MEMBERS]


def window_group():
    """The WIN group record for the document."""
    return Group("WIN", WIN_BASE, WIN_STRIDE, N_WINDOWS, "protection window w",
                 notes=_WINDOW_NOTES)
