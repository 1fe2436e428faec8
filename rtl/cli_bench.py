"""``peach2 bench [SECTION ...] [--quick]``: the repository's benchmarks (``docs/benchmarks.md``).

The benchmarks are testbench code (``tb/bench/benchmarks.py``, cocotb and the simulators), not part of
the installed package, so this command runs them from the source tree of an editable install
(``pip install -e ".[test]"``: the package's ``rtl/`` is that tree's).  Anywhere else it says
so and exits with status 2.  Every option is ``tb/bench/benchmarks.py``'s (``peach2 bench --help``).
"""

import importlib.util
import sys
from pathlib import Path

__all__ = ["HELP", "benchmarks_script", "main"]

HELP = ("measure the benchmarks and rebuild docs/benchmarks.md (editable install only; "
        "peach2 bench --help lists one command per study)")


def benchmarks_script():
    """The source tree's ``tb/bench/benchmarks.py``, or None when this install has no source tree."""
    root = Path(__file__).resolve().parent.parent
    script = root / "tb" / "bench" / "benchmarks.py"
    return script if script.is_file() and (root / "pyproject.toml").is_file() else None


def main(argv):
    """Run ``tb/bench/benchmarks.py``'s ``main`` with ``argv``; return the exit status."""
    script = benchmarks_script()
    if script is None:
        print("error: peach2 bench runs the repository's benchmark code (tb/bench/benchmarks.py), "
              "which this install does not have; clone the repository and install it with "
              "pip install -e \".[test]\"", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("peach2_benchmarks", script)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        print(f"error: peach2 bench needs the test extras ({exc.name or exc} is missing): "
              "pip install -e \".[test]\"", file=sys.stderr)
        return 2
    module.main(list(argv), prog="peach2 bench")
    return 0
