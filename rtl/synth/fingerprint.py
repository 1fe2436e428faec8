"""The fingerprint of the gateware a synthesis report was made from, and its check.

``docs/synthesis.md``'s report section (:mod:`.report`) records what it was made from: the
design options, the SHA-256 of the core's RTLIL (what :func:`.synthesis.synthesize` hands to
Yosys: same RTLIL, same netlists, same figures with the same Yosys), one per block, and the
SHA-256 of the sources under ``rtl/`` with the Amaranth version.  :func:`check_document` tells
whether the gateware of today's sources is still the one the report describes, so a change to
``rtl/`` cannot leave the document behind unnoticed (``tb/synth/test_synthesis_fingerprint.py``).

After a change to ``rtl/`` that leaves the RTLIL as it was (a refactoring proved neutral,
comments), ``python -m peach2.synth.fingerprint docs/synthesis.md`` records the new sources'
digest (:func:`refresh_sources`), so the check is cheap again; it refuses when the RTLIL changed.

The check is cheap when ``rtl/`` is unchanged (the sources' hash matches: a few milliseconds)
and elaborates the core only when it is not (about 15 CPU-seconds): a change to comments or
docstrings alone leaves the RTLIL, and so the report, as it was.
"""

import hashlib
import json
import re
from importlib.metadata import version
from pathlib import Path

from .rtlil import core_rtlil

__all__ = ["RTL_DIR", "NOT_GATEWARE", "source_digest", "rtlil_digest", "block_digests", "record",
           "to_comment", "from_document", "check_document", "refresh_sources", "Stale"]

#: The gateware sources: the ``peach2`` package less the host software and tools in it
#: (:data:`NOT_GATEWARE`), whose changes cannot change the RTLIL.
RTL_DIR = Path(__file__).resolve().parent.parent
NOT_GATEWARE = ("routes", "synth", "cli.py", "cli_bench.py", "cli_options.py", "progress.py",
                "__main__.py")

_COMMENT = re.compile(r"<!-- gateware: (\{.*?\}) -->")


class Stale(Exception):
    """The report no longer describes the gateware (the message says what to run)."""


def source_digest(root=RTL_DIR):
    """SHA-256 of every ``.py`` file under ``root`` (path and text) and the Amaranth version."""
    h = hashlib.sha256(f"amaranth {version('amaranth')}\n".encode())
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if "__pycache__" in path.parts or (root == RTL_DIR and rel.parts[0] in NOT_GATEWARE):
            continue
        h.update(f"{path.relative_to(root).as_posix()}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def rtlil_digest(text):
    """SHA-256 of an RTLIL text."""
    return hashlib.sha256(text.encode()).hexdigest()


def block_digests(modules, name, instances):
    """``{instance: SHA-256}`` of each block's modules (``modules``: ``{module name: RTLIL}``
    of the core ``name``), so a stale report can say which blocks changed."""
    out = {}
    for inst in instances:
        prefix = f"{name}.{inst}"
        out[inst] = rtlil_digest("".join(modules[n] for n in sorted(modules)
                                         if n == prefix or n.startswith(prefix + ".")))
    return out


def record(text, modules, name, instances, design):
    """The fingerprint of the core ``name`` with RTLIL ``text``, built with ``design`` (the
    keyword arguments of :class:`~peach2.top.PEACH2`)."""
    return {"design": design, "rtlil": rtlil_digest(text), "sources": source_digest(),
            "blocks": block_digests(modules, name, instances)}


def to_comment(fingerprint):
    """The fingerprint as one HTML comment line (invisible in the rendered document)."""
    return f"<!-- gateware: {json.dumps(fingerprint, sort_keys=True)} -->"


def from_document(text):
    """The fingerprint recorded in a document, or None."""
    match = _COMMENT.search(text)
    return json.loads(match.group(1)) if match else None


def check_document(path, command="peach2 synth-report -o docs/synthesis.md", make_top=None,
                   name="peach2"):
    """Raise :class:`Stale` unless the report in ``path`` was made from today's gateware.

    Returns ``"sources"`` when ``rtl/`` is as it was, ``"rtlil"`` when the sources changed but
    the core's RTLIL did not (so the figures still hold).  ``make_top(**design)`` builds the
    core from the recorded design options (default :class:`~peach2.top.PEACH2`).
    """

    if make_top is None:
        from ..top import PEACH2 as make_top
    path = Path(path)
    recorded = from_document(path.read_text())
    if recorded is None:
        raise Stale(f"{path} records no gateware fingerprint; run `{command}`")
    if recorded["sources"] == source_digest():
        return "sources"
    text, modules, instances = core_rtlil(make_top(**recorded["design"]), name)
    if rtlil_digest(text) == recorded["rtlil"]:
        return "rtlil"
    now = block_digests(modules, name, instances)
    changed = sorted(set(now) ^ set(recorded["blocks"])
                     | {b for b in now if recorded["blocks"].get(b) != now[b]})
    raise Stale(f"rtl/ changed since {path} was made (the core's RTLIL differs"
                + (f"; blocks: {', '.join(changed)}" if changed else "; glue logic only")
                + f"); run `{command}` (about 15 min on 2 cores) and commit the document")


def refresh_sources(path, **kw):
    """Record today's ``rtl/`` digest in the report ``path`` when the sources changed but the
    core's RTLIL did not; return what :func:`check_document` found (raise :class:`Stale` like
    it when the RTLIL changed: then the report must be made again)."""
    path = Path(path)
    found = check_document(path, **kw)
    if found == "rtlil":
        text = path.read_text()
        old = from_document(text)["sources"]
        path.write_text(text.replace(old, source_digest()).replace(old[:16], source_digest()[:16]))
    return found


def main(argv=None):
    import sys
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m peach2.synth.fingerprint REPORT (e.g. docs/synthesis.md)",
              file=sys.stderr)
        return 2
    try:
        found = refresh_sources(args[0])
    except Stale as stale:
        print(stale, file=sys.stderr)
        return 1
    print({"sources": f"{args[0]}: made from today's rtl/ (nothing to do)",
           "rtlil": f"{args[0]}: rtl/ changed, the core's RTLIL did not: sources digest "
                    "recorded anew"}[found])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
