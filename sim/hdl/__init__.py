"""HDL test tops and cables: the tops that hold one or several chips, and the Gen2 x8 cable
modelled in HDL.
"""

from .cable import Cable, default_update_latency
from .cable_lane import CLS_CPL, CLS_NP, CLS_P, CableLane, max_beats
from .chips_top import Chips, chip_prefix
from .cluster_top import N_PINS, ClusterTop
from .loopback_top import Loopback

__all__ = ["Cable", "default_update_latency", "CableLane", "CLS_P", "CLS_NP", "CLS_CPL",
           "max_beats", "Chips", "chip_prefix", "ClusterTop", "N_PINS", "Loopback"]
