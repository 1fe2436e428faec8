"""InfiniBand for the HA-PACS/TCA machine: a packet-level 4x QDR fabric.

Pure Python, independent of cocotb and of the rest of ``peach2.sim``; time is an integer number
of picoseconds and every run is deterministic.  See ``docs/infiniband.md``.  The HCA's verbs
that run over it are :mod:`peach2.sim.verbs`.

- :class:`Params`: link, header, credit and latency parameters, each with its source;
- :class:`Fabric`: one flat switch, its HCA links, credits and output contention;
- :class:`Message`, :class:`Packet`: what it carries.
"""

from .fabric import Fabric
from .message import Message
from .packet import Packet
from .params import Params

__all__ = ["Params", "Fabric", "Message", "Packet"]
