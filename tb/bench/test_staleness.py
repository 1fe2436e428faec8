"""docs/benchmarks.md marks every section whose gateware or models changed since its run
(``peach2.sim.bench.staleness``), so figures never go stale silently."""

import subprocess
import sys

import pytest

from peach2.sim.bench import doc, staleness
from peach2.sim.bench.results import ROOT, SECTIONS


def _head():
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"],
                         capture_output=True, text=True)
    if out.returncode:
        pytest.skip("not a git checkout: staleness cannot be computed")
    return out.stdout.strip()


@pytest.mark.parametrize("name", SECTIONS)
def test_document_marks_stale_sections(name):
    _head()
    text = doc.kept_text(doc.DOC.read_text(), name)
    assert text is not None, f"section {name} is missing from docs/benchmarks.md"
    stamps = "\n".join(line for line in text.split("\n") if "Measured by" in line)
    expected = staleness.note(name, stamps)
    if expected.startswith("**Staleness unknown"):
        pytest.skip(f"{name}: its run's commit is not in this clone (shallow?)")
    assert ("**Stale:**" in text) == bool(expected), (
        f"section {name}: {'not marked, but ' + expected if expected else 'marked stale, but nothing behind it changed'}"
        f" (rebuild the document: peach2 bench --doc-only)")


def test_mark_follows_the_sources():
    head = _head()
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", "6551fc4^{commit}"],
                           capture_output=True)
    if known.returncode:
        pytest.skip("commit 6551fc4 is not in this clone (shallow?)")
    fresh = f"## T\n\nMeasured by `x` at {head} on today.\n\nBody."
    assert staleness.mark("router", fresh) == fresh
    # the reset fix (rtl/router/linkstate.py) came after 6551fc4
    old = fresh.replace(head, "6551fc4")
    marked = staleness.mark("router", old)
    assert "**Stale:**" in marked and "since 6551fc4" in marked and "`rtl/router`" in marked
    assert staleness.mark("router", marked) == marked                 # idempotent
    assert staleness.mark("router", marked.replace("6551fc4", head)) == fresh   # measured again
    assert staleness.mark("router", fresh.replace(head, "0000000")).startswith(
        "## T\n\nMeasured by") and "Staleness unknown" in staleness.mark(
        "router", fresh.replace(head, "0000000"))


def test_drawing_code_measures_nothing_again():
    """87834d7 changed only the hybrid tuning section's notes (``sim/hybrid/figures``): the
    hybrid sections' sources did not change, though ``sim/hybrid`` did."""
    _head()
    if staleness.changed_since("87834d7^", ["sim/hybrid"], to="87834d7") is None:
        pytest.skip("commit 87834d7 is not in this clone (shallow?)")
    assert staleness.changed_since("87834d7^", ["sim/hybrid"], to="87834d7") == [
        "sim/hybrid/figures/tuning.py"]
    for name in ("hybrid", "tuning", "halo"):
        assert staleness.changed_since("87834d7^", staleness.DEPENDS[name], to="87834d7") == []


