"""Reference model of the PEACH2 router's decisions, written from 002 section 3.5 and docs/.

:func:`route` says what the chip must do with one TLP arriving on one port: forward it to a port
(and how it looks when it leaves), hand it to the register block, or drop it for a reason and
perhaps answer it with an Unsupported Request completion.  Tests compare the chip with it.
"""

from dataclasses import dataclass, field

from cocotbext.pcie.core.tlp import Tlp, TlpType

from peach2.params import PUT_BAR

__all__ = ["RouteEntry", "RouterState", "Decision", "route", "translate", "PORT_NAMES"]

PORT_NAMES = ("N", "E", "W", "S")
_MEM_WRITE = (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
_MEM_READ = (TlpType.MEM_READ, TlpType.MEM_READ_64)
_CPL = (TlpType.CPL, TlpType.CPL_DATA, TlpType.CPL_LOCKED, TlpType.CPL_LOCKED_DATA)
MASK64 = (1 << 64) - 1


@dataclass
class RouteEntry:
    """A routing table entry: matches ``A`` when enabled and ``lower <= A & mask <= upper``."""
    mask: int
    lower: int
    upper: int
    port: str
    enable: bool = True

    def matches(self, address):
        return self.enable and self.lower <= (address & self.mask) <= self.upper


@dataclass
class RouterState:
    """What the router's decisions depend on (register contents and BAR numbers)."""
    routes: list = field(default_factory=list)
    offset: int = 0
    pio_enable: bool = False
    route_enable: bool = False
    csr_bar: int = 0
    tca_bar: int = 2
    put_bar: int = PUT_BAR

    def lookup(self, address):
        """Return the port of the first matching entry, or None."""
        for entry in self.routes:
            if entry.matches(address):
                return entry.port
        return None


@dataclass
class Decision:
    """``action`` is "forward", "csr", "put" (to the put engine) or "drop"; ``port`` where a forwarded TLP leaves;
    ``reason`` the counter of a drop; ``ur`` whether a UR completion answers it."""
    action: str
    port: str = None
    reason: str = None
    ur: bool = False


def route(state, port, tlp, bar=None):
    """Decide what happens to ``tlp`` arriving on ``port`` ("N", "E", "W" or "S").

    ``bar`` is the BAR index the hard IP matched (N only).
    """
    ft = tlp.fmt_type
    nonposted = tlp.is_nonposted()

    def drop(reason):
        return Decision("drop", reason=reason, ur=nonposted)

    if tlp.ep:
        return drop("POISONED")
    if ft in _CPL:
        return Decision("drop", reason="UNEXPECTED_CPL")
    is_mem = ft in _MEM_WRITE or ft in _MEM_READ
    if port == "N":
        if is_mem and bar == state.csr_bar:
            return Decision("csr")
        if is_mem and bar == state.put_bar:
            return Decision("put") if ft in _MEM_WRITE else drop("READ_REJECTED")
        if not (is_mem and bar == state.tca_bar):
            return drop("UNSUPPORTED")
        window_open = state.pio_enable
    else:
        if not is_mem:
            return drop("UNSUPPORTED")
        window_open = state.route_enable
    if ft in _MEM_READ:
        return drop("READ_REJECTED")
    if not window_open:
        return drop("WINDOW_CLOSED")
    out = state.lookup(tlp.address)
    if out is None:
        return drop("UNROUTABLE")
    return Decision("forward", port=out)


def translate(state, tlp):
    """Return the TLP as it leaves through N: address minus the node offset, 3-DW header below
    4 GiB and 4-DW at or above (PCIe requires the short form below 4 GiB)."""
    out = Tlp(tlp)
    out.address = (tlp.address - state.offset) & MASK64
    if out.fmt_type in _MEM_WRITE:
        out.fmt_type = TlpType.MEM_WRITE if out.address < 1 << 32 else TlpType.MEM_WRITE_64
    elif out.fmt_type in _MEM_READ:
        out.fmt_type = TlpType.MEM_READ if out.address < 1 << 32 else TlpType.MEM_READ_64
    return out
