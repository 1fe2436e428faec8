"""The core's RTLIL, split by module: what synthesis and the fingerprint both start from."""

import re

from ..convert import elaborate, to_rtlil

__all__ = ["core_rtlil", "rtlil_and_blocks", "split_modules"]


def rtlil_and_blocks(top, name, progress=None):
    """Elaborate ``top`` once; return its RTLIL and ``[(instance, class name)]`` of its
    direct submodules."""
    if progress is not None:
        progress(f"elaborating {name}...")
    fragment = elaborate(top)
    blocks = [(sub_name, type(sub.origins[0]).__name__ if sub.origins else "Fragment")
              for sub, sub_name, _ in fragment.subfragments]
    if progress is not None:
        progress("converting to RTLIL...")
    return to_rtlil(fragment, top, name), blocks


def core_rtlil(top, name, progress=None):
    """Return the RTLIL of ``top`` as module ``name``, ``{module name: RTLIL}`` of its modules
    and the instance names of its blocks (its direct submodules)."""
    text, blocks = rtlil_and_blocks(top, name, progress)
    return text, split_modules(text), [inst for inst, _ in blocks]


def split_modules(text):
    """Split RTLIL into ``{module name: text}`` (attribute lines stay with their module)."""
    modules, pending, current, lines = {}, [], None, []
    for line in text.splitlines(keepends=True):
        if current is None:
            match = re.match(r"module \\(\S+)", line)
            if match:
                current, lines, pending = match.group(1), pending + [line], []
            elif line.startswith("attribute"):
                pending.append(line)
            continue
        lines.append(line)
        if line.rstrip() == "end":
            modules[current] = "".join(lines)
            current = None
    return modules
