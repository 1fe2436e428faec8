"""Collective figures on the HDL sub-cluster (docs/benchmarks.md, "Collectives").

Broadcast, Allgather, halo exchange, collision, latency per hop.

    python tb/collectives/bench_collectives.py [--quick] [--nodes 8,16] [--part bcast|rest]
                                               [--doc-only]
    mpiexec -n 3 python tb/collectives/bench_collectives.py ...   # the simulations on 2 ranks

Runs ``collectives_bench`` (tb/collectives/collectives_tb.py) on the 2x4 (8 nodes) and the 2x8
(16 nodes) with the cable model's default credits and the calibrated hard-IP pipeline, the two
simulations side by side (four in the full run: each node count's Broadcast apart from the rest):

- Broadcast (root 0) for 8 B .. 1 MiB and Allgather (recursive doubling, and kind ``ring``:
  the ring algorithm along the double ring; the size is one node's block) from 8 B up to 1 MiB
  gathered (128 KiB blocks on 8 nodes, 64 KiB on 16: a
  16-node Allgather of 1 MiB blocks is 4.5 ms of simulated time, over an hour on a shared
  machine), on 8 and 16 nodes (``--quick``: 8 B, 512 B, 32 KiB);
- halo exchange of ``N^3`` (8-byte elements) on a 2x4 process grid (8 nodes), N = 16 .. 128,
  pairwise and naive descriptor order (``--quick``: 16, 32);
- the collision case on 8 nodes: node 1 and node 3 each put the same size into node 2 at once
  (each one's time and the total), against one alone;
- an 8-byte put with completion write from node 0 to the nearest node at each hop count of
  the 2x8: time against the hops of the route set, and the time per extra hop;
- kind ``small``: the 8-byte Broadcast and Allgather, binomial / recursive doubling and in one
  step, as chained DMAs, over inline puts and by size (``run(paths="auto")``: one CPU store where
  a step is one store).

Every result is checked byte for byte against the reference model during the run.  Results go
to ``docs/results/collectives.json``, ``docs/benchmarks.md`` is rebuilt (``bench_doc``) and the
plot goes to ``docs/img/coll_times.png`` (:mod:`peach2.sim.bench.collectives_doc`); no other
section's plot is redrawn.  ``--part`` measures one of the full run's two simulations per node
count (with ``--quick`` too, at the quick sizes).  What a run prints as measured is what it
measured; rows kept from earlier runs are only named, and ``--from-raw`` says its figures come
from an earlier run's raw files.
"""

import argparse
import importlib.util
import json
import shlex
import sys
import threading
import time
from pathlib import Path

from peach2.sim.bench import collectives_doc as bench_collectives_doc
from peach2.sim.bench import doc as bench_doc
from peach2.sim.bench import results as bench_results
from peach2.sim.bench.pool import PointPool, in_script

HERE = Path(__file__).resolve().parent
TB = HERE.parent
ROOT = TB.parent

SIZES = [8, 64, 512, 4096, 32768, 262144, 1 << 20]
QUICK_SIZES = [8, 512, 32768]
HALO_NS = [16, 32, 64, 128]
QUICK_HALO_NS = [16, 32]
COLLISION = [4096, 65536, 262144]
QUICK_COLLISION = [65536]
TOPOLOGY = {8: "2x4", 16: "2x8"}
#: The Allgather's largest gathered total per node (the full run).
ALLGATHER_TOTAL = 1 << 20
#: What a run measures; parameters named ``<kind>...`` belong to that kind.
KINDS = ("bcast", "allgather", "ring", "halo", "collision", "hops", "small")
#: The small-message cases (``collectives_bench``'s ``small``): every Broadcast and Allgather
#: form at 8 bytes, as chained DMAs, over inline puts and by size (``run(paths="auto")``).
SMALL = [[kind, 8, paths] for kind in ("bcast", "direct_bcast", "allgather", "direct_allgather")
         for paths in ("dma", "inline", "auto")]
QUICK_NOTE = "sizes 8 B, 512 B, 32 KiB; halo N = 16, 32; collision 64 KiB"