def test_heatmap_command_and_drawing_are_not_behind_the_sweeps():
    """The heatmaps' command and drawing are left out of the hybrid sections' sources
    (``_DRAWING``): true only while nothing that measures those sections imports them."""
    code = ("import sys, peach2.sim.hybrid.sweep, peach2.sim.hybrid.launch, "
            "peach2.sim.hybrid.halo_bench, peach2.sim.hybrid.hybrid_tb; "
            "print(sorted(m for m in sys.modules if m.startswith('peach2.sim.hybrid.heatmap')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    for spec in staleness._DRAWING:
        assert spec.startswith(":(exclude)sim/hybrid/")


def test_only_stamps_name_commits():
    """Hex-looking numbers in a section's prose are not taken for commits."""
    head = _head()
    text = f"## T\n\nMeasured by `x` at {head}.\n\nA transfer at 1048576 bytes, at deadbeef."
    assert staleness.mark("router", text) == text


def test_gateware_is_every_module_the_core_imports():
    """A change to any module the chip is built from marks the simulated sections stale: every
    ``peach2`` module importing ``peach2.top`` loads lies under an entry of GATEWARE (the put
    engine and ``rtl/util.py`` were missing once, so their changes went unmarked)."""
    import subprocess
    import sys

    from peach2.sim.bench.staleness import GATEWARE
    listing = subprocess.run(
        [sys.executable, "-c", "import os, sys, peach2, peach2.top\n"
         "root = os.path.dirname(peach2.__file__)\n"
         "print('\\n'.join(os.path.relpath(m.__file__, root) for n, m in list(sys.modules.items())"
         " if n.startswith('peach2') and getattr(m, '__file__', None)))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert listing and "put/engine.py" in listing
    for module in listing:
        path = f"rtl/{module}"
        assert any(path == g or path.startswith(g + "/") for g in GATEWARE), path


def test_docstrings_comments_and_layout_do_not_make_code_change():
    """A file whose only changes are docstrings, comments or layout runs as it did, so it
    does not mark a section stale; any change to what runs does."""
    from peach2.sim.bench.staleness import same_code
    old = '"""Module."""\n\ndef f(x):\n    """Twice x."""\n    return 2 * x  # double\n'
    assert same_code(old, '"""Module, said better."""\n\n\ndef f(x):\n    """2x."""\n'
                          '    # the product\n    return (2 *\n            x)\n')
    assert same_code(old, 'def f(x):\n    return 2 * x\n')        # docstrings gone
    assert not same_code(old, old.replace("2 * x", "3 * x"))
    assert not same_code(old, old.replace("def f(x)", "def f(x, y=0)"))
    assert not same_code(old, old + "\nLIMIT = 1\n")
    assert not same_code(old, "def f(x:\n")                         # does not parse
    # a string that is not the first statement is code
    assert not same_code('def f():\n    x = 1\n    "a"\n', 'def f():\n    x = 1\n    "b"\n')


def test_commits_shown_neutral_do_not_make_stamps_stale(monkeypatch):
    """A file changed only by commits of ``NEUTRAL`` counts as unchanged; one changed by
    another commit too, or in the working tree, still counts (9ca7a0e: the tuning sweeps'
    ``--cutoff``, shown to leave every time the same)."""
    _head()
    if staleness.changed_since("9ca7a0e^", ["sim/hybrid"], to="9ca7a0e") is None:
        pytest.skip("commit 9ca7a0e is not in this clone (shallow?)")
    files = ["sim/hybrid/hybrid_tb.py", "sim/hybrid/launch.py", "sim/hybrid/runner.py",
             "sim/hybrid/saved.py", "sim/hybrid/sweep.py", "sim/hybrid/tuning.py"]
    monkeypatch.setattr(staleness, "NEUTRAL", {})
    staleness._neutral_only.cache_clear()
    assert [f for f in staleness.changed_since("9ca7a0e^", ["sim/hybrid"], to="9ca7a0e")
            if not f.startswith("sim/hybrid/figures")] == files
    monkeypatch.setattr(staleness, "NEUTRAL", {"9ca7a0e": "test"})
    staleness._neutral_only.cache_clear()
    assert staleness.changed_since("9ca7a0e^", staleness.DEPENDS["hybrid"], to="9ca7a0e") == []
    # from two commits back, 5cae057 (docs only) and 9ca7a0e: still neutral
    assert staleness.changed_since("9ca7a0e~2", ["sim/hybrid/runner.py"], to="9ca7a0e") == []
    # 2439574 (--networks) changed sweep.py too, and is not in NEUTRAL: it counts
    assert staleness.changed_since("2439574^", ["sim/hybrid/sweep.py"], to="9ca7a0e") == [
        "sim/hybrid/sweep.py"]
    staleness._neutral_only.cache_clear()
