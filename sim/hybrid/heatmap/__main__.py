"""One collective's link utilisation over time, drawn as a heatmap.

``python -m peach2.sim.hybrid.heatmap`` runs one picture's collective with the links' trace on,
saves the result (bins, not packets) and draws the heatmap.

::

    python -m peach2.sim.hybrid.heatmap --collective broadcast \\
        --out docs/img/heat_broadcast.png --json docs/results/heat_broadcast.json
    python -m peach2.sim.hybrid.heatmap --from-json docs/results/heat_broadcast.json \\
        --out docs/img/heat_broadcast.png                      # redraw, no simulation
"""

import argparse
import json
import sys
from pathlib import Path

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
    if args.from_json:
        heat = json.loads(Path(args.from_json).read_text())
    else:
        shape, subclusters, per_subcluster, spec, gpu_size = PICTURES[args.collective]
        heat = heat_run(shape, subclusters, per_subcluster, spec, gpu_size=gpu_size,
                        seed=args.seed)
        heat["picture"] = args.collective
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(heat, separators=(",", ":")) + "\n")
    print(f"{heat['title']}; {draw(heat, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
