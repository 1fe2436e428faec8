"""Functional coverage of the router's traffic: a cross of seven dimensions, its reachable part
derived from the reference decision, samples from the test benches, a report of the holes.

Every TLP a router test bench or the soak sends and checks is *sampled* as one bin of each
dimension (:data:`DIMENSIONS`)::

    type x size x align x arrival x destination x error x backpressure

:func:`classify` takes the bins from the TLP as it was sent and from what came of it (the
outcome the test checked); :class:`Coverage` counts the 7-tuples.  Not every tuple can happen:
:func:`reachable` derives the set that can from the documented decision function
(:func:`peach2.sim.reference.router.route`, run over every environment that changes its
answer) and the drop reasons the reference leaves to other models (``docs/errors.md``:
framing, protection, link loss), applied to representative TLPs of every bin PCIe allows at a
port (:func:`example`).  The rules that exclude whole regions are in :data:`EXCLUDED`, each with
the reason, and the report prints them.

A report (bins reached / reachable / holes per dimension and for the cross, JSON)::

    python -m peach2.sim.harness.coverage build/sim/router-*/coverage.json \\
        --out docs/results/coverage.json

(``docs/verification.md``, "What is covered").
"""

import argparse
import json
import os
import random
import sys
import time
from bisect import bisect_left
from collections import Counter
from itertools import product
from pathlib import Path

from cocotbext.pcie.core.tlp import Tlp, TlpType

from peach2.params import REASON_TABLE
from peach2.sim.reference import RouteEntry, RouterState, route
from peach2.sim.run import commit

__all__ = ["DIMENSIONS", "TYPES", "SIZES", "ALIGNS", "ARRIVALS", "DESTS", "ERRORS", "PRESSURE",
           "EXCLUDED", "MPS_DW", "Coverage", "tlp_type", "size_class", "alignment", "classify",
           "example", "reachable", "outcome", "payload_dw", "beats_of", "ReadyLog", "report", "main"]

#: Largest payload of the router tests' links, DWs (``max_payload_size`` 256 bytes).
MPS_DW = 64
TYPES = ("MWr", "MRd", "Cpl", "CplD", "Msg", "Other")
SIZES = ("0", "1", "2-15", "16", "17-63", "64", ">64")
ALIGNS = ("n/a", "64B", "DW", "byte", "4KiB")
ARRIVALS = ("N", "E", "W", "S")
DESTS = ("N", "E", "W", "S", "CSR", "drop")
#: "none" and every drop reason of ``REASON_TABLE`` (not the traffic counts nor UR_SENT).
ERRORS = ("none",) + tuple(n for n, _, _ in REASON_TABLE
                           if n not in ("RX_TLPS", "TX_TLPS", "UR_SENT"))
PRESSURE = ("n/a", "ready", "stalled")

#: ``(name, bins, what a bin means)`` of every dimension, in tuple order.
DIMENSIONS = (
    ("type", TYPES, "MWr/MRd (any header size), Cpl/CplD (locked ones too), Msg/MsgD, Other: "
                    "configuration, I/O, atomics, locked reads"),
    ("size", SIZES, "payload DWs on the wire (Length of a TLP with data, else 0); 64 = the "
                    "links' max payload"),
    ("align", ALIGNS, "memory requests only: 64B starts on 64 bytes, DW on a DW, byte with a "
                      "partial first_be; 4KiB crosses a 4 KiB boundary (wins over the others)"),
    ("arrival", ARRIVALS, "port the TLP arrived on"),
    ("dest", DESTS, "port it left by, the register block, or dropped"),
    ("error", ERRORS, "drop reason counted for it (COUNT[p][r]), none when not dropped"),
    ("backpressure", PRESSURE, "TX ready of the port it left by low while its beats were due "
                               "(stalled) or not (ready); n/a when it left by no port"),
)

