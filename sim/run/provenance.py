"""Where a measured figure comes from: the commit it was measured at and its run's stamp
(command, commit, date, seconds, the machine's cores and load), for every saved result."""

import os
import subprocess
import time

from .runner import ROOT

__all__ = ["commit", "started", "run_info", "run_sentence"]


def commit():
    """The checked-out commit, with ``+changes`` when ``rtl/`` or ``sim/`` has edits."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "rtl", "sim")
    return head + ("+changes" if dirty else "")


def started():
    """What :func:`run_info` needs from a run's start: time, commit (the design measured, even
    if a commit lands while it runs) and the machine's load."""
    return {"time": time.time(), "commit": commit(), "load": round(os.getloadavg()[0], 1)}


def run_info(command, start, shortened=(), conditions=None):
    """The ``run`` entry of a section's results; ``start`` is :func:`started`'s.

    ``shortened`` lists what ``--quick`` (or an option) made smaller than the full run, one
    phrase each; ``conditions`` is what the user says else ran on the machine.  ``load`` is the
    one-minute load average at the start and at the end."""
    return {"command": command, "commit": start["commit"], "date": time.strftime("%Y-%m-%d"),
            "seconds": round(time.time() - start["time"]), "cores": os.cpu_count(),
            "load": [start["load"], round(os.getloadavg()[0], 1)],
            "shortened": list(shortened), "conditions": conditions}


def run_sentence(run, lead="Measured by", details=()):
    """The words naming a run (:func:`run_info`'s dict): ``{lead} `command` at commit on date
    (details)``, the details that are not empty joined by commas; no full stop (the caller
    ends the sentence)."""
    details = [d for d in details if d]
    return (f"{lead} `{run.get('command', '?').strip()}` at {run.get('commit', '?')}"
            + (f" on {run['date']}" if run.get("date") else "")
            + (f" ({', '.join(details)})" if details else ""))
