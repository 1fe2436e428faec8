"""PEACH2: the PCI Express router chip of the TCA architecture, in Amaranth HDL."""

__version__ = "0.1.0"
