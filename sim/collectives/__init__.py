"""Collectives over the driver model: Broadcast, Allgather, puts and the block-stride halo
exchange, with their pure-Python references.
"""

from .algorithms import (
    allgather,
    allgather_reference,
    broadcast,
    broadcast_reference,
    direct_allgather,
    direct_broadcast,
    log2_exact,
    puts,
    ring_allgather,
)
from .halo import ORDERS, HaloGrid, halo_exchange, halo_local, halo_reference
from .memory import Memories, Place
from .paths import INLINE_MAX, PATHS, PIO_MAX, step_path
from .plan import FLAG, Collective, Program, Result, Step, prepare, run

__all__ = ["broadcast", "allgather", "ring_allgather", "direct_broadcast", "direct_allgather",
           "puts", "INLINE_MAX", "PIO_MAX", "PATHS", "step_path", "broadcast_reference", "allgather_reference",
           "log2_exact", "HaloGrid", "halo_exchange", "halo_local", "halo_reference", "ORDERS",
           "Place", "Memories", "FLAG", "Step", "Program", "Collective", "Result", "prepare",
           "run"]
