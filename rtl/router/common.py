"""Names shared by the router blocks: ports, drop reasons, route entries, UR requests."""

from amaranth.lib import data, enum

from ..csr.regmap import COUNT_REASONS, RouteEntry, Port as _RegPort

__all__ = ["Port", "Reason", "RouteEntry", "URRequest", "PORTS"]


def _from_regmap(name, members, shape, doc):
    """An Amaranth enum with the register map's names and values (one source of truth)."""
    namespace = enum.EnumMeta.__prepare__(name, (enum.Enum,))
    for key, value in members.items():
        namespace[key] = value
    namespace["__doc__"] = doc
    return enum.EnumMeta(name, (enum.Enum,), namespace, shape=shape)


#: The four PCIe ports of PEACH2 (002 section 3.3): N to the host, E/W ring, S cross link.
Port = _from_regmap("Port", {p.name: p.value for p in _RegPort}, 2,
                    "The four PCIe ports (numbering of PORT_STATUS, COUNT and ROUTE_TARGET).")

PORTS = tuple(Port)

#: Per-port event counters, register COUNT[port][reason].
Reason = _from_regmap("Reason", COUNT_REASONS, 4, "Per-port event counter reasons.")




#: What the UR generator needs to answer a rejected non-posted request.
URRequest = data.StructLayout({
    "requester_id": 16,
    "tag":          10,
    "tc":           3,
    "attr":         3,
    "port":         Port,
    "locked":       1,      # the request was a locked read: answer with CplLk
})
