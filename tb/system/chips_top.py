"""Moved to peach2.sim.chips_top (sim/chips_top.py); kept for tb/benchmarks.py and tb/dma."""
from peach2.sim.chips_top import *  # noqa: F401,F403  (moved to sim/chips_top.py)
