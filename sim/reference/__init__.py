"""Reference models: pure-Python statements of what the gateware must do (the internal TLP
stream, routing, DMA chains, the register BAR) and the scoreboard that checks live traffic.
"""

from .dma import (
    MalformedDescriptor,
    Outcome,
    apply,
    bursts,
    check_descriptor,
    read_requests,
    run_chain,
    run_slots,
    transfer_writes,
    walk_chain,
    write_tlps,
)
from .registers import ModelBar, RegModel
from .router import PORT_NAMES, Decision, RouteEntry, RouterState, route, translate
from .scoreboard import FAULTS, Domain, Scoreboard
from .stream import Beat, StreamMonitor, beats_to_tlp, compare_packet, tlp_to_beats

__all__ = ["Outcome", "MalformedDescriptor", "check_descriptor", "walk_chain", "transfer_writes",
           "run_chain", "run_slots", "apply", "write_tlps", "read_requests", "bursts", "RegModel",
           "ModelBar", "RouteEntry", "RouterState", "Decision", "route", "translate",
           "PORT_NAMES", "Scoreboard", "Domain", "FAULTS", "Beat", "tlp_to_beats", "beats_to_tlp",
           "compare_packet", "StreamMonitor"]
