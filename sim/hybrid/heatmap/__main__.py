"""One collective's link utilisation over time, drawn as a heatmap.

``python -m peach2.sim.hybrid.heatmap`` runs one picture's collective with the links' trace on,
saves the result (bins, not packets) and draws the heatmap.

::

    python -m peach2.sim.hybrid.heatmap --collective broadcast \\
        --out docs/img/heat_broadcast.png --json docs/results/heat_broadcast.json
    python -m peach2.sim.hybrid.heatmap --from-json docs/results/heat_broadcast.json \\
        --out docs/img/heat_broadcast.png                      # redraw, no simulation

A saved result carries its run's stamp (``run``: command, commit, date, seconds, load), which
the hybrid section of ``docs/benchmarks.md`` lists, so a picture drawn from an older design is
marked stale there like any figure.
"""

import argparse
import json
import sys
from pathlib import Path

from peach2.cli_options import IO_ERROR, OutputError, check_writable
from peach2.sim.run import run_info, started

from .draw import draw
from .run import PICTURES, heat_run


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m peach2.sim.hybrid.heatmap",
                                 description=__doc__.splitlines()[0].strip("`: "))
    ap.add_argument("--collective", choices=sorted(PICTURES),
                    help="the picture (8 nodes; ...16: 16 nodes, one 2x8 split in two)")
    ap.add_argument("--from-json", metavar="JSON", help="redraw a saved result")
    ap.add_argument("--out", required=True, help="the PNG")
    ap.add_argument("--json", metavar="JSON", help="save the result here")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if (args.collective is None) == (args.from_json is None):
        ap.error("give --collective or --from-json")
    if args.from_json and args.json:
        ap.error("--json goes with --collective (a redraw saves nothing)")
    for option, value in (("--out", args.out), ("--json", args.json)):
        if value:
            try:
                check_writable(value)
            except OutputError as e:
                ap.error(f"{option}: {e}")
    if args.from_json:
        try:
            heat = json.loads(Path(args.from_json).read_text())
        except (OSError, ValueError) as e:
            ap.error(f"--from-json: cannot read {args.from_json} ({e})")
        if not isinstance(heat, dict) or not {"title", "links", "phases"} <= set(heat):
            ap.error(f"--from-json: {args.from_json} is not a saved heatmap result")
    else:
        shape, subclusters, per_subcluster, spec, gpu_size = PICTURES[args.collective]
        start = started()
        heat = heat_run(shape, subclusters, per_subcluster, spec, gpu_size=gpu_size,
                        seed=args.seed)
        heat["picture"] = args.collective
        argv = sys.argv[1:] if argv is None else list(argv)
        heat["run"] = run_info(" ".join(["python -m peach2.sim.hybrid.heatmap", *argv]), start)
    try:
        if args.json and not args.from_json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(heat, separators=(",", ":")) + "\n")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        print(f"{heat['title']}; {draw(heat, args.out)}")
    except OSError as e:
        print(f"heatmap: cannot write: {e}", file=sys.stderr)
        return IO_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
