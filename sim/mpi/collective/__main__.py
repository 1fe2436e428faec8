"""Print the table of MPI collective times of docs/mpi.md ("Collectives").

``python -m peach2.sim.mpi.collective [--preset NAME] [--where MEMORY]``."""

import argparse
import sys
import time

from ..preset import PRESETS
from .times import print_table, table


def main(argv=None):
    """Measure and print the table; return 0."""
    parser = argparse.ArgumentParser(prog="python -m peach2.sim.mpi.collective",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="MV2GDR", choices=list(PRESETS))
    parser.add_argument("--where", default=None,
                        help="memory of the buffers (default: the preset's GPU; e.g. host)")
    args = parser.parse_args(argv)
    wall = time.time()
    print_table(table(args.preset, args.where))
    print(f"\n({time.time() - wall:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