#: Regions of the cross that cannot be reached, and why; :func:`reachable` applies the rules.
EXCLUDED = (
    ("size >64", "a payload above the link's max payload size is a malformed TLP the hard IP "
                 "discards (PCIe base specification 2.2.2); it never reaches the router"),
    ("size of types without data", "MRd, Cpl, Msg, configuration and I/O reads carry no "
                                   "payload: size 0 only; a MWr carries at least 1 DW"),
    ("Other above 15 DW", "configuration and I/O writes carry 1 DW, atomics at most 8"),
    ("align of non-memory TLPs", "completions, messages, configuration, I/O and atomics are "
                                 "not routed by address here: align n/a"),
    ("align 4KiB", "a memory request must not cross 4 KiB (PCIe base specification 2.2.7); "
                   "the receiving hard IP discards one as malformed, so none reaches the "
                   "router (the protection test still sends some: defence, not sampled)"),
    ("forwarded non-MWr", "route(): only memory writes are forwarded; reads are rejected, "
                          "completions unexpected, the rest unsupported"),
    ("CSR", "route(): only memory requests on N hitting BAR 0 reach the register block"),
    ("error by type/port", "route(): e.g. READ_REJECTED only for MRd, UNEXPECTED_CPL only "
                           "for completions, WINDOW_CLOSED/UNROUTABLE only for MWr"),
    ("PROTECTED", "docs/errors.md: only writes arriving on E/W/S whose route leaves by N"),
    ("LINK_DOWN, LINK_FLUSHED", "docs/errors.md: only routed TLPs, toward a port other than "
                                "the one they came by (whose link is up: they arrived)"),
    ("backpressure", "ready/stalled only for TLPs that leave by a port; n/a otherwise"),
)

_WRITE = (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64)
_READ = (TlpType.MEM_READ, TlpType.MEM_READ_64)
_CPL = (TlpType.CPL, TlpType.CPL_LOCKED)
_CPLD = (TlpType.CPL_DATA, TlpType.CPL_LOCKED_DATA)


def tlp_type(tlp):
    """The type bin of ``tlp``."""
    ft = tlp.fmt_type
    if ft in _WRITE:
        return "MWr"
    if ft in _READ:
        return "MRd"
    if ft in _CPL:
        return "Cpl"
    if ft in _CPLD:
        return "CplD"
    if ft.name.startswith("MSG"):
        return "Msg"
    return "Other"


def payload_dw(tlp):
    """Payload DWs of ``tlp`` on the wire: its Length if it carries data, else 0."""
    return tlp.length if int(tlp.fmt_type.value[0]) & 2 else 0


def size_class(dw):
    """The size bin of a payload of ``dw`` DWs."""
    if dw <= 1:
        return str(dw)
    if dw < 16:
        return "2-15"
    if dw == 16:
        return "16"
    if dw < MPS_DW:
        return "17-63"
    return "64" if dw == MPS_DW else ">64"


def alignment(tlp):
    """The align bin of ``tlp`` (its byte span from ``address``, Length and ``first_be``)."""
    if tlp.fmt_type not in _WRITE + _READ:
        return "n/a"
    start = tlp.address
    last = start + 4 * max(tlp.length, 1) - 1
    if start >> 12 != last >> 12:
        return "4KiB"
    if tlp.first_be not in (0, 0xF):
        return "byte"
    return "64B" if start % 64 == 0 else "DW"


def classify(tlp, arrival, dest, error="none", pressure="n/a"):
    """Return the 7-tuple of ``tlp`` arrived on ``arrival`` (any case) with its outcome."""
    return (tlp_type(tlp), size_class(payload_dw(tlp)), alignment(tlp), arrival.upper(),
            dest.upper() if dest != "drop" else dest, error, pressure)


def outcome(decision):
    """``(dest, error)`` of a reference :class:`~peach2.sim.reference.router.Decision`."""
    if decision.action == "forward":
        return decision.port, "none"
    if decision.action in ("csr", "put"):       # a put leaves on the register block's output
        return "CSR", "none"
    return "drop", decision.reason


# -- representative TLPs --------------------------------------------------------------------

#: Payload DWs PCIe allows per type bin (the router's links: ``MPS_DW``; one more to show
#: the over-size bin); ``Other``: configuration and I/O writes 1 DW, atomics 1, 2, 4 or 8.
_LENGTHS = {"MWr": (1, 2, 15, 16, 17, 63, MPS_DW, MPS_DW + 1), "MRd": (0,), "Cpl": (0,),
            "CplD": (1, 2, 15, 16, 17, 63, MPS_DW, MPS_DW + 1), "Msg": (0, 1, 2, 16, 17, MPS_DW),
            "Other": (0, 1, 2, 4, 8)}
