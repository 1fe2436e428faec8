"""Formal harnesses, one module per block of ``rtl/`` (see :mod:`peach2.sim.formal`)."""
