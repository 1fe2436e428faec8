"""Prove a DMA change cycle for cycle neutral: record and compare DMA regression timing.

Usage (from the repository root, in the project's venv)::

    python tb/dma/dma_trace.py record  [--dir tb/dma/evidence]   # before: save the evidence
    python tb/dma/dma_trace.py compare [--dir tb/dma/evidence]   # after: exit 1 on any change

Both run the default (not ``slow``) DMA regression tests of ``tb/dma/test_dma.py`` with pytest
and collect two things:

``end_times.json``
    The simulation time (ns) at which each cocotb test of each run ended, from the run's
    ``build/sim/<run>/results.xml`` (cocotb's ``sim_time_stop``).
``halo_trace.json``
    The time of every beat (``valid`` and ``ready`` high at a rising clock edge) on each chip's
    DMA streams ``o_rd``, ``o_wr`` and ``i_cpl`` during ``halo_planes`` (recorded by the test
    when ``PEACH2_DMA_TRACE`` names a file, see ``dma_tb.dma_trace_probe``).

``record`` writes them to ``--dir``; ``compare`` records into a temporary folder and reports
every difference against ``--dir`` (a restructuring must keep the same handshake timestamps
and end times).  Exit status: 0 identical, 1 different, 2 bad usage or a
run that failed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from peach2.sim.run import SIM_BUILD

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TRACE_ENV = "PEACH2_DMA_TRACE"
#: The runs of ``test_dma.py``'s default tests (``run(name, ...)``), whose end times are kept.
RUNS = ("dma-two_chips", "dma-one_chip", "dma-prefetch_race", "dma-block_fetch")
END_TIMES = "end_times.json"
HALO_TRACE = "halo_trace.json"


class Failure(Exception):
    """A run that failed or left no results (exit status 2)."""


def run_tests(out_dir, workers):
    """Run the default DMA tests, the halo trace going to ``out_dir``; write both files there
    and return them (as :func:`collect`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = out_dir / HALO_TRACE
    if trace.exists():
        trace.unlink()
    env = dict(os.environ, **{TRACE_ENV: str(trace)})
    started = time.time()
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "-p", "no:cacheprovider",
           str(HERE / "test_dma.py")]
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise Failure(f"the DMA tests failed (pytest exit {proc.returncode}); fix them first")
    return collect(out_dir, started)


def collect(out_dir, started=0.0, build=SIM_BUILD):
    """Read the end times of the runs' results under ``build`` (written after ``started``, a
    ``time.time()``) and the raw halo trace in ``out_dir``; write both files in their saved
    form there and return them."""
    out_dir = Path(out_dir)
    trace = out_dir / HALO_TRACE
    ends = {}
    for run in RUNS:
        xml = Path(build) / run / "results.xml"
        if not xml.exists() or xml.stat().st_mtime < started:
            raise Failure(f"{xml} was not written by this run")
        ends[run] = end_times(xml)
    if not trace.exists():
        raise Failure(f"halo_planes wrote no trace to {trace}")
    (out_dir / END_TIMES).write_text(json.dumps(ends, indent=1, sort_keys=True) + "\n")
    times = json.loads(trace.read_text())
    times = times.get("times", times)       # the probe's file, or one already saved
    # One stream per line: small diffs in git, and the file stays readable.
    lines = [f" {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
             for k, v in sorted(times.items())]
    trace.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return ends, times


def end_times(xml):
    """Return ``{test: end time in ns}`` of every cocotb test case in a results.xml (cocotb's
    ``sim_time_stop`` property)."""
    out = {}
    try:
        cases = list(ET.parse(xml).getroot().iter("testcase"))
    except ET.ParseError as exc:
        raise Failure(f"{xml}: {exc}") from exc
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if props.get("sim_time_unit") != "ns" or "sim_time_stop" not in props:
            raise Failure(f"{xml}: test case {case.get('name')} has no end time in ns")
        out[case.get("name")] = float(props["sim_time_stop"])
    return out


def load(folder):
    folder = Path(folder)
    try:
        ends = json.loads((folder / END_TIMES).read_text())
        times = json.loads((folder / HALO_TRACE).read_text())
    except (OSError, ValueError) as exc:
        raise Failure(f"no readable evidence in {folder} ({exc}); run 'record' first") from exc
    return ends, times


def differences(before, after):
    """Return a list of one-line descriptions of how ``after`` differs from ``before``."""
    (ends0, times0), (ends1, times1) = before, after
    out = []
    for run in sorted(set(ends0) | set(ends1)):
        a, b = ends0.get(run, {}), ends1.get(run, {})
        for test in sorted(set(a) | set(b)):
            if a.get(test) != b.get(test):
                out.append(f"{run} {test}: ended at {a.get(test)} ns, now {b.get(test)} ns")
    for name in sorted(set(times0) | set(times1)):
        a, b = times0.get(name, []), times1.get(name, [])
        if a == b:
            continue
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        at = lambda ts: ts[first] if first < len(ts) else "none"  # noqa: E731
        out.append(f"halo {name}: {len(a)} beats, now {len(b)}; first difference at beat "
                   f"{first}: {at(a)} ns, now {at(b)} ns")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("record", "compare"))
    ap.add_argument("--dir", default=str(HERE / "evidence"),
                    help="folder of the saved evidence (default: tb/dma/evidence)")
    ap.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers")
    ap.add_argument("--no-run", action="store_true",
                    help="record: do not run the tests, take the results of the last run and "
                         "the raw trace already in --dir")
    args = ap.parse_args(argv)
    try:
        if args.command == "record":
            if args.no_run:
                ends, times = collect(args.dir)
            else:
                ends, times = run_tests(args.dir, args.workers)
            print(f"recorded {sum(len(v) for v in ends.values())} end times and "
                  f"{sum(len(v) for v in times.values())} halo beats in {args.dir}")
            return 0
        before = load(args.dir)
        with tempfile.TemporaryDirectory() as tmp:
            after = run_tests(tmp, args.workers)
    except Failure as exc:
        print(f"dma_trace: {exc}", file=sys.stderr)
        return 2
    diff = differences(before, after)
    for line in diff:
        print(line)
    if diff:
        print(f"DIFFERENT: {len(diff)} differences against {args.dir}")
        return 1
    print(f"IDENTICAL: {sum(len(v) for v in after[0].values())} end times and "
          f"{sum(len(v) for v in after[1].values())} halo beats as in {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
