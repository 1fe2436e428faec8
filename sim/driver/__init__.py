"""The host driver model: program and observe one PEACH2 (routes, windows, counters, PIO,
DMA chains and register mode in the shape of the TCA API; inline puts, also from a GPU kernel).
"""

from .chain import PLANES, Chain, Transfer, contiguous, halo_plane, halo_transfer, memcpy
from .device import DevicePut, GmpiDaemon
from .driver import Driver
from .errors import DmaFault, DriverError, PutFault

__all__ = ["Transfer", "Chain", "memcpy", "PLANES", "halo_plane", "halo_transfer", "contiguous",
           "Driver", "DriverError", "DmaFault", "PutFault", "DevicePut", "GmpiDaemon"]
