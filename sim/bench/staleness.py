"""Which sections of ``docs/benchmarks.md`` no longer describe the design: figures go stale
when the gateware or a model behind them changes after the run that measured them.

Each section names the sources its figures come from (:data:`DEPENDS`: the gateware, the
models, its testbench); :func:`mark` puts under the section's run stamp a line saying which of
them changed since the commit the stamp names (``git diff`` against the working tree; pure
renames, such as the ``sim/`` restructuring, do not count), and removes the line once the
section is measured again.  :func:`peach2.sim.bench.doc.rebuild` marks every section, so the
document says what is stale instead of going stale silently; ``tb/bench/test_staleness.py``
fails when a mark is missing or out of date.  A Python file whose code is the same once
docstrings are left out (:func:`same_code`: only its comments, docstrings or layout changed)
does not count either: it runs as it did. Nor does a file whose every change since the stamp
came from a commit of :data:`NEUTRAL`: a change to code that was shown, by running the same
simulations before and after it, to leave every simulated time the same.
"""

import ast
import functools
import re
import subprocess

from .results import ROOT

__all__ = ["DEPENDS", "GATEWARE", "NEUTRAL", "changed_since", "same_code", "note", "mark"]

#: The gateware the simulations run (not the CLI, synthesis or route tools around it): every
#: module ``peach2.top`` imports (``tb/bench/test_staleness.py`` checks it).
GATEWARE = ("rtl/router", "rtl/dma", "rtl/put", "rtl/tlp", "rtl/csr", "rtl/top.py",
            "rtl/params.py", "rtl/signatures.py", "rtl/util.py", "rtl/__init__.py")
_LINKS = ("sim/hardip", "sim/pcie", "sim/run")
#: What only draws the hybrid sections' tables, plots and notes from saved results, or saves
#: them (git pathspecs leaving it out of ``sim/hybrid``): a change there measures nothing again.
#: The heatmaps' command and drawing are here too: no sweep imports them (their simulation,
#: ``heatmap/run.py``, stays a source of the pictures' own stamps).
_DRAWING = (":(exclude)sim/hybrid/figures", ":(exclude)sim/hybrid/saved.py",
            ":(exclude)sim/hybrid/heatmap/__main__.py", ":(exclude)sim/hybrid/heatmap/draw.py")
#: What only writes ``docs/benchmarks.md`` from saved results or marks it (the machine section
#: depends on all of ``sim``, but not on these).
_DOC_TOOLS = (":(exclude)sim/bench/staleness.py", ":(exclude)sim/bench/doc.py",
              ":(exclude)sim/bench/*_doc.py", ":(exclude)sim/bench/machine/doc.py")
