"""Model of the Stratix IV PCIe hard IP's application interface (Avalon-ST 128-bit) and of the
PCIe function behind it: codec, receive stream, transmit checker, device.
"""

from .avalon import (
    CPL,
    DAMAGE,
    IO_REQ,
    M32,
    MEM_REQ,
    AvalonBeat,
    FramingError,
    avalon_beats_to_tlp,
    damage,
    describe,
    payload_offset,
    stream_layout,
    tlp_to_avalon_beats,
    unpack_word,
)
from .device import IDLE_WAIT_NS, HardIPDevice, HardIPFunction, Stuck, quiet_pcie_loggers
from .model import HardIPModel, edge_shows_update
from .rx import RxStream
from .tx_checker import TxChecker, Violation, tlp_problems
from .wire import CutThroughPort

__all__ = ["AvalonBeat", "FramingError", "DAMAGE", "damage", "payload_offset",
           "tlp_to_avalon_beats", "avalon_beats_to_tlp", "unpack_word", "stream_layout",
           "describe", "M32", "MEM_REQ", "IO_REQ", "CPL", "HardIPDevice", "HardIPFunction",
           "quiet_pcie_loggers", "HardIPModel", "edge_shows_update", "RxStream", "Violation",
           "TxChecker", "tlp_problems", "IDLE_WAIT_NS", "Stuck", "CutThroughPort"]