_SIZE_RANGE = {"0": (0, 0), "1": (1, 1), "2-15": (2, 15), "16": (16, 16),
               "17-63": (17, MPS_DW - 1), "64": (MPS_DW, MPS_DW), ">64": (MPS_DW + 1, 2 * MPS_DW)}


def _offset(rng, align, dws):
    """Byte offset in a 4 KiB page of a request of ``dws`` DWs in bin ``align`` (None: none)."""
    if align == "4KiB":
        if dws < 2:
            return None
        return 0x1000 - 4 * rng.randint(1, dws - 1)
    if align == "64B":
        return 64 * rng.randrange(0x1000 // 64 - (4 * dws + 63) // 64)
    if align in ("DW", "byte"):
        room = 0x1000 - 4 * dws
        off = 4 * rng.randrange(room // 4 + 1)
        if off % 64 == 0:
            off = off + 4 if off + 4 <= room else off - 4
        return off + (1 if align == "byte" else 0)
    return 0


def example(rng, kind, size, align, page=0, data=None):
    """A TLP of bins ``(kind, size, align)`` in the 4 KiB page at ``page``, or None if PCIe
    allows none (:data:`EXCLUDED`).  ``data`` (MWr): the bytes of its first DW as
    :func:`~peach2.sim.harness.router.seq_of` reads them (the ones before the start address
    are left out), the rest of the payload random.

    For memory requests only the header matters here: the test benches build the TLPs they
    send with their own builders and classify those (:func:`classify`).
    """
    lo, hi = _SIZE_RANGE[size]
    fits = [n for n in _LENGTHS[kind] if lo <= n <= hi]
    if not fits:
        return None
    memory = kind in ("MWr", "MRd")
    if memory == (align == "n/a"):
        return None
    dws = rng.randint(lo, hi) if kind in ("MWr", "CplD") or (kind == "Msg" and lo) else fits[0]
    tlp = Tlp()
    if memory:
        span = max(dws, 1) if kind == "MWr" else rng.choice([1, 2, 4, 8]) if align == "4KiB" \
            else 1
        off = _offset(rng, align, span)
        if off is None:
            return None
        address = page + off
        tlp.fmt_type = (_WRITE if kind == "MWr" else _READ)[address >= 1 << 32]
        if kind == "MWr":
            nbytes = 4 * dws - (address & 3)
            payload = (data or b"")[address & 3:][:nbytes]
            tlp.set_addr_be_data(address, payload + rng.randbytes(nbytes - len(payload)))
        else:
            nbytes = 4 * span - (address & 3) if align in ("4KiB", "byte") else 4 * span
            if align == "byte":
                nbytes = min(nbytes, 2)
            tlp.set_addr_be(address, nbytes)
        return tlp
    if kind in ("Cpl", "CplD"):
        tlp.fmt_type = TlpType.CPL_DATA if dws else TlpType.CPL
        if dws:
            tlp.set_data(rng.randbytes(4 * dws))
            tlp.byte_count = 4 * dws
        return tlp
    if kind == "Msg":
        tlp.fmt_type = TlpType.MSG_DATA_LOCAL if dws else TlpType.MSG_LOCAL
        if dws:
            tlp.set_data(rng.randbytes(4 * dws))
        return tlp
    tlp.fmt_type = {0: TlpType.CFG_READ_0, 1: TlpType.CFG_WRITE_0, 2: TlpType.SWAP_64,
                    4: TlpType.CAS_64, 8: TlpType.CAS_64}[dws]
    if dws:
        tlp.set_data(rng.randbytes(4 * dws))
    return tlp


# -- reachability -----------------------------------------------------------------------------

def _environments(tlp):
    """Every router state and BAR hit that can change :func:`route`'s answer for ``tlp``: the
    address routed to each port or to none, the windows open or closed, each BAR on N."""
    address = tlp.address if tlp.fmt_type in _WRITE + _READ else 0
    tables = [[RouteEntry((1 << 64) - 1, address, address, p)] for p in ARRIVALS] + [[]]
    for routes, enabled, bar in product(tables, (True, False), (0, 2, None)):
        yield RouterState(routes=routes, pio_enable=enabled, route_enable=enabled), bar


def _extended(port, dest, error):
    """Outcomes the reference router leaves to other models, from ``docs/errors.md``: framing
    errors hit any TLP; a write whose route leaves by N from E/W/S can be PROTECTED; a routed
    TLP toward another port can meet that port's link down (LINK_DOWN where it arrives) or be
    flushed when the link goes while it waits (LINK_FLUSHED)."""
    yield "drop", "MALFORMED"
    yield "drop", "RX_ERR"
    if error == "none" and dest in ARRIVALS:
        if dest == "N" and port != "N":
            yield "drop", "PROTECTED"
        if dest != port:
            yield "drop", "LINK_DOWN"
            yield "drop", "LINK_FLUSHED"


def reachable(seed=1, tries=4):
    """The set of reachable 7-tuples: for every (type, size, align) bin PCIe allows at a port
    (:func:`example`; sizes above ``MPS_DW`` never pass the hard IP), every arrival port and
    every environment, the outcomes :func:`route` gives, poisoned or not, and the extended
    ones; backpressure ready/stalled for outcomes that leave by a port, n/a otherwise."""
    rng = random.Random(seed)
    out = set()
    for kind, size, align in product(TYPES, SIZES, ALIGNS):
        if size == ">64" or align == "4KiB":
            continue            # the hard IP drops it (EXCLUDED)
        samples = [t for t in (example(rng, kind, size, align, 1 << 32) for _ in range(tries))
                   if t is not None]
        for tlp, port, ep in product(samples, ARRIVALS, (False, True)):
            if (tlp_type(tlp), size_class(payload_dw(tlp)), alignment(tlp)) != \
                    (kind, size, align):
                continue
            tlp.ep = ep
            results = set()
            for state, bar in _environments(tlp):
                dest, error = outcome(route(state, port, tlp, bar=bar if port == "N" else None))
                results.add((dest, error))
                results.update(_extended(port, dest, error))
            for dest, error in results:
                for pressure in (("ready", "stalled") if dest in ARRIVALS else ("n/a",)):
                    out.add((kind, size, align, port, dest, error, pressure))
    return frozenset(out)


# -- the model --------------------------------------------------------------------------------

class Coverage:
    """Hit counts of the cross; :meth:`report` compares them with the reachable set.

    ``hits`` is a :class:`collections.Counter` of 7-tuples (:data:`DIMENSIONS` order).
    """

    def __init__(self, hits=None):
        self.hits = Counter(hits or {})

    def sample(self, *bins):
        """Count one TLP in the bins ``(type, size, align, arrival, dest, error, pressure)``."""
        if len(bins) != len(DIMENSIONS):
            raise ValueError(f"{len(bins)} bins, expected {len(DIMENSIONS)}")
        for (name, allowed, _), b in zip(DIMENSIONS, bins):
            if b not in allowed:
                raise ValueError(f"{name}: {b!r} is not a bin ({allowed})")
        self.hits[tuple(bins)] += 1

    def sample_tlp(self, tlp, arrival, dest, error="none", pressure="n/a"):
        self.sample(*classify(tlp, arrival, dest, error, pressure))

    def merge(self, other):
        self.hits.update(other.hits)
        return self

    def holes(self, goal):
        """Reachable tuples of ``goal`` never hit, sorted."""
        return sorted(set(goal) - set(self.hits))

    def unreachable_hits(self, goal):
        """Tuples hit that :func:`reachable` says cannot happen (a model or classifier bug)."""
        return sorted(set(self.hits) - set(goal))

    def to_json(self):
        return {"dimensions": [n for n, _, _ in DIMENSIONS],
                "hits": [list(k) + [v] for k, v in sorted(self.hits.items())]}

    @classmethod
    def from_json(cls, data):
        return cls({tuple(row[:-1]): row[-1] for row in data["hits"]})

    def save(self, path):
        Path(path).write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path):
        return cls.from_json(json.loads(Path(path).read_text()))


def report(cov, goal=None, sources=()):
    """``(text, data)``: per dimension and for the cross, bins reached, reachable and holes."""
    goal = reachable() if goal is None else goal
    hit = set(cov.hits)
    lines = [f"{'dimension':<13} {'bins':>5} {'reachable':>9} {'reached':>8} holes"]
    dims = {}
    for i, (name, bins, _) in enumerate(DIMENSIONS):
        can = [b for b in bins if any(t[i] == b for t in goal)]
        got = [b for b in can if any(t[i] == b for t in hit)]
        holes = [b for b in can if b not in got]
        dims[name] = {"bins": list(bins), "reachable": can, "reached": got, "holes": holes,
                      "unreachable": [b for b in bins if b not in can]}
        lines.append(f"{name:<13} {len(bins):>5} {len(can):>9} {len(got):>8} "
                     f"{' '.join(holes) or '-'}")
    total = 1
    for _, bins, _ in DIMENSIONS:
        total *= len(bins)
    holes = cov.holes(goal)
    bad = cov.unreachable_hits(goal)
    lines.append(f"{'cross':<13} {total:>5} {len(goal):>9} {len(goal) - len(holes):>8} "
                 f"{len(holes)} holes")
    for h in holes[:20]:
        lines.append("  hole: " + " ".join(h))
    if len(holes) > 20:
        lines.append(f"  ... {len(holes) - 20} more")
    for b in bad[:20]:
        lines.append("  hit but not reachable: " + " ".join(b))
    lines.append(f"{sum(cov.hits.values())} TLPs sampled")
    data = {"dimensions": dims,
            "cross": {"bins": total, "reachable": len(goal), "reached": len(goal) - len(holes),
                      "holes": [list(h) for h in holes],
                      "hit_unreachable": [list(b) for b in bad]},
            "excluded": [{"region": r, "rule": why} for r, why in EXCLUDED],
            "tlps": sum(cov.hits.values()), "sources": [str(s) for s in sources],
            "hits": cov.to_json()["hits"]}
    return "\n".join(lines), data


# -- backpressure -------------------------------------------------------------------------------

def beats_of(tlp):
    """128-bit beats of ``tlp`` on the Avalon-ST interface (header, alignment DW, payload)."""
    header = 4 if int(tlp.fmt_type.value[0]) & 1 else 3
    return (header + 1 + payload_dw(tlp) + 3) // 4


class ReadyLog:
    """The cycles in which a hard-IP model's backpressure generator held ``tx_st_ready`` low.

    :meth:`wrap` passes a generator's values on and notes the model's cycle of each 1;
    :meth:`stalled` says whether any fell in a TLP's window (its beats and the two cycles of
    ready latency before them, ending at the cycle its last beat was taken).
    """

    def __init__(self):
        self.low = []

    def wrap(self, model, generator):
        low = self.low
        for v in generator:
            if v:
                low.append(model.cycle + 1)
            yield v

    def stalled(self, cycle, beats):
        i = bisect_left(self.low, cycle - beats - 3)
        return i < len(self.low) and self.low[i] <= cycle


# -- the command --------------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m peach2.sim.harness.coverage",
        description="Merge coverage files of the router tests and the soak; print bins reached, "
                    "reachable and holes per dimension and for the cross; write JSON.")
    parser.add_argument("files", nargs="*", type=Path,
                        help="coverage.json files written by the test benches "
                             "(default: build/sim/*/coverage.json)")
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    args = parser.parse_args(argv)
    if args.out is not None:            # checked before any work
        folder = args.out.resolve().parent
        if args.out.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
            print(f"--out: cannot write {args.out} (no writable folder {folder}, or a folder)",
                  file=sys.stderr)
            return 4
    files = args.files or sorted(Path("build/sim").glob("*/coverage.json"))
    if not files:
        print("no coverage files: run `python -m pytest tb/router tb/cluster/test_soak.py` "
              "first", file=sys.stderr)
        return 2
    cov, goal, per_file = Coverage(), reachable(), []
    for f in files:
        one = Coverage.load(f)
        cov.merge(one)
        per_file.append({"file": str(f), "tlps": sum(one.hits.values()),
                         "reached": len(set(one.hits) & goal)})
    text, data = report(cov, goal, sources=files)
    data = {"run": {"command": "python -m peach2.sim.harness.coverage "
                               + " ".join(argv if argv is not None else sys.argv[1:]),
                    "commit": commit(), "date": time.strftime("%Y-%m-%d")},
            "per_file": per_file, **data}
    for row in per_file:
        print(f"{row['file']}: {row['tlps']} TLPs, {row['reached']} reachable bins")
    print(text)
    if args.out:
        try:
            args.out.write_text(json.dumps(data, indent=1) + "\n")
        except OSError as e:
            print(f"--out: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
            return 4
    return 1 if data["cross"]["holes"] else 0


if __name__ == "__main__":
    sys.exit(main())