def tb_module(name, folder=HERE):
    """Import ``<folder>/<name>.py`` (this folder's test module) by path, once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def allgather_sizes(nodes, sizes):
    """Block sizes of the Allgather: those of ``sizes`` whose gathered total (``nodes`` blocks)
    is at most :data:`ALLGATHER_TOTAL`, and the block that makes exactly that total."""
    out = [x for x in sizes if x * nodes <= ALLGATHER_TOTAL]
    return out + ([ALLGATHER_TOTAL // nodes] if ALLGATHER_TOTAL // nodes not in out else [])


#: The parts of a run on one node count: one simulation each (``--part``).
PARTS = ("bcast", "rest")


def jobs(nodes, quick, split=None):
    """The ``collectives_bench`` runs on ``nodes`` nodes: ``[(part name, parameters)]``;
    the full run measures the Broadcast (and the hops) in one simulation and the rest in
    another, side by side (:data:`PARTS`); a quick run measures all in one (part ``"all"``)
    unless ``split`` (default: not ``quick``) asks for the two parts."""
    split = not quick if split is None else split
    sizes = QUICK_SIZES if quick else SIZES
    gather = {"allgather_sizes": sizes if quick else allgather_sizes(nodes, sizes)}
    gather["ring_allgather_sizes"] = gather["allgather_sizes"]
    rest = {"bcast_sizes": sizes, "small": SMALL}
    if nodes == 8:
        rest.update(halo_ns=QUICK_HALO_NS if quick else HALO_NS, halo_grid=[2, 4],
                    collision_sizes=QUICK_COLLISION if quick else COLLISION)
    else:
        rest["hops"] = True
    parts = [("all", {**rest, **gather})] if not split else \
        [("bcast", {k: v for k, v in rest.items() if k in ("bcast_sizes", "hops")}),
         ("rest", {**{k: v for k, v in rest.items() if k not in ("bcast_sizes", "hops")},
                   **gather})]
    out = []
    for name, params in parts:
        need = max(max(params.get("bcast_sizes", [0])),
                   max(params.get("allgather_sizes", [0])) * nodes,
                   2 * max(params.get("collision_sizes", [0])), 1 << 20,
                   max((n // 2 + 2) * (n // 4 + 2) * n * 8 for n in params.get("halo_ns", [0])))
        need += 1 << 16
        params["host_size"] = 1 << (need - 1).bit_length()
        params["buffer"] = params["host_size"] - (1 << 16)
        out.append((name, params))
    return out


def raw_path(nodes, part):
    """Where a simulation's raw results are kept (build/bench/)."""
    return ROOT / "build" / "bench" / f"collectives-{nodes}-{part}.json"


def measure(nodes, part, params, progress):
    """Run one benchmark simulation on ``nodes`` nodes; return its JSON result."""
    run = tb_module("test_collectives", HERE).run
    out = raw_path(nodes, part)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    t0 = time.perf_counter()
    try:
        run(f"bench-coll-{nodes}-{part}", TOPOLOGY[nodes], "collectives_bench", cable=None,
            result_file=str(out), progress_file=str(progress), **params)
    except BaseException as exc:    # keep the points measured before it stopped
        if not out.stat().st_size:
            raise
        print(f"{nodes} nodes, {part}: stopped ({exc!r}); keeping the points measured",
              flush=True)
    result = json.loads(out.read_text())
    result["wall_s"] = {part: time.perf_counter() - t0}
    return result


def merge(results):
    """One result per node count from its parts' results (lists joined, wall times kept)."""
    out = {}
    for r in results:
        n = str(r["nodes"])
        if n not in out:
            out[n] = r
            continue
        out[n]["complete"] = out[n].get("complete", False) and r.get("complete", False)
        for key, value in r.items():
            if isinstance(value, list):
                out[n].setdefault(key, []).extend(value)
            elif key == "wall_s":
                out[n]["wall_s"].update(value)
    return out


