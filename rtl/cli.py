"""The ``peach2`` command.

``peach2 generate`` writes the Verilog of the ``peach2`` top module (simulatable by Icarus without
vendor libraries), its register header and a configuration record, and checks the Verilog with
Icarus.  ``peach2 regmap`` writes the register map as Markdown, a C header or JSON.
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib.wiring import In

from . import __version__

__all__ = ["main"]


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


def _design(args):
    from .top import PEACH2
    try:
        return PEACH2(n_routes=args.routes, buffer_beats=args.buffer_beats, s_role=args.s_role,
                      tx_start_level=args.tx_start_level or None)
    except ValueError as error:
        sys.exit(f"error: {error}")


def _regmap_for(args):
    from .csr.regmap import peach2_regmap
    return peach2_regmap(n_routes=args.routes, buffer_beats=args.buffer_beats,
                         s_is_rc=args.s_role == "rc")


def _generate(args):
    from amaranth.back import verilog

    top = _design(args)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    verilog_path = out / "peach2.v"
    verilog_path.write_text(verilog.convert(top, name="peach2", emit_src=False))
    regmap = _regmap_for(args)
    header_path = out / "peach2_regs.h"
    header_path.write_text(regmap.to_c_header())
    config_path = out / "peach2_config.json"
    pins = [{"name": "__".join(map(str, path)), "dir": "in" if member.flow == In else "out",
             "width": member.shape.size if hasattr(member.shape, "size") else
             Shape.cast(member.shape).width}
            for path, member, _ in top.signature.flatten(top)]
    config_path.write_text(json.dumps({
        "module": "peach2",
        "parameters": {"routes": args.routes, "buffer_beats": args.buffer_beats,
                       "s_role": args.s_role, "tx_start_level": args.tx_start_level or None},
        "port_roles": top.port_roles,
        "clock": {"name": "clk", "mhz": 250},
        "reset": {"name": "rst", "active": "high", "synchronous": True},
        "pins": pins,
    }, indent=2) + "\n")
    if not args.no_check:
        _check_with_iverilog([verilog_path])
    print(f"wrote {verilog_path} (module peach2: {args.routes} routes, "
          f"{args.buffer_beats}-beat packet buffers, S port {args.s_role.upper()}, TX "
          + (f"cut-through from {args.tx_start_level} "
             f"beat{'s' if args.tx_start_level != 1 else ''})" if args.tx_start_level
             else "store-and-forward)"))
    print(f"wrote {header_path} (register map for C drivers)")
    print(f"wrote {config_path} (parameters, port roles N/E/W/S, pin list)")
    if not args.no_check:
        print("checked: Icarus Verilog compiles peach2.v")
    return 0


def _regmap(args):
    regmap = _regmap_for(args)
    text = {"md": regmap.to_markdown, "c": regmap.to_c_header, "json": regmap.to_json}[
        args.format]()
    if args.output is None:
        sys.stdout.write(text)
    else:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0


def _at_least(minimum):
    def parse(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="peach2",
        description="PEACH2 PCI Express router chip (TCA): gateware generation and tools.")
    parser.add_argument("--version", action="version", version=f"peach2 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def design_options(p):
        p.add_argument("--routes", type=_at_least(8), default=8, metavar="N",
                       help="routing table entries (at least 8; default %(default)s)")
        p.add_argument("--buffer-beats", type=_at_least(32), default=128, metavar="N",
                       help="per-port packet buffer in 16-byte beats (default %(default)s)")
        p.add_argument("--s-role", choices=("rc", "ep"), default="rc",
                       help="role of the S port's hard IP (default %(default)s)")
        p.add_argument("--tx-start-level", type=int, default=1, metavar="N",
                       help="TX cut-through threshold in beats; 0 for store-and-forward "
                            "(default %(default)s)")

    gen = sub.add_parser("generate", help="write the Verilog of the peach2 top module",
                         description="Write the Verilog of the peach2 top module, its register "
                                     "header and configuration, and check the Verilog with "
                                     "Icarus.")
    gen.add_argument("-o", "--output", default="build", metavar="DIR",
                     help="output folder (default: %(default)s)")
    design_options(gen)
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
    design_options(reg)
    reg.set_defaults(func=_regmap)

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
