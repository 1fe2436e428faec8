"""The tree passes ruff (pinned in the ``test`` extras) with the rules of pyproject.toml's
``[tool.ruff]``: pyflakes (unused and undefined names), syntax and statement errors, whitespace
warnings and import order.  ``ruff check --fix .`` at the root repairs most findings."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, (
        f"ruff check (exit {result.returncode}); run `ruff check --fix .` at the root, then fix "
        f"the rest by hand:\n{result.stdout}{result.stderr}")


def test_ruff_reads_the_projects_rules():
    """The configuration in force is the repository's (a stray ruff.toml would replace it)."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--show-settings", "."],
                            cwd=ROOT, capture_output=True, text=True, check=True)
    assert f"Settings path: \"{ROOT / 'pyproject.toml'}\"" in result.stdout
    for rule in ("F401", "F821", "E711", "E902", "I001"):     # one of each group selected
        assert f"({rule})" in result.stdout, rule
