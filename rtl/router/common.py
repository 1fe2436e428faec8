"""Names shared by the router blocks: ports, drop reasons, route entries, UR requests."""

from amaranth.lib import data, enum

from ..params import COUNT_REASONS, PORT_TABLE

__all__ = ["Port", "Reason", "RouteEntry", "URRequest", "PORTS"]


def _from_table(name, members, shape, doc):
    """An Amaranth enum with the chip's names and values (:mod:`peach2.params`, one source of
    truth, documented by the register map)."""
    namespace = enum.EnumMeta.__prepare__(name, (enum.Enum,))
    for key, value in members.items():
        namespace[key] = value
    namespace["__doc__"] = doc
    return enum.EnumMeta(name, (enum.Enum,), namespace, shape=shape)


#: The four PCIe ports of PEACH2 (002 section 3.3): N to the host, E/W ring, S cross link.
Port = _from_table("Port", {n: v for n, v, _ in PORT_TABLE}, 2,
                   "The four PCIe ports (numbering of PORT_STATUS, COUNT and ROUTE_TARGET).")

PORTS = tuple(Port)

#: Per-port event counters, register COUNT[port][reason].
Reason = _from_table("Reason", COUNT_REASONS, 4, "Per-port event counter reasons.")


#: One route table entry as the router sees it (registers ROUTE[i]; the lookup is in
#: ``rtl/router/table.py``): a request to ``A`` matches when ``enable`` and
#: ``lower <= (A & mask) <= upper``; ``port`` numbers as :data:`Port`.
RouteEntry = data.StructLayout({
    "mask":   64,
    "lower":  64,
    "upper":  64,
    "port":   2,
    "enable": 1,
})

#: What the UR generator needs to answer a rejected non-posted request.
URRequest = data.StructLayout({
    "requester_id": 16,
    "tag":          10,
    "tc":           3,
    "attr":         3,
    "port":         Port,
    "locked":       1,      # the request was a locked read: answer with CplLk
})
