"""Names shared by the router blocks: ports, drop reasons, route entries, UR requests."""

from amaranth.lib import data, enum

__all__ = ["Port", "Reason", "RouteEntry", "URRequest", "PORTS"]


class Port(enum.Enum, shape=2):
    """The four PCIe ports of PEACH2 (002 section 3.3): N to the host, E/W ring, S cross link."""
    N = 0
    E = 1
    W = 2
    S = 3


PORTS = (Port.N, Port.E, Port.W, Port.S)


class Reason(enum.Enum, shape=4):
    """Per-port event counters (register COUNT[port][reason])."""
    RX_TLPS        = 0
    TX_TLPS        = 1
    UNROUTABLE     = 2
    WINDOW_CLOSED  = 3
    UNSUPPORTED    = 4
    READ_REJECTED  = 5
    MALFORMED      = 6
    POISONED       = 7
    RX_ERR         = 8
    UNEXPECTED_CPL = 9
    UR_SENT        = 10


#: One routing table entry (002 section 3.5): a request to address ``A`` matches when
#: ``enable`` and ``lower <= (A & mask) <= upper``; ``port`` is where it leaves.
RouteEntry = data.StructLayout({
    "mask":   64,
    "lower":  64,
    "upper":  64,
    "port":   Port,
    "enable": 1,
})


#: What the UR generator needs to answer a rejected non-posted request.
URRequest = data.StructLayout({
    "requester_id": 16,
    "tag":          10,
    "tc":           3,
    "attr":         3,
    "port":         Port,
})
