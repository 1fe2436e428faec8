"""The ``peach2`` command.

``peach2 generate`` writes the Verilog of the gateware that exists so far and checks that Icarus
Verilog accepts it.  Until the ``peach2`` top module lands (router issue) that is the two
Stratix IV hard-IP adapters; the command's options grow with the design.
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from . import __version__

__all__ = ["main"]


def _blocks():
    from .tlp.avalon_rx import AvalonST128RX
    from .tlp.avalon_tx import AvalonST128TX
    return {
        "peach2_avalon_rx": AvalonST128RX,
        "peach2_avalon_tx": AvalonST128TX,
    }


def _check_with_iverilog(paths):
    if shutil.which("iverilog") is None:
        sys.exit("error: Icarus Verilog (iverilog) is not installed; it checks the generated "
                 "Verilog.\nInstall it with: sudo apt-get install iverilog\n"
                 "(or skip the check with --no-check)")
    for path in paths:
        result = subprocess.run(["iverilog", "-g2005", "-o", "/dev/null", str(path)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"error: iverilog rejected {path}:\n{result.stderr}")


def _generate(args):
    from amaranth.back import verilog

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, block in _blocks().items():
        path = out / f"{name}.v"
        path.write_text(verilog.convert(block(), name=name, emit_src=False))
        written.append(path)
    if not args.no_check:
        _check_with_iverilog(written)
    for path in written:
        print(f"wrote {path}")
    if not args.no_check:
        print("checked: Icarus Verilog compiles every file")
    return 0


def _regmap(args):
    from .csr.regmap import REGMAP

    text = {"md": REGMAP.to_markdown, "c": REGMAP.to_c_header, "json": REGMAP.to_json}[
        args.format]()
    if args.output is None:
        sys.stdout.write(text)
    else:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="peach2",
        description="PEACH2 PCI Express router chip (TCA): gateware generation and tools.")
    parser.add_argument("--version", action="version", version=f"peach2 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    gen = sub.add_parser("generate", help="write the Verilog of the design",
                         description="Write the Verilog of the design and check it with Icarus.")
    gen.add_argument("-o", "--output", default="build", metavar="DIR",
                     help="output folder (default: %(default)s)")
    gen.add_argument("--no-check", action="store_true",
                     help="do not compile the output with iverilog")
    gen.set_defaults(func=_generate)

    reg = sub.add_parser("regmap", help="write the register map (Markdown, C header or JSON)",
                         description="Write the control register map (BAR 0), generated from "
                                     "its one Python description (rtl/csr/regmap.py).")
    reg.add_argument("--format", choices=("md", "c", "json"), default="md",
                     help="md: docs/registers.md; c: a C header; json (default: %(default)s)")
    reg.add_argument("-o", "--output", metavar="FILE",
                     help="write to FILE instead of standard output")
    reg.set_defaults(func=_regmap)

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
