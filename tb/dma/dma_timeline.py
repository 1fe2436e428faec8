"""Show where one DMA benchmark point's time goes: every TLP on the wire, from the kick.

Usage (from the repository root)::

    python tb/dma/dma_timeline.py single size=4096              # one 4 KiB descriptor, local
    python tb/dma/dma_timeline.py chain4k count=4 --probe       # with the DMA's own beats
    python tb/dma/dma_timeline.py chain128 where=neighbour size=128 count=128 --json t.json

A point is a figure of the DMA benchmark (``peach2.sim.bench.dma_plan``: ``start``,
``chain128``, ``scattered``, ``single``, ``chain4k``, ``halo``) and its keys; it is measured as
the benchmark measures it (``tb/dma/dma_perf_tb.py``: two chips, host reads answered after
500 ns, idle links), on Verilator's shared chip library, and printed as one line per TLP on
chip 0's N (read requests and writes leaving, completions arriving) and on E when the data goes
to the neighbour, then the gaps that matter: the kick to the first read request, the first data
completion, the first write, and the last completion to the last write landing.  ``--probe``
runs Icarus with the chips compiled in (about 45 s for a 4 KiB point) and adds the beats of
chip 0's DMA streams and of N's hand-overs with the hard IP, as bursts (consecutive beats at
most one cycle apart).  Exit status: 0, 2 for a bad point or option, 3 when the run fails.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from peach2.sim.bench.dma_plan import SCATTER_STRIDE
from peach2.sim.harness.dma import DESC_AREA

HERE = Path(__file__).resolve().parent

#: Keys of each figure, with their defaults (``None``: required).
FIGURES = {
    "start": {"where": "local", "size": 8, "count": 1},
    "chain128": {"where": None, "size": None, "count": 128},
    "scattered": {"where": "neighbour", "size": None, "count": 128},
    "single": {"mode": "descriptor", "size": None},
    "chain4k": {"count": None, "size": 4096},
    "halo": {"n": None, "plane": None, "shape": "block-stride"},
}
CHOICES = {"where": ("local", "neighbour"), "mode": ("descriptor", "register"),
           "plane": ("jk", "ik", "ij"), "shape": ("block-stride", "contiguous")}
#: The most one point may move: a conservative half of the 4 MiB source arena and destination
#: window ``dma_perf_tb`` gives each node (the destinations start 4 KiB into the window).
MAX_BYTES = 1 << 21


def parse_point(figure, tokens):
    """The benchmark point of ``figure`` and ``key=value`` ``tokens``; ``ValueError`` (one
    line) when a key is unknown, missing or out of range."""
    if figure not in FIGURES:
        raise ValueError(f"unknown figure {figure!r} (one of {', '.join(FIGURES)})")
    point = {"figure": figure}
    given = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or key not in FIGURES[figure]:
            raise ValueError(f"{token!r}: {figure} takes {', '.join(f'{k}=' for k in FIGURES[figure])}")
        given[key] = value
    for key, default in FIGURES[figure].items():
        value = given.get(key, default)
        if value is None:
            raise ValueError(f"{figure} needs {key}=")
        if key in CHOICES:
            if value not in CHOICES[key]:
                raise ValueError(f"{key}={value}: one of {', '.join(CHOICES[key])}")
        else:
            try:
                value = int(value)
            except ValueError:
                raise ValueError(f"{key}={value}: an integer") from None
            if value < 1:
                raise ValueError(f"{key}={value}: at least 1")
        point[key] = value
    if point.get("size", 0) * point.get("count", 1) > MAX_BYTES:
        raise ValueError(f"size x count = {point['size'] * point.get('count', 1)} bytes: at most "
                         f"{MAX_BYTES} (the benchmark's source arena)")
    if figure == "scattered" and point["count"] * SCATTER_STRIDE > DESC_AREA // 4:
        raise ValueError(f"count={point['count']}: at most {DESC_AREA // 4 // SCATTER_STRIDE} "
                         "scattered descriptors (a channel's descriptor area)")
    if figure == "halo" and not 3 <= point["n"] <= 64:
        raise ValueError(f"n={point['n']}: 3 to 64 (the benchmark's halo sizes)")
    return point


def bursts(times, cycle=4):
    """``[(first, last, beats)]`` of sorted beat times, a burst ending where the next beat is
    more than one ``cycle`` later."""
    out = []
    for t in times:
        if out and t - out[-1][1] <= cycle:
            out[-1] = (out[-1][0], t, out[-1][2] + 1)
        else:
            out.append((t, t, 1))
    return out


def milestones(timeline):
    """The gaps of a timeline (``dma_timeline_tb``'s result) that say where the time went:
    ``[(name, ns)]``.  A descriptor's first completions (as many bytes as the first read request
    asked for) are its descriptor fetch; register mode has none."""
    tlps, end = timeline["tlps"], timeline["result"]["ns"]
    reads = [t for t in tlps["N tx"] if t[2] == 0]
    writes = tlps.get("E tx") or [t for t in tlps["N tx"] if t[2] > 0]
    cpls = tlps["N rx"]
    skip = 0 if timeline["point"].get("mode") == "register" else \
        (timeline["read_bytes"] or [0])[0]
    seen, after = 0, []
    for cpl in cpls:
        if seen >= skip:
            after.append(cpl)
        seen += cpl[2]
    out = []
    if reads:
        out.append(("kick to the first read request on the wire", reads[0][0]))
    if after:
        out.append(("kick to the end of the first completion after the fetch", after[0][1]))
    if writes:
        out.append(("kick to the first write on the wire", writes[0][0]))
        if after:
            out.append(("that completion's end to the first write", writes[0][0] - after[0][1]))
        if cpls:
            out.append(("last completion's end to the last write landed", end - cpls[-1][1]))
    out.append(("kick to the last write landed (the point's time)", end))
    return out


def report(timeline, out=sys.stdout):
    """Print a timeline: the point's time, every TLP, the probed bursts, the milestones."""
    res = timeline["result"]
    print(f"{timeline['point']}: {res['ns']:.0f} ns, {res['bytes']} bytes", file=out)
    rows = sorted((t[0], t[1], port, t[2], t[3]) for port, ts in timeline["tlps"].items()
                  for t in ts)
    print(f"{'start':>8} {'end':>8}  port   payload  wire", file=out)
    for a, b, port, payload, wire in rows:
        what = "read request" if payload == 0 else ""
        print(f"{a:8.0f} {b:8.0f}  {port:5} {payload:8d} {wire:5d}  {what}", file=out)
    for name, times in timeline["beats"].items():
        print(f"{name}: " + ", ".join(f"{a:.0f}-{b:.0f} ({n})" for a, b, n in bursts(times)),
              file=out)
    for name, ns in milestones(timeline):
        print(f"{name}: {ns:.0f} ns", file=out)


