"""Moved to peach2.sim.loopback_top (sim/loopback_top.py); kept for tb/benchmarks.py."""
from peach2.sim.loopback_top import *  # noqa: F401,F403  (moved to sim/loopback_top.py)