def measure_item(item):
    """:func:`measure` of ``(nodes, part, params, progress)`` (what the pool maps)."""
    return measure(*item)


def run_jobs(todo, progress):
    """Measure every ``todo`` entry ``(nodes, part, params)``, all side by side (under
    ``mpiexec``, one per worker rank at a time: :class:`peach2.sim.bench.pool.PointPool`),
    printing the progress files' new lines meanwhile; return the results in ``todo``'s order.
    A failed simulation raises once the others have finished."""
    pool = PointPool("collectives", len(todo))
    seen = {j[:2]: 0 for j in todo}
    stop = threading.Event()

    def show():
        for n, part in seen:
            path = Path(f"{progress}-{n}-{part}")
            lines = path.read_text().splitlines() if path.exists() else []
            for line in lines[seen[(n, part)]:]:
                print(line, flush=True)
            seen[(n, part)] = len(lines)

    def follow():
        while not stop.wait(5):
            show()
    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    try:
        return pool.map(in_script(__file__, "measure_item") if pool.mpi else measure_item,
                        [(n, part, params, f"{progress}-{n}-{part}") for n, part, params in todo],
                        names=[f"{n} nodes, {part}" for n, part, _ in todo],
                        done=lambda k, _: print(f"collectives: simulation {todo[k][0]} nodes, "
                                                f"{todo[k][1]} done", flush=True))
    finally:
        stop.set()
        follower.join()
        show()