def run(point, probe=False, name="dma-timeline"):
    """Simulate ``point``; return its timeline (``dma_timeline_tb``'s result)."""
    sys.path.insert(0, str(HERE))
    from peach2.sim.hdl import Chips
    from peach2.sim.run import run_cocotb
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "timeline.json"
        run_cocotb(component=Chips(2, library=not probe), toplevel="chips2",
                   test_module="dma_timeline_tb", name=name + ("-probe" if probe else ""),
                   test_dir=HERE, testcase="timeline", seed=1,
                   simulator="icarus" if probe else "verilator",
                   params={"point": point, "result_file": str(out), "probe": probe})
        return json.loads(out.read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python tb/dma/dma_timeline.py",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("figure", help=f"one of {', '.join(FIGURES)}")
    ap.add_argument("keys", nargs="*", metavar="KEY=VALUE",
                    help="the point's keys (where, mode, size, count, n, plane, shape)")
    ap.add_argument("--probe", action="store_true",
                    help="Icarus with the chips compiled in: the DMA's beats too")
    ap.add_argument("--json", metavar="FILE", help="also write the timeline as JSON")
    args = ap.parse_args(argv)
    try:
        point = parse_point(args.figure, args.keys)
    except ValueError as exc:
        ap.error(str(exc))
    if args.json and not Path(args.json).resolve().parent.is_dir():
        ap.error(f"--json: no folder {Path(args.json).resolve().parent}")
    try:
        timeline = run(point, args.probe)
    except Exception as exc:       # a failed build or simulation: one line, its own status
        print(f"dma_timeline: the run failed: {exc}", file=sys.stderr)
        return 3
    report(timeline)
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(timeline, indent=1))
        except OSError as exc:
            print(f"dma_timeline: cannot write {args.json}: {exc}", file=sys.stderr)
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
