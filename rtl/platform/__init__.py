"""The synthesis flow: the PEACH2 board platform, the hard-IP instances, the Quartus project and
the open-source area and logic-depth report (``docs/synthesis.md``)."""

from .board import PEACH2Platform
from .chip import Chip
from .hardip import ConfigSampler, HardIP, ReconfigPLL

__all__ = ["PEACH2Platform", "Chip", "ConfigSampler", "HardIP", "ReconfigPLL"]
