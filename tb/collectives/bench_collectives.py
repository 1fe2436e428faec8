"""Collective figures on the HDL sub-cluster: Broadcast, Allgather, halo exchange, collision,
latency per hop.

    python tb/collectives/bench_collectives.py [--quick] [--nodes 8,16] [--doc-only]

Runs ``collectives_bench`` (tb/collectives/collectives_tb.py) on the 2x4 (8 nodes) and the 2x8
(16 nodes) with the cable model's default credits and the calibrated hard-IP pipeline, the two
simulations side by side (four in the full run: each node count's Broadcast apart from the rest):

- Broadcast (root 0) for 8 B .. 1 MiB and Allgather (recursive doubling; the size is one
  node's block) from 8 B up to 1 MiB gathered (128 KiB blocks on 8 nodes, 64 KiB on 16: a
  16-node Allgather of 1 MiB blocks is 4.5 ms of simulated time, over an hour on a shared
  machine), on 8 and 16 nodes (``--quick``: 8 B, 512 B, 32 KiB);
- halo exchange of ``N^3`` (8-byte elements) on a 2x4 process grid (8 nodes), N = 16 .. 128,
  pairwise and naive descriptor order (``--quick``: 16, 32);
- the collision case on 8 nodes: node 1 and node 3 each put the same size into node 2 at once
  (each one's time and the total), against one alone;
- an 8-byte put with completion write from node 0 to the nearest node at each hop count of
  the 2x8: time against the hops of the route set, and the time per extra hop.

Every result is checked byte for byte against the reference model during the run.  Results go
to ``docs/results/collectives.json``, ``docs/benchmarks.md`` is rebuilt (``bench_doc``) and the
plot goes to ``docs/img/coll_times.png`` (:mod:`peach2.sim.bench.collectives_doc`).
"""

import argparse
import importlib.util
import json
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

from peach2.sim.bench import collectives_doc as bench_collectives_doc
from peach2.sim.bench import doc as bench_doc
from peach2.sim.bench import results as bench_results

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
KINDS = ("bcast", "allgather", "halo", "collision", "hops")
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


def jobs(nodes, quick):
    """The ``collectives_bench`` runs on ``nodes`` nodes: ``[(part name, parameters)]``;
    the full run measures the Broadcast (and the hops) in one simulation and the rest in
    another, side by side."""
    sizes = QUICK_SIZES if quick else SIZES
    gather = {"allgather_sizes": sizes if quick else allgather_sizes(nodes, sizes)}
    rest = {"bcast_sizes": sizes}
    if nodes == 8:
        rest.update(halo_ns=QUICK_HALO_NS if quick else HALO_NS, halo_grid=[2, 4],
                    collision_sizes=QUICK_COLLISION if quick else COLLISION)
    else:
        rest["hops"] = True
    parts = [("all", {**rest, **gather})] if quick else \
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


def run_jobs(todo, job, progress):
    """Run ``job(nodes, part, params)`` for every ``todo`` entry in threads, printing the
    progress files' new lines meanwhile."""
    threads = [threading.Thread(target=job, args=j) for j in todo]
    for t in threads:
        t.start()
    seen = {j[:2]: 0 for j in todo}
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        for n, part in seen:
            path = Path(f"{progress}-{n}-{part}")
            lines = path.read_text().splitlines() if path.exists() else []
            for line in lines[seen[(n, part)]:]:
                print(line, flush=True)
            seen[(n, part)] = len(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes (see the docstring)")
    parser.add_argument("--nodes", default="8,16",
                        help="node counts to measure, among 8 and 16 (default both)")
    parser.add_argument("--doc-only", action="store_true",
                        help="only rebuild docs/benchmarks.md and the plots from saved results")
    parser.add_argument("--conditions", default=None,
                        help="what else ran on the machine (saved with the run)")
    parser.add_argument("--part", choices=("bcast", "rest"), default=None,
                        help="measure one part of the full run only (bcast: Broadcast and "
                             "hops; rest: the others) and replace its rows in the saved "
                             "results, keeping the other rows")
    parser.add_argument("--kinds", default=None,
                        help="with --part: only these of its measurements, comma-separated "
                             f"among {', '.join(KINDS)}")
    parser.add_argument("--from-raw", action="store_true",
                        help="measure nothing: take the simulations' raw results kept under "
                             "build/bench/ by the last run of the same options")
    parser.add_argument("--awake", action="store_true",
                        help="the N hard-IP models never sleep while idle (slower)")
    args = parser.parse_args(argv)
    try:
        nodes = [int(x) for x in args.nodes.split(",") if x]
    except ValueError:
        parser.error(f"--nodes takes 8 and/or 16, not {args.nodes!r}")
    if not nodes or any(n not in TOPOLOGY for n in nodes):
        parser.error(f"--nodes takes 8 and/or 16, not {args.nodes!r}")
    results_mod = bench_results
    report = bench_collectives_doc
    tb_module("test_collectives", HERE)     # before the threads: they share it
    if not args.doc_only:
        start = results_mod.started()
        given = argv if argv is not None else sys.argv[1:]
        command = shlex.join(["python", "tb/collectives/bench_collectives.py",      # as measured
                              *[a for a in given if a != "--from-raw"]])
        progress = Path(tempfile.gettempdir()) / f"peach2-coll-progress-{start['time']:.0f}"
        got, errors = [], []
        kinds = args.kinds.split(",") if args.kinds else list(KINDS)
        if any(k not in KINDS for k in kinds) or (args.kinds and not args.part):
            parser.error(f"--kinds takes {', '.join(KINDS)}, with --part")
        todo = [(n, part, {k: v for k, v in params.items()
                           if not any(k.startswith(x) for x in KINDS) or
                           any(k.startswith(x) for x in kinds)} | {"awake": args.awake})
                for n in nodes for part, params in jobs(n, args.quick)
                if args.part in (None, part)]

        def job(n, part, params):
            try:
                got.append(measure(n, part, params, f"{progress}-{n}-{part}"))
            except BaseException as exc:   # reported below, after the others finish
                errors.append((n, exc))
        if args.from_raw:
            got = [json.loads(raw_path(n, part).read_text()) for n, part, _ in todo]
        else:
            run_jobs(todo, job, progress)
        if errors:
            raise errors[0][1]
        shortened = [QUICK_NOTE] if args.quick else []
        saved = results_mod.load("collectives") or {}     # now: another run may have saved
        info = results_mod.run_info(command, start, shortened, args.conditions)
        if args.part is None:
            saved.update(merge(got))
            saved["run"] = info
            saved["parts"] = {}
        else:       # replace the rows this part measured, keep the rest and say whose they are
            saved.setdefault("run", info)
            for n, res in merge(got).items():
                old = saved.setdefault(n, res)
                for kind, rows in res.items():
                    if isinstance(rows, list) and rows:
                        old[kind] = rows
                        saved.setdefault("parts", {})[f"{n} nodes, {kind}"] = info
                old["complete"] = old.get("complete", False) and res.get("complete", False)
        results_mod.save("collectives", saved)
        print(report.summary(saved), flush=True)
    bench_doc.rebuild()
    return 0


if __name__ == "__main__":
    sys.exit(main())
