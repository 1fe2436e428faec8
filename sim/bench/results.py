"""Saved benchmark results: one committed JSON file per section of ``docs/benchmarks.md``.

Each section (:data:`SECTIONS`) saves its figures to ``docs/results/<section>.json`` as a dict
whose ``run`` entry says how they were made (:func:`run_info`: command, commit, date, seconds,
the machine's cores and load, free-text conditions, and what ``--quick`` shortened).  A run
writes only the sections it measured; :func:`peach2.sim.bench.doc.rebuild` then writes the
whole document from every saved file, so a run of one section never removes another's figures.

Long steps print a progress line: :class:`PointProgress` counts points done and left, and
:func:`follow` prints the lines a simulation appends to a progress file while it runs (the
simulator's own output goes to its log file).
"""

import json
import sys
import threading
from pathlib import Path

from peach2.sim.run import ROOT
from peach2.sim.run.provenance import commit, run_info, run_sentence, started

__all__ = ["ROOT", "RESULTS", "SECTIONS", "result_path", "load", "save", "commit", "started",
           "run_info", "stamp", "shortened_note", "PointProgress", "follow", "save_plot"]

RESULTS = ROOT / "docs" / "results"
#: The document's sections, in the document's order.
SECTIONS = ("adapters", "router", "dma", "cluster", "gpu", "collectives", "calibration",
            "machine", "hybrid", "halo", "tuning")


def result_path(section):
    """``docs/results/<section>.json``."""
    return RESULTS / f"{section}.json"


def load(section):
    """The saved results of ``section``, or None when it was never measured here."""
    path = result_path(section)
    return json.loads(path.read_text()) if path.exists() else None


def save(section, data):
    """Write ``data`` (a dict with a ``run`` entry) to ``docs/results/<section>.json``."""
    if section not in SECTIONS or "run" not in data:
        raise ValueError(f"save({section!r}): a section of {SECTIONS} with a 'run' entry")
    RESULTS.mkdir(parents=True, exist_ok=True)
    result_path(section).write_text(json.dumps(data, indent=1) + "\n")


def save_plot(fig, path, dpi):
    """Save a matplotlib figure as PNG with no metadata (no "Software" version, no date), so
    that the same figures drawn by the same library give the same bytes; makes the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    return path


def _load(load):
    """``load 1.2`` or, for [start, end], ``load 1.2 at the start, 3.4 at the end``."""
    if isinstance(load, list):
        return f"load {load[0]} at the start, {load[1]} at the end"
    return None if load is None else f"load {load}"


def stamp(run):
    """The sentence naming a section's run (``run_info``'s dict), "" for none."""
    if not run:
        return ""
    where = [f"{run['seconds']} s" if run.get("seconds") is not None else None,
             f"{run['cores']}-core machine" if run.get("cores") else None,
             _load(run.get("load")),
             run.get("conditions")]
    text = run_sentence(run, details=where) + "."
    if run.get("cpu_seconds") is not None:      # a run of parallel simulations (DMA)
        ranks = (f" on {run['mpi_ranks'] - 1} MPI worker ranks" if run.get("mpi_ranks")
                 else "")
        text += (f" {str(run.get('simulator', '?')).capitalize()}, {run.get('jobs', '?')} "
                 f"simulations {run.get('workers', '?')} at a time{ranks}: {run['cpu_seconds']} "
                 f"s of CPU, about {run.get('idle_seconds', '?')} s on an idle machine.")
    if run.get("shortened"):
        text += " Shortened against the full run: " + "; ".join(run["shortened"]) + "."
    return text


def shortened_note(section, shortened):
    """Print (and return) what a quick run of ``section`` leaves out; "" if nothing."""
    if not shortened:
        return ""
    note = f"{section}: --quick shortens " + "; ".join(shortened)
    print(note, flush=True)
    return note


class PointProgress:
    """Prints ``<what>: point k of n done (<label>), m left`` as points finish (thread-safe)."""

    def __init__(self, what, total):
        self.what, self.total, self.done = what, total, 0
        self.lock = threading.Lock()
        print(f"{what}: {total} points", flush=True)

    def point(self, label):
        with self.lock:
            self.done += 1
            print(f"{self.what}: point {self.done} of {self.total} done ({label}), "
                  f"{self.total - self.done} left", flush=True)


def follow(path, job, *args, every=2.0, **kwargs):
    """Run ``job(*args, **kwargs)`` and print each line appended to ``path`` meanwhile.

    The file is emptied first; returns ``job``'s result (its exception propagates)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    out = {}

    def target():
        try:
            out["result"] = job(*args, **kwargs)
        except BaseException as exc:     # re-raised in the caller's thread
            out["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    seen = 0
    while True:
        worker.join(every)
        text = path.read_text()
        complete = text[:text.rfind("\n") + 1]
        if complete[seen:]:
            sys.stdout.write(complete[seen:])
            sys.stdout.flush()
            seen = len(complete)
        if not worker.is_alive():
            break
    if "error" in out:
        raise out["error"]
    return out["result"]
