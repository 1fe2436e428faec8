"""Prove two versions of the DMA controller, or of the whole core, the same machine with Yosys
and ABC (a restructuring moved nothing).

Usage (from the repository root, in the project's venv; one Yosys process: the DMA alone takes
3 to 4 minutes, the whole core 8 to 11, ``docs/dma.md``)::

    python tb/synth/equivalence.py a603616 [NEW] [--top dma|core] [--work DIR]

``NEW`` is a commit, or the working tree when left out.  For each version the top
(``--top dma``: ``DMA(n_routes=8, n_tags=128, buffer_bytes=16384)``, the default build's DMA;
``--top core``: ``PEACH2()``, the default core) is written as RTLIL by that version's own
sources and prepared by Yosys: ``proc; flatten; opt`` and ``dffunmap`` (every register a plain
``$dff``: enables and resets become logic).  Then both netlists are cut into their transition
functions:

- every register bit is paired with one of the other version (by a name unique in both, after
  stripping the hierarchy the DMA split added, or through :data:`RENAMED` for the registers the
  split renamed; a bit without a partner stops the proof) and replaced by an input ``ffq_<j>``
  (its state) and an output ``ffd_<j>`` (its next state);
- every memory port is replaced by outputs (address, data, enables) and an input (read data);
  the memories themselves (size, width, initial contents, port kinds) must be the same, and so
  must the registers' initial values.

The two cut netlists, which have the same inputs and outputs, are joined into a miter (``miter
-equiv``: ``trigger`` is 1 when any output differs), mapped to gates, swept by ABC's ``fraig``
(SAT sweeping: nodes proved equal are merged, so each comparison that holds becomes a
constant) and the SAT solver then proves ``trigger`` 0 for every input and state.  That is
a proof by induction over time that the two are the same machine cycle for cycle: same initial
state, same next state and same outputs from the same state and inputs, and memories that see
the same writes and reads.  It says nothing about names, which may differ.  Don't-care
constants (``x``) read as 0 on both sides: Amaranth writes none into logic (only into memory
read ports' unused reset values); the ones in the prepared netlists are Yosys's marks on
multiplexer inputs its optimisation found no select value can reach.  Only one clock input,
rising edge, is supported, and only ``$dff`` registers and memories hold state (anything else,
an asynchronous reset say, stops the proof with its name).
A difference ends in :class:`NotEquivalent` naming the outputs ABC could not prove equal, with
the SAT solver's counterexample in ``prove.log``.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from peach2.synth.synthesis import run_yosys

__all__ = ["RENAMED", "TOPS", "NotEquivalent", "pair_registers", "cut", "prove", "prove_rtlil"]

ROOT = Path(__file__).resolve().parents[2]

#: The hierarchy the split (a603616 -> c4704cb..0815ad4) put in front of names.
_PREFIXES = ("writer.", "booking.", "receiver.", "planner.")

_ISSUE = {"iss": 0, "raddr": 1, "nbytes": 65, "fetch": 75, "chan": 76, "rows": 78, "hdr": 89,
          "dat": 94}               # rtl/dma/booking.py issue_layout(10), bit offsets
_RELEASE = {"en": 0, "rows": 1, "hdr": 12, "dat": 17}     # rtl/dma/writer.py release_layout

#: Registers the split renamed: old name -> (new name, bit offset).  Most became members of
#: the stream and report signatures between the components; ``pq_en`` lost its name
#: (``planner.$signal$<n>``, made in ``channels.channel_registers``).
RENAMED = {
    "pq": ("o_entry__payload", 0), "tbad": ("bad", 0), "pq_en": ("$signal", 0),
    "room_dat": ("room__room_dat", 0), "room_hdr": ("room__room_hdr", 0),
    "hdr_free": ("room__hdr_free", 0), "dat_free": ("room__dat_free", 0),
    "rd_skid_v": ("room__rd_busy", 0), "tail_row": ("next_row", 0),
    "last_sel": ("planner.sel", 0), "ret_en": ("report__retire", 0),
    "ret_c": ("report__retire", 1),
    **{f"d_{k}": ("issue", v) for k, v in _ISSUE.items()},
    **{f"rel_{k}": ("release", v) for k, v in _RELEASE.items()},
}

#: What ``--top`` elaborates: the statement that makes ``top``, and the names the split
#: renamed inside it (the core holds the DMA as its submodule ``dma``).
TOPS = {
    "dma": ("from peach2.dma.engine import DMA\n"
            "top = DMA(n_routes=8, n_tags=128, buffer_bytes=16384)", RENAMED),
    "core": ("from peach2.top import PEACH2\ntop = PEACH2()",
             {f"dma.{old}": (f"dma.{new}", off) for old, (new, off) in RENAMED.items()}),
}

_RTLIL = """
import sys
from amaranth.back import rtlil
{make}
open(sys.argv[1], "w").write(rtlil.convert(top, name="top", emit_src=False))
"""

_PREPARE = """
read_rtlil {name}.il
hierarchy -top top
proc
flatten
opt
dffunmap
opt_clean
write_json {name}.json
"""

#: The miter of the two cut netlists, swept by ABC (``fraig``: nodes proved equal by SAT are
#: merged, so every comparison of a next state or output that holds becomes the constant 1),
#: then the SAT proof of its ``trigger`` (any comparison 1) being 0 for all inputs.  ``x``
#: (Yosys's marks on multiplexer inputs nothing selects) reads as 0 on both sides.
_PROVE = """
read_json gold_cut.json
read_json gate_cut.json
setundef -zero
miter -equiv -flatten -make_outcmp gold gate miter
hierarchy -top miter
opt_clean
techmap
opt -fast
abc -g AND -script +strash;fraig;fraig;map
opt -fast
write_json swept.json
sat -prove trigger 0
"""


class NotEquivalent(Exception):
    """The two versions differ (the message names what differs)."""


def _yosys(script, work, log):
    """Run ``script`` (text) in ``work``, its log in ``log.log``; raise on a Yosys failure."""
    (work / f"{log}.ys").write_text(script)
    run_yosys(f"{log}.ys", work, f"{log}.log")


def _write_rtlil(version, top, work, name):
    """Write ``name.il``: ``top`` (a :data:`TOPS` key) by the sources of ``version`` (a commit,
    or None: the working tree)."""
    env = None
    if version is not None:
        src = work / f"src_{name}"
        shutil.rmtree(src, ignore_errors=True)          # a --work folder used before
        src.mkdir()
        archive = subprocess.run(["git", "archive", version, "rtl"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        (src / "pkg").mkdir()
        (src / "pkg" / "peach2").symlink_to(src / "rtl")
        env = dict(os.environ, PYTHONPATH=str(src / "pkg"))
    script = _RTLIL.format(make=TOPS[top][0])
    subprocess.run([sys.executable, "-c", script, str(work / f"{name}.il")], check=True,
                   env=env, cwd=work)


def _netlist(work, name):
    """Prepare ``name.il`` (module ``top``) into a flat netlist of plain ``$dff``s."""
    _yosys(_PREPARE.format(name=name), work, f"prepare_{name}")
    return json.loads((work / f"{name}.json").read_text())["modules"]["top"]


_NUMBERED = re.compile(r"\$\d+")


def _short(name):
    for prefix in _PREFIXES:
        name = name.replace(prefix, "")
    return name


def _register_bits(mod):
    """``{bit: {(name, index), ...}}`` of every register output bit, names stripped."""
    names = defaultdict(set)
    for n, net in mod["netnames"].items():
        if net.get("hide_name"):
            continue
        for i, b in enumerate(net["bits"]):
            if isinstance(b, int):
                names[b].add((_short(n), i))
                names[b].add((n, i))
    bits = [b for c in mod["cells"].values() if c["type"] == "$dff"
            for b in c["connections"]["Q"]]
    return {b: names[b] for b in bits}


def pair_registers(old, new, renamed=RENAMED):
    """Return ``{old bit: new bit}`` for every register bit (names unique in both, or
    ``renamed``: old name -> (new name, bit offset); a new name ending in ``$signal`` stands
    for any of Yosys's ``$signal$<n>``); raise ``ValueError`` naming the bits left without a
    partner."""
    ro, rn = _register_bits(old), _register_bits(new)
    by_old, by_new = defaultdict(set), defaultdict(set)
    for b, names in ro.items():
        for a in names:
            by_old[a].add(b)
    for b, names in rn.items():
        for a in names:
            by_new[a].add(b)
    pairs, taken = {}, set()

    def by_name(b, numbered):
        for a in sorted(ro[b]):
            if (bool(_NUMBERED.search(a[0])) == numbered and len(by_old[a]) == 1
                    and len(by_new.get(a, ())) == 1 and not by_new[a] & taken):
                pairs[b] = next(iter(by_new[a]))
                taken.add(pairs[b])
                return True
        return False

    # Names Amaranth numbered to make them unique (``o_tlp__valid$303``) may be numbered anew
    # by the other version: they pair only the bits no other name pairs, last.
    for b, names in ro.items():
        if not by_name(b, numbered=False):
            for name, i in sorted(names):
                if name in renamed:
                    target, off = renamed[name]
                    found = {nb for (n, j), bs in by_new.items() if j == off + i and (
                        n == target or target.endswith("$signal")
                        and n.startswith(target + "$")) for nb in bs} - taken
                    if len(found) == 1:
                        pairs[b] = found.pop()
                        taken.add(pairs[b])
                        break
    for b in ro:
        if b not in pairs:
            by_name(b, numbered=True)
    if len(pairs) != len(ro) or len(ro) != len(rn):
        lost = sorted({min(ro[b], default=(f"<unnamed bit {b}>",))[0]
                       for b in ro if b not in pairs})
        spare = sorted({min(rn[b], default=(f"<unnamed bit {b}>",))[0]
                        for b in rn if b not in taken})
        raise ValueError(f"registers without a partner: {', '.join(lost[:20]) or 'none'} "
                         f"(old), {', '.join(spare[:20]) or 'none'} (new)")
    return pairs


def _inits(mod, index):
    out = {}
    for net in mod["netnames"].values():
        init = net.get("attributes", {}).get("init")
        for i, b in enumerate(net["bits"]):
            if init and b in index:
                out[index[b]] = init[::-1][i]
    return out


#: Cells that hold state or are not logic: only the ones :func:`cut` cuts may be there.
_NOT_LOGIC = re.compile(r"ff|latch|^\$sr$|^\$mem|^\$fsm|^\$(print|check|assert|assume|cover|"
                        r"live|fair|any|all|initstate|equiv)|^[^$]")
_CUT = {"$dff", "$memrd_v2", "$memwr_v2", "$meminit_v2"}


def _check_cells(mod, name):
    left = sorted({c["type"] for c in mod["cells"].values()
                   if _NOT_LOGIC.search(c["type"]) and c["type"] not in _CUT})
    if left:
        raise ValueError(f"cells that hold state or are not logic in {name}: "
                         f"{', '.join(left)} (only $dff registers and memories can be cut)")


def _add(table, key, value):
    if key in table:
        raise ValueError(f"two things would be cut to one name: {key}")
    table[key] = value


def cut(mod, index):
    """Cut ``mod`` (in place) into its transition function; return what must be equal
    besides: the memories' parameters, the registers' initial values and the clock."""
    ports, memories, reads, memids = mod["ports"], {}, defaultdict(list), {}
    label = {b: f"{n}[{i}]" for n, p in ports.items() for i, b in enumerate(p["bits"])}
    label.update((q, f"ffq_{j}") for q, j in index.items())
    clocks = set()
    for cn in list(mod["cells"]):
        c = mod["cells"][cn]
        conn, par = c["connections"], c["parameters"]
        if c["type"] == "$dff":
            clocks.add((label.get(conn["CLK"][0]), int(par["CLK_POLARITY"], 2)))
            for q, d in zip(conn["Q"], conn["D"]):
                _add(ports, f"ffq_{index[q]}", {"direction": "input", "bits": [q]})
                _add(ports, f"ffd_{index[q]}", {"direction": "output", "bits": [d]})
        elif c["type"] in ("$memrd_v2", "$memwr_v2", "$meminit_v2"):
            full = par.pop("MEMID").lstrip("\\")
            memid = _short(full)
            if memids.setdefault(memid, full) != full:
                raise ValueError(f"memories {memids[memid]} and {full} are both {memid} once "
                                 "the hierarchy is stripped")
            if int(par.get("CLK_ENABLE", "0"), 2):
                clocks.add((label.get(conn["CLK"][0]), int(par["CLK_POLARITY"], 2)))
            if c["type"] == "$memrd_v2":
                reads[memid].append(c)
            elif c["type"] == "$memwr_v2":
                port = f"{memid}_wr{int(par['PORTID'], 2)}"
                for p in ("ADDR", "DATA", "EN"):
                    _add(ports, f"mem_{port}_{p}", {"direction": "output", "bits": conn[p]})
                _add(memories, port, par)
            else:
                par["connections"] = conn
                _add(memories, f"{memid}_init", par)
        else:
            continue
        del mod["cells"][cn]
    for memid, cells in reads.items():
        # Read ports in the order of their addresses and enables (the same pairs in both).
        cells.sort(key=lambda c: [str(label.get(b, b)) for b in
                                  c["connections"]["ADDR"] + c["connections"]["EN"]])
        for k, c in enumerate(cells):
            port = f"{memid}_rd{k}"
            for p in ("ADDR", "EN", "SRST", "ARST"):
                _add(ports, f"mem_{port}_{p}", {"direction": "output",
                                               "bits": c["connections"][p]})
            _add(ports, f"mem_{port}_DATA", {"direction": "input",
                                            "bits": c["connections"]["DATA"]})
            _add(memories, port, c["parameters"])
    if len(clocks) > 1 or any(polarity != 1 or name is None for name, polarity in clocks):
        raise ValueError(f"one clock input, rising edge, is supported: found {sorted(clocks)}")
    inits = _inits(mod, index)
    mod.pop("memories", None)
    mod["netnames"] = {n: {"bits": p["bits"], "hide_name": 0, "attributes": {}}
                       for n, p in ports.items()}
    return memories, inits, clocks


def _register(j, names):
    """Register bit ``j`` by its name: ``cnt[1]``."""
    name, index = names[j]
    return f"{name.lstrip(chr(92))}[{index}]"


def _describe(port, names):
    """An output of the cut netlists as the register or memory port it stands for."""
    if port.startswith("ffd_") and port[4:].isdigit():
        return f"next state of {_register(int(port[4:]), names)}"
    return port


def prove_rtlil(work, renamed=RENAMED, log=print):
    """Prove ``work/gold.il`` and ``work/gate.il`` (module ``top`` each) the same machine.

    Return (register bits paired, memory read and write ports, outputs); raise
    :class:`NotEquivalent` naming what differs, ``ValueError`` when registers cannot be paired.
    """
    work = Path(work)
    gold, gate = _netlist(work, "gold"), _netlist(work, "gate")
    _check_cells(gold, "the old version")
    _check_cells(gate, "the new version")
    pairs = pair_registers(gold, gate, renamed)
    index = {b: j for j, b in enumerate(sorted(pairs))}
    bits = _register_bits(gold)
    names = {j: min(bits[b], key=lambda n: ("$" in n[0], n), default=(f"bit {b}", 0))
             for b, j in index.items()}
    log(f"{len(pairs)} register bits paired")
    mem_gold, init_gold, clk_gold = cut(gold, index)
    mem_gate, init_gate, clk_gate = cut(gate, {pairs[b]: j for b, j in index.items()})
    if clk_gold != clk_gate:
        raise NotEquivalent(f"clocked by other inputs: {clk_gold} and {clk_gate}")
    if mem_gold != mem_gate:
        raise NotEquivalent("the memories differ: " + ", ".join(
            sorted(set(mem_gold) ^ set(mem_gate))
            or [m for m in mem_gold if mem_gold[m] != mem_gate[m]]))
    starts = [j for j in index.values() if init_gold.get(j) != init_gate.get(j)]
    if starts:
        raise NotEquivalent(f"{len(starts)} registers start from other values: "
                            + ", ".join(_register(j, names) for j in starts[:20]))
    if set(gold["ports"]) != set(gate["ports"]):
        raise NotEquivalent(f"ports differ: {sorted(set(gold['ports']) ^ set(gate['ports']))}")
    outputs = [n for n, p in gold["ports"].items() if p["direction"] == "output"]
    n_ports = sum(not k.endswith("_init") for k in mem_gold)
    for mod, name in ((gold, "gold"), (gate, "gate")):
        (work / f"{name}_cut.json").write_text(json.dumps({"modules": {name: mod}}))
    log(f"{len(outputs)} outputs ({sum(len(gold['ports'][n]['bits']) for n in outputs)} bits) "
        f"and {n_ports} memory ports compared; sweeping the miter with ABC, then SAT")
    for stale in ("prove.log", "swept.json"):
        (work / stale).unlink(missing_ok=True)
    _yosys(_PROVE, work, "prove")           # raises when Yosys fails
    text = (work / "prove.log").read_text()
    if "SAT proof finished - no model found: SUCCESS!" in text:
        return len(pairs), n_ports, len(outputs)
    if "SAT proof finished - model found: FAIL!" not in text:
        raise RuntimeError(f"Yosys stopped before the proof's end: see {work / 'prove.log'}")
    swept = json.loads((work / "swept.json").read_text())["modules"]["miter"]["ports"]
    open_ = sorted(n.removeprefix("cmp_") for n, p in swept.items()
                   if n.startswith("cmp_") and any(b != "1" for b in p["bits"]))
    raise NotEquivalent(f"a state and inputs exist where they differ (counterexample in "
                        f"{work / 'prove.log'}); outputs not proved equal ({len(open_)}): "
                        + "; ".join(_describe(n, names) for n in open_[:20]))


def prove(old_version, new_version=None, top="dma", work=None, log=print):
    """Prove ``top`` (a :data:`TOPS` key) of ``old_version`` and of ``new_version`` (a commit;
    None: the working tree) the same machine; see :func:`prove_rtlil`."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(work or scratch).resolve()
        work.mkdir(parents=True, exist_ok=True)
        _write_rtlil(old_version, top, work, "gold")
        _write_rtlil(new_version, top, work, "gate")
        return prove_rtlil(work, TOPS[top][1], log)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python tb/synth/equivalence.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="commit of the old version (e.g. a603616)")
    ap.add_argument("new", nargs="?", help="commit of the new version (default: working tree)")
    ap.add_argument("--top", choices=sorted(TOPS), default="dma",
                    help="what to compare: the DMA alone (default) or the whole core")
    ap.add_argument("--work", type=Path, metavar="DIR",
                    help="keep the netlists and Yosys logs here (default: a temporary folder)")
    args = ap.parse_args(argv)
    for version in (args.old, args.new):
        if version is not None and subprocess.run(
                ["git", "rev-parse", "--verify", "--quiet", f"{version}^{{commit}}"],
                cwd=ROOT, capture_output=True).returncode:
            ap.error(f"not a commit of this repository: {version}")
    try:
        registers, ports, outputs = prove(args.old, args.new, args.top, args.work,
                                          log=lambda s: print(s, file=sys.stderr, flush=True))
    except (NotEquivalent, ValueError) as err:
        print(f"not proved equivalent: {err}")
        return 1
    print(f"equivalent: {registers} register bits paired, {ports} memory ports the same, "
          f"{outputs} next states and outputs proved equal for every state and input")
    return 0


if __name__ == "__main__":
    sys.exit(main())
