"""PEACH2: the PCI Express router chip of the TCA architecture, in Amaranth HDL."""

#: The package's version, written only here: pyproject.toml's ``[tool.setuptools.dynamic]``
#: reads it from this file's text, so it stays a plain string literal.
__version__ = "0.1.0"