#: Per section: the sources its figures depend on.
DEPENDS = {
    "adapters": ("rtl/tlp", "sim/hdl/loopback_top.py", *_LINKS, "tb/tlp", "tb/bench/benchmarks.py"),
    "router": (*GATEWARE, *_LINKS, "sim/harness/router.py", "tb/router/bench_tb.py"),
    "dma": (*GATEWARE, *_LINKS, "sim/hdl/chips_top.py", "sim/driver", "sim/harness",
            "sim/reference", "sim/bench/dma_plan.py", "sim/bench/dma_run.py", "tb/dma/dma_perf_tb.py"),
    "cluster": (*GATEWARE, *_LINKS, "sim/hdl", "sim/driver", "sim/harness", "tb/cluster"),
    "gpu": (*GATEWARE, *_LINKS, "sim/hdl", "sim/driver", "sim/harness", "tb/cluster/gpu_tb.py",
            "tb/cluster/bench_gpu.py"),
    "collectives": (*GATEWARE, *_LINKS, "sim/hdl", "sim/driver", "sim/harness",
                    "sim/collectives", "tb/collectives"),
    "calibration": (*GATEWARE, *_LINKS, "sim/hdl", "sim/driver", "sim/harness", "sim/infiniband",
                    "sim/verbs", "sim/node", "sim/mpi", "tb/calibration", "tb/put/gpu_put_tb.py"),
    "machine": (*GATEWARE, "sim", *_DRAWING, *_DOC_TOOLS),
    "hybrid": (*GATEWARE, *_LINKS, "sim/hdl", "sim/driver", "sim/harness", "sim/collectives",
               "sim/infiniband", "sim/verbs", "sim/node", "sim/mpi", "sim/machine",
               "sim/system", "sim/hybrid", *_DRAWING),
    "tuning": (*GATEWARE, *_LINKS, "sim/hdl", "sim/driver", "sim/harness", "sim/collectives",
               "sim/infiniband", "sim/verbs", "sim/node", "sim/mpi", "sim/machine",
               "sim/system", "sim/hybrid", *_DRAWING),
    "halo": (*GATEWARE, *_LINKS, "sim/hdl", "sim/driver", "sim/harness", "sim/collectives",
             "sim/infiniband", "sim/verbs", "sim/node", "sim/mpi", "sim/machine", "sim/system",
             "sim/hybrid", *_DRAWING),
}
#: Commits that changed code behind the figures without changing any figure, each with what
#: showed it (the simulations run at the commit and at its parent, their times compared): a
#: file whose every change since a stamp is one of these does not make the stamp stale.
NEUTRAL = {
    "9ca7a0e": "tuning sweeps' --cutoff (sim/hybrid): at 5cae057 and 9ca7a0e, `python -m "
               "peach2.sim.hybrid.launch --shape 2x2 --subclusters 2 --gpu-read 2.8e9` with "
               "Broadcasts (hybrid 8 B, 4 and 64 KiB; mpi 8 B, 4 KiB; tuned 64 B), Allgathers "
               "(hybrid+ring+staged 16 B, 4 KiB; hybrid+hops1 1 KiB) and halos (hybrid, mpi; "
               "small/2x4): every time, node end and hand-off the same; `python -m "
               "peach2.sim.hybrid.sweep --tune --collective broadcast --sizes 8,4096 --checks "
               "1024`: every time, table and tuned row the same",
    "5969485": "a run cut short keeps its buffers (sim/hybrid/runner.py): the same eleven "
               "launcher runs at 5cae057 and 5969485, every time, node end and hand-off the "
               "same",
}
#: Issue 31's and 32's review changes of 2026-12-01 (the cutoff's runs folded into the hybrid
#: sweep and then moved to ``sim/hybrid/tuning``; the driver's bounded append wait and shared
#: slot writer, its DMA calls moved to ``sim/driver/dma.py``; the queue's ``has_after`` wrap,
#: which only a register-mode queue reads): at 7cd319b and at 8eaa526 the same eleven launcher
#: runs and four DMA timelines, every value the same; the tuning sweeps also at 0ace8bf.
_REVIEW = ("at 7cd319b and 8eaa526: the eleven launcher runs (every time, node end and "
           "hand-off) and `python tb/dma/dma_timeline.py` of chain128 8 B x 128 to the "
           "neighbour, 4 KiB x 4 local, a register-mode 4 KiB transfer and the neighbour's "
           "start point (every TLP's time): 3033 values, none different; at 7cd319b and "
           "0ace8bf the two tuning sweeps of 9ca7a0e's evidence, every time, table and row "
           "the same")
NEUTRAL.update({c: _REVIEW for c in ("ba6fbae", "2b7166e", "0ace8bf", "7719748", "8eaa526")})
NEUTRAL["52996de"] = "docstrings of the moved tuning and DMA code wrapped (the same syntax trees)"
NEUTRAL["1763037"] = ("the queue's has_slot and has_after from held_now (the same functions of "
                      "slot and tail): at b1b742d and 1763037 the four DMA timelines of _REVIEW "
                      "(every TLP's time) and `peach2 bench calibration` (723 values, the DMA "
                      "queue's appends among them): none different")

_COMMIT = re.compile(r"\bat ([0-9a-f]{7,40})(\+changes)?\b")
_MARKS = ("**Stale:**", "**Staleness unknown:**")


def _git(*args):
    """``git -C ROOT args``'s standard output, or None when it exits non-zero (``OSError`` and
    ``subprocess.TimeoutExpired`` propagate)."""
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                         timeout=60)
    return out.stdout if out.returncode == 0 else None


def changed_since(commit, paths, to=None):
    """Files of ``paths`` (git pathspecs) that differ between ``commit`` and the working tree
    (or commit ``to``), pure renames left out; ``None`` when a commit is not in this clone or
    git cannot say."""
    try:
        out = _git("diff", "--name-status", "-M", commit, *([to] if to else []), "--", *paths)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out is None:
        return None
    files = []
    for line in out.splitlines():
        status, *names = line.split("\t")
        if status == "R100":
            continue
        if status[0] in "MR" and names[-1].endswith(".py") and _unchanged_code(
                commit, names[0], names[-1], to):
            continue
        if _neutral_only(commit, names[-1], to):
            continue
        files.append(names[-1])
    return files


