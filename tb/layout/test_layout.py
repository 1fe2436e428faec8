"""The package layout's rules, checked on the source tree (no simulator).

- imports point one way: nothing under ``rtl/`` (the ``peach2`` package: gateware, routes,
  synthesis tools, CLI) names ``peach2.sim``;
- a name with a leading underscore never crosses a package boundary;
- the sub-packages of ``sim/`` import only those listed before them in :data:`LAYERS`;
- no folder of ``sim/`` holds more than 12 modules;
- every test file sits in an area folder of ``tb/``, none at its root.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULES = 12
#: The sub-packages of ``peach2.sim``, each allowed to import only those before it.
LAYERS = ("run", "formal", "reference", "hardip", "pcie", "hdl", "driver", "harness",
          "collectives", "infiniband", "verbs", "node", "mpi", "machine", "system", "hybrid",
          "bench")


def _module(path):
    """Dotted name of a source file (``rtl/x/y.py`` -> ``peach2.x.y``)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] == "rtl":
        return ".".join(["peach2", *parts[1:]])
    if parts[0] == "sim":
        return ".".join(["peach2", "sim", *parts[1:]])
    return ".".join(parts)


def _package(module):
    """The package a module belongs to (``peach2.sim.pcie.host`` -> ``peach2.sim.pcie``)."""
    return module.rpartition(".")[0]


def _sources(*folders):
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path):
    """``(module imported from, name)`` of every ``from ... import`` in ``path``."""
    me = _module(path)
    package = me if path.name == "__init__.py" else _package(me)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                yield node.lineno, source, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None


def test_gateware_package_never_imports_the_simulator():
    bad = [f"{p.relative_to(ROOT)}:{line} {source}" for p in _sources("rtl")
           for line, source, _ in _imports(p) if source.startswith("peach2.sim")]
    assert not bad, bad


def test_sim_packages_import_one_way():
    packages = sorted(p.name for p in (ROOT / "sim").iterdir()
                      if (p / "__init__.py").exists())
    unknown = [p for p in packages if p not in LAYERS]
    assert not unknown, f"add {unknown} to LAYERS"
    bad = []
    for path in _sources("sim"):
        rel = path.relative_to(ROOT / "sim").parts
        if len(rel) < 2:
            continue
        mine = LAYERS.index(rel[0])
        for line, source, _ in _imports(path):
            parts = source.split(".")
            if parts[:2] == ["peach2", "sim"] and len(parts) > 2 and parts[2] != rel[0]:
                if LAYERS.index(parts[2]) > mine:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {source}")
    assert not bad, bad


def test_no_private_name_crosses_a_package():
    bad = []
    for path in _sources("rtl", "sim", "tb"):
        here = _package(_module(path)) if path.name != "__init__.py" else _module(path)
        for line, source, name in _imports(path):
            if name and name.startswith("_") and not name.startswith("__"):
                if source.startswith("peach2") and _package(source) != here:
                    bad.append(f"{path.relative_to(ROOT)}:{line} {name} from {source}")
    assert not bad, bad


@pytest.mark.parametrize("folder", sorted(p.relative_to(ROOT).as_posix()
                                          for p in (ROOT / "sim").rglob("*") if p.is_dir()
                                          and "__pycache__" not in p.parts))
def test_sim_folders_stay_small(folder):
    modules = [p for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES, f"{folder}: {len(modules)} modules"


def test_no_loose_files_in_tb():
    loose = [p.name for p in (ROOT / "tb").glob("*.py")]
    assert not loose, loose


def test_module_names_are_unique_in_tb():
    """pytest imports test files by their base name (tb/ has no packages): two files of one
    name in different folders cannot both be collected."""
    seen = {}
    for path in sorted((ROOT / "tb").rglob("*.py")):
        seen.setdefault(path.name, []).append(path.relative_to(ROOT).as_posix())
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, clashes
