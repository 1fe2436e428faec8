"""Option types of the ``peach2`` command: each checks its value when the command line is
parsed, before any work starts, and says what is wrong in one line naming the option.

A bad value ends the command with ``peach2 <command>: error: --routes: must be 8..16, got 100``
on standard error and exit status 2 (:class:`OneLineParser`).  The limits come from the code
that would reject the value later (``peach2.top``, ``peach2.csr.regmap``,
``peach2.routes.topology``), so the help and the check cannot drift from it.

Output paths: :func:`output_file` and :func:`output_dir` check the kind of path when the command
line is parsed (exit status 2); :func:`check_writable` then tries, before any work, whether the
folder that would receive the output takes a new file, and :func:`write_text` writes it.  Both
raise :class:`OutputError` (one line, exit status :data:`IO_ERROR`).  A missing folder on the
way is made, and said on standard error (``made folder out/``), by every command alike.
"""

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

__all__ = ["OneLineParser", "bounded", "number", "region_size", "tca_base", "phys_bases",
           "topology", "output_dir", "output_file", "names", "MIN_REGION", "MAX_REGION",
           "PAGE", "IO_ERROR", "OutputError", "check_writable", "make_folders", "write_text"]

#: Region sizes accepted by ``peach2 routes`` (powers of two).
MIN_REGION, MAX_REGION = 1 << 12, 1 << 59

#: Alignment of ``peach2 routes --phys-base``: a request that does not cross a 4 KiB boundary
#: of the TCA space (PCIe's rule) must not cross one in host memory either.
PAGE = 1 << 12

#: Exit status of every command when an output cannot be written (the folder refuses a new
#: file, the disk is full, ...): one line on standard error naming the path.
IO_ERROR = 4

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


def phys_bases(text):
    """One 64-bit physical address, or a comma-separated list of them (one per node), each a
    multiple of :data:`PAGE` (:func:`number` syntax)."""
    items = [t for t in (x.strip() for x in text.split(",")) if t]
    if not items or len(items) != len(text.split(",")):
        raise _error(f"must be an address or a comma-separated list of addresses, one per "
                     f"node, got {text!r}")
    values = []
    for item in items:
        value = number(item)
        if not 0 <= value < 1 << 64:
            raise _error(f"must fit 64 bits, got {item!r}")
        if value % PAGE:
            raise _error(f"must be a multiple of {PAGE:#x} (4K), got {item!r}")
        values.append(value)
    return values


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


class OutputError(Exception):
    """An output cannot be written; the message is one line naming the path and why."""


def _nearest_existing(path):
    """Return ``(the nearest existing ancestor of path, the missing folders below it, top
    first)``; ``path`` itself counts as an ancestor."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return path, list(reversed(missing))


def check_writable(path, folder=False):
    """Check, before any work, that ``path`` (a file, or a folder with ``folder``) can be
    written: the nearest existing folder on its way must take a new file (a scratch file is
    made there and removed at once) and an existing file must be writable.  Return the folders
    that writing it will make.  Raise :class:`OutputError` otherwise."""
    path = Path(path)
    base, missing = _nearest_existing(path if folder else path.parent)
    if not base.is_dir():
        raise OutputError(f"cannot write {path}: {base} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=base, prefix=".peach2-check-"):
            pass
    except OSError as error:
        raise OutputError(f"cannot write {path}: cannot make a file in {base}/ "
                          f"({error.strerror or error})") from None
    if not folder and path.is_file() and not os.access(path, os.W_OK):
        raise OutputError(f"cannot write {path}: permission denied")
    return missing


def make_folders(folder, note=None):
    """Make ``folder`` and its missing parents, saying ``made folder X/`` on ``note`` for each
    one made (default: standard error); raise :class:`OutputError` if one cannot be made."""
    folder = Path(folder)
    _, missing = _nearest_existing(folder)
    for each in missing:
        try:
            each.mkdir()
        except FileExistsError:
            continue
        except OSError as error:
            raise OutputError(f"cannot make folder {each}: {error.strerror or error}") from None
        print(f"made folder {each}/", file=note or sys.stderr)


def write_text(path, text, note=None):
    """Write ``text`` to the file ``path``, making its missing folders (:func:`make_folders`);
    raise :class:`OutputError` on any I/O failure."""
    path = Path(path)
    make_folders(path.parent, note)
    try:
        path.write_text(text)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