@functools.lru_cache(maxsize=4096)
def _neutral_only(commit, path, to):
    """Whether every commit that changed ``path`` after ``commit`` (up to ``to``, or HEAD with
    the working tree the same as HEAD there) is one of :data:`NEUTRAL`."""
    if not NEUTRAL:
        return False
    try:
        if to is None and _git("diff", "--quiet", "HEAD", "--", path) is None:
            return False                # changed in the working tree: not shown neutral
        log = _git("log", "--format=%H", f"{commit}..{to or 'HEAD'}", "--", path)
    except (OSError, subprocess.TimeoutExpired):
        return False
    changes = (log or "").split()
    return bool(changes) and all(any(c.startswith(n) for n in NEUTRAL) for c in changes)


def same_code(old, new):
    """Whether two Python sources are the same program: equal syntax trees once docstrings are
    left out (comments and layout never reach the tree); False when either does not parse."""
    try:
        trees = [ast.parse(text) for text in (old, new)]
    except (SyntaxError, ValueError):
        return False
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                        and isinstance(first.value.value, str):
                    node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(trees[0]) == ast.dump(trees[1])


@functools.lru_cache(maxsize=4096)
def _unchanged_code(commit, old_path, new_path, to):
    """Whether ``new_path`` (at ``to``, or in the working tree) is :func:`same_code` as
    ``old_path`` at ``commit``; False when either cannot be read."""
    def show(rev, path):
        return _git("show", f"{rev}:{path}")
    try:
        old = show(commit, old_path)
        new = show(to, new_path) if to else (ROOT / new_path).read_text()
    except (OSError, subprocess.TimeoutExpired, UnicodeDecodeError):
        return False
    return old is not None and new is not None and same_code(old, new)


def note(name, text):
    """The mark for section ``name`` whose text (its stamps) is ``text``: "" when nothing
    behind it changed since every commit its stamps name."""
    commits = list(dict.fromkeys(m.group(1) for m in _COMMIT.finditer(text)))
    if not commits:
        return ""
    stale, unknown = {}, []
    for commit in commits:
        files = changed_since(commit, DEPENDS[name])
        if files is None:
            unknown.append(commit)
        elif files:
            stale[commit] = files
    if unknown:
        return (f"**Staleness unknown:** commit {', '.join(unknown)} is not in this clone, so "
                f"whether its sources changed cannot be said.")
    if not stale:
        return ""
    files = sorted(set().union(*stale.values()))
    folders = sorted({f if f.count("/") < 2 else f.rsplit("/", 1)[0] for f in files})
    shown = ", ".join(f"`{f}`" for f in folders[:6]) + (", ..." if len(folders) > 6 else "")
    fresh = [c for c in commits if c not in stale]
    kept = (f"; those measured at {', '.join(fresh)} are current" if fresh else "")
    if len(stale) > 1:              # stamps per part: say which commit's figures, and how much
        since = ", ".join(f"{len(f)} since {c}" for c, f in stale.items())
        return (f"**Stale:** files behind the figures of several runs changed ({since}; the "
                f"stamps say which figures each run measured; {shown}); `peach2 bench {name}` "
                f"measures them again{kept}.")
    return (f"**Stale:** {len(files)} file{'s' if len(files) > 1 else ''} behind these "
            f"figures changed since {next(iter(stale))} "
            f"({shown}); `peach2 bench {name}` measures them again{kept}.")


def _unmarked(text):
    """``text`` without its mark and the blank line :func:`mark` put before it."""
    out = []
    for line in text.split("\n"):
        if line.startswith(_MARKS):
            if out and out[-1] == "":
                out.pop()
            continue
        out.append(line)
    return "\n".join(out)


def mark(name, text):
    """``text`` of section ``name`` with its stale mark brought up to date (after the section's
    run stamp; after the heading when it has none, or has stamps only under its subheadings)."""
    lines = _unmarked(text).split("\n")
    line = note(name, "\n".join(s for s in lines if "Measured by" in s))
    if not line:
        return "\n".join(lines)
    at = next((i for i, s in enumerate(lines) if "Measured by" in s or s.startswith("### ")), 0)
    at = at if "Measured by" in lines[at] else 0      # stamps only under subheadings: the top
    return "\n".join(lines[:at + 1] + ["", line] + lines[at + 1:])
