"""Markdown for ``docs/synthesis.md`` from a :class:`~peach2.synth.synthesis.Report`."""

import re
from collections import defaultdict

from .fingerprint import to_comment
from .synthesis import DEVICE, LEVEL_BUDGET

__all__ = ["BEGIN", "END", "to_markdown", "update_document"]

BEGIN = "<!-- synth-report:begin (written by `peach2 synth-report`; do not edit by hand) -->"
END = "<!-- synth-report:end -->"


def _pct(part, whole):
    return f"{100 * part / whole:.1f} %"


def _levels(own, flow):
    paths = own.get(flow)
    return paths[0].levels if paths else 0


def _path_line(path):
    if path is None:
        return "-"
    return f"{path.levels}"


def _describe(path):
    start, end = path.start, path.end
    return (f"{path.levels} levels: `{start[0]}` `{start[1]}` -> `{end[0]}` `{end[1]}`; "
            f"blocks: {' -> '.join(path.blocks)}")


def to_markdown(report):
    """Return the report section (between :data:`BEGIN` and :data:`END`)."""
    out = [BEGIN, ""]
    params = ", ".join(f"{k}={v}" for k, v in report.parameters.items()) or "defaults"
    out += [f"Design: `peach2` core ({params}). Tool: {report.yosys}. "
            f"Run time: {report.seconds:.0f} s.", ""]
    if report.fingerprint:
        fp = report.fingerprint
        out += [f"Gateware: RTLIL SHA-256 `{fp['rtlil'][:16]}`, `rtl/` sources SHA-256 "
                f"`{fp['sources'][:16]}` (checked by `tb/synth/test_synthesis_fingerprint.py`: a "
                "change to `rtl/` that changes the RTLIL makes it fail until this report is "
                "made again).", "", to_comment(fp), ""]

    out += ["### Per block", "",
            "Depth: the block alone, its ports taken as registers (own), and the deepest path "
            "of the whole core that ends in the block (core).", "",
            "| block | class | LUT6 | FFs | memory bits (LUT RAM) | ALUTs | carry cells "
            "| ALMs (est.) | own depth, LUT6 | own depth, ALM | own paths > "
            f"{LEVEL_BUDGET} (ALM) | core depth, ALM |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b in report.blocks:
        g, a = b.generic, b.alm
        aluts = a.get("lut", 0) + a.get("arith", 0)
        out.append(f"| `{b.name}` | {b.kind} | {g.get('lut', 0)} | {g.get('ff', 0)} "
                   f"| {g.get('mem_bits', 0)} ({g.get('mlab_bits', 0)}) | {aluts} "
                   f"| {a.get('arith', 0)} | {b.alm_estimate} | {_levels(b.own, 'generic')} "
                   f"| {_levels(b.own, 'alm')} | {b.over_budget.get('alm', 0)} "
                   f"| {_path_line(b.depth.get('alm'))} |")
    out.append("")

    kinds = defaultdict(list)
    for b in report.blocks:
        kinds[b.kind].append(b)
    out += ["### Per kind of block", "",
            "| class | instances | LUT6 | FFs | memory bits | ALMs (est.) | own depth, ALM |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind, group in sorted(kinds.items(), key=lambda kv: -sum(b.alm_estimate for b in kv[1])):
        deepest = max((_levels(b.own, "alm") for b in group), default=0)
        out.append(f"| {kind} | {len(group)} | {sum(b.generic.get('lut', 0) for b in group)} "
                   f"| {sum(b.generic.get('ff', 0) for b in group)} "
                   f"| {sum(b.generic.get('mem_bits', 0) for b in group)} "
                   f"| {sum(b.alm_estimate for b in group)} | {deepest} |")
    out.append("")

    luts, ffs = report.total("generic", "lut"), report.total("generic", "ff")
    mem = report.total("generic", "mem_bits")
    aluts = report.total("alm", "lut") + report.total("alm", "arith")
    alms = report.alm_estimate
    out += ["### Total against the EP4SGX530", "",
            "| resource | core | EP4SGX530 | share |", "| --- | ---: | ---: | ---: |",
            f"| ALMs (estimate from the Cyclone V mapping) | {alms} | {DEVICE['alms']} "
            f"| {_pct(alms, DEVICE['alms'])} |",
            f"| combinational ALUTs (Cyclone V mapping) | {aluts} | {DEVICE['aluts']} "
            f"| {_pct(aluts, DEVICE['aluts'])} |",
            f"| 6-input LUTs (generic mapping, adders in LUTs) | {luts} | {DEVICE['aluts']} "
            f"| {_pct(luts, DEVICE['aluts'])} |",
            f"| registers | {ffs} | {DEVICE['registers']} "
            f"| {_pct(ffs, DEVICE['registers'])} |",
            f"| memory bits (M9K + M144K + MLAB) | {mem} | {DEVICE['memory_bits']} "
            f"| {_pct(mem, DEVICE['memory_bits'])} |", ""]


    over = [b for b in report.blocks if b.own.get("alm")
            and b.own["alm"][0].levels > LEVEL_BUDGET]
    out += ["### Blocks over the budget", "",
            f"Deepest path of each block alone (ALM mapping, budget {LEVEL_BUDGET}):" if over
            else f"No block alone has a path deeper than {LEVEL_BUDGET} levels.", ""]
    for b in sorted(over, key=lambda b: -b.own["alm"][0].levels):
        p = b.own["alm"][0]
        out.append(f"- `{b.name}`: {p.levels} levels, `{p.start[1]}` -> `{p.end[1]}`")
    out.append("")

    out += ["### Deepest register-to-register paths of the whole core", ""]
    for flow, title in (("alm", "ALM mapping, LUT levels outside carry chains (the goal's "
                                f"measure, budget {LEVEL_BUDGET})"),
                        ("generic", "generic 6-input LUT mapping, adders as LUTs")):
        paths = report.paths[flow]
        worst = paths[0].levels if paths else 0
        verdict = ("within the budget" if worst <= LEVEL_BUDGET
                   else f"**over the budget of {LEVEL_BUDGET}**")
        out += [f"{title}: worst {worst}, {verdict}.", ""]
        seen = set()
        for path in paths:
            key = tuple(path.blocks)
            if key in seen:
                continue
            seen.add(key)
            out.append(f"- {_describe(path)}")
            if len(seen) == 5:
                break
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def update_document(text, section):
    """Replace the report section of ``text`` (or append it if there is none)."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: section, text)
    return text.rstrip("\n") + "\n\n" + section
