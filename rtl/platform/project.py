"""The Quartus project of the PEACH2 board, written without Quartus (Amaranth's Intel platform
with ``do_build=False``)."""

from pathlib import Path

from .board import SDC_FILE, PEACH2Platform
from .chip import Chip
from .hardip import VARIANTS

__all__ = ["NAME", "write_project"]

#: Project, revision and top-level entity name.
NAME = "peach2"


def _settings(roles):
    variants = sorted({VARIANTS[role] for role in roles})
    lines = [
        "# Hard-IP variants from the vendor's generator (IP Compiler for PCI Express), made with",
        "# the settings in constraints/hardip_variants.md and generated into this folder; each",
        "# .qip lists the files of its variant, <variant>_plus.v among them.",
        *(f"set_global_assignment -name QIP_FILE {v}.qip" for v in variants),
        "# Vendor recommendation for the hard IP (the generator's example project settings).",
        'set_global_assignment -name OPTIMIZE_HOLD_TIMING "ALL PATHS"',
    ]
    return "\n".join(lines)


def write_project(out, progress=None, **design):
    """Write the Quartus project for the core built with ``design`` options into ``out``.

    Returns ``(files, chip)``: the paths written, and the :class:`Chip` (its ``core`` holds the
    port roles).  The Verilog holds the whole chip: the core, the four hard-IP instances
    (modules ``<variant>_plus``), the PLL and the reset synchroniser.  ``progress(text)``, if
    given, is called as each step starts (``peach2.progress.Progress``).
    """
    out = Path(out)
    say = progress or (lambda text: None)
    platform = PEACH2Platform(on_convert=lambda: say(
        "converting to Verilog (RTLIL, then Yosys) and filling in the project files..."))
    chip = Chip(**design)
    say("elaborating the chip for the PEACH2 board (core, four hard IPs, PLL)...")
    plan = platform.build(chip, name=NAME, do_build=False,
                          add_constraints=SDC_FILE.read_text(),
                          add_settings=_settings(chip.core.port_roles.values()))
    say(f"writing {len(plan.files)} files...")
    plan.extract(str(out))
    files = sorted(out / name for name in plan.files)
    return files, chip
