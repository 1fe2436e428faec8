"""Chip-wide parameters and numbering of PEACH2, in one place.

Sizes every block agrees on (ports, route entries, DMA channels and slots, BAR 0), the defaults
of a build, and the numbering of ports, counter reasons and DMA error codes.  The register map
(:mod:`peach2.csr.regmap`), the router (:mod:`peach2.router`), the DMA controller
(:mod:`peach2.dma`), the top and the simulation models import them from here; the register map
documents them (``docs/registers.md``).  Nothing here depends on another part of the chip.

Tables are ``(name, number, description)`` rows; the ``IntEnum`` classes give the numbers by
name for Python code (the router makes Amaranth enums of its own from the same tables).
"""

import enum

__all__ = [
    "BAR_SIZE", "N_PORTS", "N_REASONS", "MAX_ROUTES", "MAX_BUFFER_BEATS", "DEFAULT_N_ROUTES",
    "N_WINDOWS", "N_NODES",
    "DEFAULT_BUFFER_BEATS", "N_DMA_CHANNELS", "N_DMA_SLOTS", "DEFAULT_DMA_TAGS",
    "DEFAULT_DMA_BUFFER", "DEFAULT_DMA_TIMEOUT", "PORT_TABLE", "REASON_TABLE", "DMA_ERROR_TABLE", "Port", "CountReason",
    "COUNT_REASONS", "DmaError", "PUT_BAR", "PUT_WINDOW", "PUT_QUEUE", "PUT_ERROR_TABLE",
    "PutError",
]

BAR_SIZE = 0x1000              # BAR 0, the control registers: 4 KiB
N_PORTS = 4                    # 002 section 3.3: N, E, W, S
N_REASONS = 16                 # counter reasons per port (COUNT[p][r]), 14 of them implemented
N_WINDOWS = 8                  # protection windows (WIN[w]) of a node
N_NODES = 16                   # node numbers a window's source mask names (NODE.node_id is 4 bits)
MAX_ROUTES = 16                # route entries that fit below the counters at 0x800
MAX_BUFFER_BEATS = (1 << 16) - 1   # CONFIG.buffer_beats is 16 bits wide
DEFAULT_N_ROUTES = 8           # route entries of the default build (the top's minimum)
DEFAULT_BUFFER_BEATS = 128     # the top's default (eight 256-byte TLPs)
N_DMA_CHANNELS = 4             # 000 section 2.2: four DMA channels
N_DMA_SLOTS = 4                # register-mode descriptor slots per channel
DEFAULT_DMA_TAGS = 128         # reads outstanding (tags) of the default build
DEFAULT_DMA_BUFFER = 16384     # completion buffer bytes of the default build
DEFAULT_DMA_TIMEOUT = 250_000  # completion timeout, core cycles (1 ms at 250 MHz)
PUT_BAR = 4                    # inline puts are written into BAR 4 of port N (docs/put.md)
PUT_WINDOW = 0x1000            # BAR 4's size: 64 put slots of 64 bytes, one queue
PUT_QUEUE = 16                 # inline puts the chip holds before it back-pressures N

#: The four PCIe ports (002 section 3.3), numbered as in PORT_STATUS[p], COUNT[p][r] and
#: ROUTE_TARGET.port.
PORT_TABLE = (
    ("N", 0, "north: the host (root complex side)"),
    ("E", 1, "east: ring neighbour"),
    ("W", 2, "west: ring neighbour"),
    ("S", 3, "south: the other ring"),
)

#: Per-port event counter reasons r of COUNT[p][r] (numbers missing here are reserved).
REASON_TABLE = (
    ("RX_TLPS", 0, "TLPs from the port that reached the router (at their first beat)"),
    ("TX_TLPS", 1, "TLPs sent whole on the port (not dropped, not nullified)"),
    ("UNROUTABLE", 2, "requests no enabled route entry matched"),
    ("WINDOW_CLOSED", 3, "requests dropped because PIO_ENABLE or ROUTE_ENABLE is off"),
    ("UNSUPPORTED", 4, "configuration, I/O, message TLPs; locked reads (UR as CplLk); "
                       "N requests outside BARs 0, 2, 4"),
    ("READ_REJECTED", 5, "reads from E/W/S, and host reads into the TCA window or the put window (BAR 4)"),
    ("MALFORMED", 6, "TLPs whose framing disagrees with their header, or with a TLP prefix"),
    ("POISONED", 7, "TLPs with EP (poisoned) set"),
    ("RX_ERR", 8, "TLPs the hard IP flagged with rx_st_err"),
    ("UNEXPECTED_CPL", 9, "completions that match no outstanding request"),
    ("UR_SENT", 10, "UR completions generated for requests from this port"),
    ("PROTECTED", 11, "writes toward this node's host refused by the protection windows "
                      "(PROT_CONTROL.enable; E, W and S only)"),
    ("LINK_DOWN", 12, "routed TLPs that arrived on this port and were dropped because their "
                      "route leaves through a port whose link is down (PORT_STATUS.dropping)"),
    ("LINK_FLUSHED", 13, "TLPs queued in the chip toward this port and discarded at its output "
                         "because its link went down (one cut off mid-TLP included)"),
)

#: DMA error codes of CH_STATUS.error.
DMA_ERROR_TABLE = (
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
    ("DST_LINK_DOWN", 9, "a destination or completion-write address is routed through a port "
                         "whose link is down (PORT_STATUS.dropping)"),
)

#: Error codes of PUT_STATUS.error (inline puts refused).
PUT_ERROR_TABLE = (
    ("NONE", 0, "no error"),
    ("WRITE_MALFORMED", 1, "a write into BAR 4 that is not one 64-byte memory write of whole "
                           "DWs at a 64-byte aligned offset (or was cut short with err)"),
    ("DESC_MALFORMED", 2, "a put descriptor failed its checks: magic, reserved bits, length "
                          "0 or over 32, seq_addr not 4-byte aligned (with seq)"),
    ("CROSSES_PAGE", 3, "the destination bytes cross a 4 KiB boundary"),
    ("DST_UNROUTABLE", 7, "the destination or completion-write address matched no enabled "
                          "route (as DmaError)"),
    ("DST_LINK_DOWN", 9, "the destination or completion-write address is routed through a port "
                         "whose link is down (as DmaError)"),
)

#: Port numbers (N, E, W, S).
Port = enum.IntEnum("Port", {n: v for n, v, _ in PORT_TABLE})
Port.__doc__ = "Port numbers, as in PORT_STATUS[p], COUNT[p][r] and ROUTE_TARGET.port."
#: Counter reasons r of COUNT[p][r] (reserved reasons left out).
CountReason = enum.IntEnum("CountReason", {n: v for n, v, _ in REASON_TABLE})
CountReason.__doc__ = "Counter reasons r of COUNT[p][r]."
#: Reason name -> number, implemented reasons only.
COUNT_REASONS = {n: v for n, v, _ in REASON_TABLE}
#: DMA error codes of CH_STATUS.error.
DmaError = enum.IntEnum("DmaError", {n: v for n, v, _ in DMA_ERROR_TABLE})
DmaError.__doc__ = "DMA error codes (CH_STATUS.error)."
#: Inline put error codes of PUT_STATUS.error.
PutError = enum.IntEnum("PutError", {n: v for n, v, _ in PUT_ERROR_TABLE})
PutError.__doc__ = "Inline put error codes (PUT_STATUS.error)."
