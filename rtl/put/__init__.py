"""Inline puts: 64-byte descriptors that carry their data, written by software into BAR 4 and
sent by :class:`~peach2.put.engine.PutEngine` without reading host memory (``docs/put.md``)."""
