"""Option types of the ``peach2`` command: each checks its value when the command line is
parsed, before any work starts, and says what is wrong in one line naming the option.

A bad value ends the command with ``peach2 <command>: error: --routes: must be 8..16, got 100``
on standard error and exit status 2 (:class:`OneLineParser`).  The limits come from the code
that would reject the value later (``peach2.top``, ``peach2.csr.regmap``,
``peach2.routes.topology``), so the help and the check cannot drift from it.
"""

import argparse
import re
from pathlib import Path

__all__ = ["OneLineParser", "bounded", "number", "region_size", "tca_base", "topology",
           "output_dir", "output_file", "names", "MIN_REGION", "MAX_REGION"]

#: Region sizes accepted by ``peach2 routes`` (powers of two).
MIN_REGION, MAX_REGION = 1 << 12, 1 << 59

_SUFFIXES = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class OneLineParser(argparse.ArgumentParser):
    """A parser whose errors are one line, ``peach2 routes: error: --node: ...``, exit status
    2; its subcommands' parsers are of the same class."""

    def error(self, message):
        message = re.sub(r"^argument (\S+): ", lambda m: m.group(1).split("/")[-1] + ": ",
                         message)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _error(message):
    return argparse.ArgumentTypeError(message)


def bounded(low, high):
    """Type of a whole decimal number in ``low..high``."""
    def parse(text):
        try:
            value = int(text, 10)
        except ValueError:
            raise _error(f"must be a whole number {low}..{high}, got {text!r}") from None
        if not low <= value <= high:
            raise _error(f"must be {low}..{high}, got {value}")
        return value
    return parse


def number(text):
    """An integer: decimal, 0x hex, or with a K/M/G/T (KiB...) suffix."""
    t = text.strip().lower().replace("_", "")
    if t.endswith("ib"):
        t = t[:-2]
    scale = 1
    if t[-1:] in _SUFFIXES:
        scale, t = _SUFFIXES[t[-1]], t[:-1]
    try:
        return int(t, 0) * scale
    except ValueError:
        raise _error(f"must be a number (decimal, 0x hex, or with K/M/G/T), got {text!r}") \
            from None


def region_size(text):
    """A power of two in ``MIN_REGION..MAX_REGION`` (:func:`number` syntax)."""
    value = number(text)
    if value <= 0 or value & (value - 1):
        raise _error(f"must be a power of two, got {text!r}")
    if not MIN_REGION <= value <= MAX_REGION:
        raise _error(f"must be {MIN_REGION:#x} (4K) .. {MAX_REGION:#x} (2^59), got {text!r}")
    return value


def tca_base(text):
    """A 64-bit bus address (:func:`number` syntax)."""
    value = number(text)
    if not 0 <= value < 1 << 64:
        raise _error(f"must fit 64 bits, got {text!r}")
    return value


def topology(text):
    """A :class:`~peach2.routes.topology.Topology` spec: ``ring:K``, ``line:K``, ``2xK``."""
    from .routes import Topology
    try:
        return Topology.parse(text)
    except ValueError as error:
        raise _error(str(error)) from None


def output_dir(text):
    """A folder to write into: absent (made on success) or an existing folder."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise _error(f"{text!r} exists and is not a folder")
    return path


def output_file(text):
    """A file to write: absent or an existing file (replaced), never a folder."""
    path = Path(text)
    if path.is_dir():
        raise _error(f"{text!r} is a folder; give a file name")
    return path


def names(text):
    """Comma-separated names (``dma,n_ingress``): letters, digits and ``_``, at least one."""
    items = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in items if not re.fullmatch(r"[A-Za-z_]\w*", n)]
    if not items or bad:
        raise _error(f"must be comma-separated block names such as dma,n_ingress, got {text!r}")
    return items