class _Parser(argparse.ArgumentParser):
    """Bad options: one line (``<prog>: error: ...``) and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parser():
    p = _Parser(prog="python tb/collectives/bench_collectives.py",
                description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"fewer sizes: {QUICK_NOTE}")
    p.add_argument("--nodes", default="8,16",
                   help="node counts to measure, among 8 and 16 (default both)")
    p.add_argument("--doc-only", action="store_true",
                   help="measure nothing: rebuild docs/benchmarks.md and this section's plot "
                        "from the saved results")
    p.add_argument("--conditions", default=None,
                   help="what else ran on the machine (saved with the run)")
    p.add_argument("--part", choices=PARTS, default=None,
                   help="measure one part only (bcast: Broadcast and hops; rest: the others), "
                        "with or without --quick, and replace its rows in the saved results, "
                        "keeping the other rows")
    p.add_argument("--kinds", default=None,
                   help="with --part: only these of its measurements, comma-separated "
                        f"among {', '.join(KINDS)}")
    p.add_argument("--from-raw", action="store_true",
                   help="measure nothing: take the simulations' raw results kept under "
                        "build/bench/ by the last run of the same options (printed as such)")
    p.add_argument("--awake", action="store_true",
                   help="the N hard-IP models never sleep while idle (slower)")
    return p


def plan(args, p):
    """``[(nodes, part, parameters)]`` of the simulations ``args`` ask for; a combination that
    would measure nothing is refused through ``p`` (one line, status 2)."""
    try:
        nodes = [int(x) for x in args.nodes.split(",") if x]
    except ValueError:
        nodes = []
    if not nodes or any(n not in TOPOLOGY for n in nodes):
        p.error(f"--nodes takes 8 and/or 16, not {args.nodes!r}")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else list(KINDS)
    if args.kinds and not args.part:
        p.error("--kinds goes with --part")
    if any(k not in KINDS for k in kinds) or not kinds:
        p.error(f"--kinds takes {', '.join(KINDS)}, not {args.kinds!r}")
    if args.doc_only and (args.part or args.from_raw):
        p.error("--doc-only measures nothing: no --part, no --from-raw")
    todo = []
    for n in nodes:
        for part, params in jobs(n, args.quick, split=True if args.part else None):
            if args.part not in (None, part):
                continue
            mine = {k: v for k, v in params.items()
                    if not any(k.startswith(x) for x in KINDS) or
                    any(k.startswith(x) for x in kinds)}
            if any(k.startswith(x) for k in mine for x in KINDS):
                todo.append((n, part, mine | {"awake": args.awake}))
    if not todo and not args.doc_only:
        p.error(f"nothing to measure: --part {args.part} on {args.nodes} nodes has no "
                f"{', '.join(kinds)} (bcast: Broadcast, and hops on 16 nodes; rest: "
                f"Allgather and ring Allgather, and halo and collision on 8 nodes)")
    return todo


def main(argv=None):
    p = parser()
    given = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(given)
    todo = plan(args, p)
    # Under mpiexec with several ranks, rank 0 runs the benchmark and the others its simulations.
    with PointPool.ranks() as master:
        return _run(args, given, todo, p) if master else 0


def _row_keys(saved):
    """(node count, part) of every part of ``saved`` that has rows."""
    return [(n, kind) for n, res in saved.items() if n in ("8", "16")
            for kind, rows in res.items() if isinstance(rows, list) and rows]


def _promote(saved, info):
    """Once every row of ``saved`` is stamped in its ``parts`` (the node counts or parts were
    measured by runs of their own), the section's stamp becomes this run's (``info``) and
    ``parts`` keeps the other runs' stamps of rows: no stamp then names a run whose figures
    are all gone."""
    parts = saved.get("parts") or {}
    rows = {f"{n} nodes, {kind}" for n, kind in _row_keys(saved)}
    if rows and rows <= set(parts):
        saved["run"] = info
        saved["parts"] = {key: run for key, run in parts.items() if key in rows and run != info}


def _run(args, given, todo, p):
    """Measure (or only rebuild the document) as ``args`` say; return the exit status."""
    results_mod = bench_results
    report = bench_collectives_doc
    if not args.doc_only:
        tb_module("test_collectives", HERE)     # before the threads: they share it
        start = results_mod.started()
        command = shlex.join(["python", "tb/collectives/bench_collectives.py",      # as measured
                              *[a for a in given if a != "--from-raw"]])
        # beside the raw results (build/bench/): the same folder for every rank of one machine
        progress = ROOT / "build" / "bench" / f"collectives-progress-{start['time']:.0f}"
        if args.from_raw:
            missing = [str(raw_path(n, part)) for n, part, _ in todo
                       if not raw_path(n, part).exists()]
            if missing:
                p.error(f"--from-raw: no raw results {', '.join(missing)}; run without it")
            got = [json.loads(raw_path(n, part).read_text()) for n, part, _ in todo]
        else:
            progress.parent.mkdir(parents=True, exist_ok=True)
            got = run_jobs(todo, progress)
        shortened = [QUICK_NOTE] if args.quick else []
        saved = results_mod.load("collectives") or {}     # now: another run may have saved
        info = results_mod.run_info(command, start, shortened, args.conditions)
        measured = merge(got)
        print(report.summary(measured, "collectives, from the raw results of an earlier run "
                                       "(build/bench/), not measured now" if args.from_raw
                             else "collectives, measured by this run"), flush=True)
        # A run of every part on both node counts replaces the section and its stamp; any
        # other run (one part, or one node count) replaces only the rows it measured and
        # stamps them in ``parts``.
        if args.part is None and set(measured) == {str(n) for n in TOPOLOGY}:
            saved.update(measured)
            saved["run"] = info
            saved["parts"] = {}
        else:       # replace the rows measured, keep the rest and say whose they are
            saved.setdefault("run", info)
            for n, res in measured.items():
                old = saved.setdefault(n, res)
                for kind, rows in res.items():
                    if isinstance(rows, list) and rows:
                        old[kind] = rows
                        saved.setdefault("parts", {})[f"{n} nodes, {kind}"] = info
                old["complete"] = old.get("complete", False) and res.get("complete", False)
            kept = sorted(f"{n} nodes {kind}" for n, kind in _row_keys(saved)
                          if not (measured.get(n) or {}).get(kind))
            if kept:
                print(f"kept from earlier runs, not measured now: {', '.join(kept)}",
                      flush=True)
            _promote(saved, info)
        results_mod.save("collectives", saved)
        print("saved docs/results/collectives.json", file=sys.stderr, flush=True)
    bench_doc.rebuild(measured=["collectives"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
