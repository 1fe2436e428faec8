"""Run hybrid collectives on the machine, in this process or as this rank of an ``mpiexec``.

::

    python -m peach2.sim.hybrid.launch --shape 2x2 --subclusters 2 \\
        --run broadcast:hybrid:8,4096 --run allgather:mpi:16 --out runs.json
    mpiexec --allow-run-as-root --oversubscribe -n 2 python -m peach2.sim.hybrid.launch ...

Each ``--run COLLECTIVE:NETWORK:SIZES`` runs one collective (``broadcast``: SIZES are the bytes
broadcast; ``allgather``: the block per node; ``halo``: ``DIMS/GRID`` items such as
``64x64x128/2x4`` or ``small/2x4``, an ``Ni x Nj x Nk`` float array over a ``Pi x Pj`` grid,
``/8`` after them for 8-byte elements) over one network (``tca``, ``mpi``, ``hybrid``, with
options such as ``hybrid+ring+staged``: :func:`~.algorithms.parse_network`; or ``tuned``, the
network :mod:`.tuning`'s table picks per size) at every size, one after the other on one
machine, every byte checked.  A halo's TCA groups follow its
grid (:func:`~.halo.halo_groups`), whatever ``--per-subcluster`` says.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from peach2.sim.machine.launch import launcher_rank, launcher_size, under_mpiexec
from peach2.sim.run import ROOT, run_cocotb
from peach2.sim.system import MachinePlan
from peach2.sim.system.launch import copies_per_rank

from .algorithms import parse_network, probe
from .groups import Groups
from .halo import ELEM, SIZES, halo_grid, halo_groups
from .tuning import choose, load_table

__all__ = ["run", "parse_run", "parse_halo", "buffer_bytes", "gpu_window", "main"]

MODULE = "peach2.sim.hybrid.launch"
COLLECTIVES = ("broadcast", "allgather", "halo")


def buffer_bytes(collective, nodes, size):
    """Bytes of each node's buffer a Broadcast of ``size`` bytes or an Allgather of
    ``size``-byte blocks on ``nodes`` nodes needs."""
    return size * (nodes if collective == "allgather" else 1)


def gpu_window(collective, nodes, largest):
    """The GPU window a sweep gives its machine: the largest buffer and 4 KiB, rounded up to a
    power of two, at least 1 MiB."""
    need = buffer_bytes(collective, nodes, largest) + 4096
    return max(1 << 20, 1 << (need - 1).bit_length())


def parse_halo(text):
    """``"64x64x128/2x4"``, ``"small/2x4"`` or ``"small/2x4/8"`` -> ``{"dims", "grid",
    "elem"}``; ``ValueError`` saying what is wrong."""
    parts = text.split("/")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        dims = SIZES.get(parts[0].lower()) or tuple(int(v) for v in parts[0].split("x"))
        grid = tuple(int(v) for v in parts[1].split("x"))
        elem = int(parts[2]) if len(parts) == 3 else ELEM
        if len(dims) != 3 or len(grid) != 2:
            raise ValueError
    except ValueError:
        raise ValueError(f"a halo size is NIxNJxNK/PIxPJ[/ELEM] (or small/PIxPJ, "
                         f"middle/PIxPJ), not {text!r}") from None
    size = {"dims": list(dims), "grid": list(grid), "elem": elem}
    halo_grid(size)                     # refuses sizes that do not divide
    return size


def parse_run(text):
    """``"broadcast:hybrid:8,4096"`` -> ``{"collective", "network", "sizes"}``; ``ValueError``
    saying what is wrong."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"a run is COLLECTIVE:NETWORK:SIZES, not {text!r}")
    collective, network, sizes = parts
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {COLLECTIVES}, not {collective!r}")
    if network != "tuned" or collective == "halo":
        parse_network(network, collective)
    if collective == "halo":
        return {"collective": collective, "network": network,
                "sizes": [parse_halo(s) for s in sizes.split(",")]}
    try:
        values = [int(s) for s in sizes.split(",")]
    except ValueError:
        raise ValueError(f"sizes must be integers separated by commas, not {sizes!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"sizes must be at least 1 byte, not {sizes!r}")
    return {"collective": collective, "network": network, "sizes": values}


def run(shape, subclusters, runs, *, per_subcluster=1, mpi=False, seed=1, out=None,
        preset="MV2GDR-QPI-Tuned", gpu_size=1 << 20, window_cycles=28, gpu_read=None,
        tuning_table=None, name=None):
    """Run ``runs`` (dicts as :func:`parse_run` makes them, each with ``"limits_ns"`` if its
    runs are to be cut short: :mod:`.hybrid_tb`) on the machine; return the figures rank 0
    wrote (``None`` on other ranks): ``"runs"`` (a cut run's has ``"cut"`` and ``"over_ns"``,
    no time) and ``"stopped"`` (the runs after a cut one, not run).  ``gpu_read``: bytes/s of PEACH2's GPU reads
    (default the GPU model's, 002's 870 MB/s); ``tuning_table``: what network ``tuned`` reads
    (default the saved table, :mod:`.tuning`); ``name``: the build folder's name under
    ``build/sim/`` (default ``hybrid-<shape>x<subclusters>-<rank>``: runs of one name take
    turns)."""
    plan = MachinePlan(shape, subclusters)
    groups = Groups(plan, per_subcluster)
    if any(r["network"] == "tuned" for r in runs) and tuning_table is None:
        tuning_table = load_table()
    for r in runs:
        limits = r.get("limits_ns")
        if limits is not None and (len(limits) != len(r["sizes"]) or any(
                x is not None and not x > 0 for x in limits)):
            raise ValueError(f"limits_ns: None or a positive time per size of {r['sizes']}, "
                             f"not {limits}")
        if r["collective"] == "halo":
            for size in r["sizes"]:
                grid = halo_grid(size)
                halo_groups(plan, grid, r["network"])
                need = grid.local_bytes + 4 * grid.ni * grid.nk * grid.elem
                if need + 64 > gpu_size:
                    raise ValueError(f"halo {size['dims']} over {size['grid']} needs {need} "
                                     f"bytes of GPU window; gpu_size is {gpu_size}")
            continue
        networks = [r["network"]] if r["network"] != "tuned" else \
            {choose(tuning_table, r["collective"], plan.n_nodes, groups.count, size)
             for size in r["sizes"]}
        for network in networks:                # refuses what the run would refuse
            probe(groups, r["collective"], network)
        need = buffer_bytes(r["collective"], plan.n_nodes, max(r["sizes"]))
        if need + 64 > gpu_size:
            raise ValueError(f"{r['collective']} of {max(r['sizes'])} B needs {need} bytes of "
                             f"GPU window; gpu_size is {gpu_size}")
    copies = copies_per_rank(subclusters, launcher_size()) if mpi else subclusters
    where = f"rank{launcher_rank()}" if mpi else "one"
    name = name or f"hybrid-{shape.replace(':', '')}x{subclusters}-{where}"  # no ':' for make
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(out) if out else Path(tmp) / "hybrid.json"
        params = {"shape": shape, "subclusters": subclusters, "per_subcluster": per_subcluster,
                  "mpi": mpi, "runs": runs, "out": str(out.resolve()), "preset": preset,
                  "gpu_size": gpu_size, "window_cycles": window_cycles, "gpu_read": gpu_read,
                  "tuning_table": tuning_table}
        run_cocotb(component=plan.top(copies), toplevel="cluster",
                   test_module="peach2.sim.hybrid.hybrid_tb", name=name, test_dir=ROOT,
                   params=params, seed=seed, simulator="verilator")
        if out.exists() and not (mpi and launcher_rank()):     # rank 0 reports, once
            return json.loads(out.read_text())
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="2x2", help="one sub-cluster's topology (2x2, 2x8, ...)")
    ap.add_argument("--subclusters", type=int, default=2)
    ap.add_argument("--per-subcluster", type=int, default=1,
                    help="TCA groups per sub-cluster (2: 000 Figure 11's virtual split)")
    ap.add_argument("--run", action="append", required=True, metavar="COLL:NET:SIZES",
                    help="e.g. broadcast:hybrid:8,4096 (repeatable)")
    ap.add_argument("--window-cycles", type=int, default=28,
                    help="the machine's window in clock cycles (1..28; bounds how late a TCA "
                         "phase after an MPI phase starts)")
    ap.add_argument("--preset", default="MV2GDR-QPI-Tuned", help="the MPI configuration")
    ap.add_argument("--gpu-size", type=int, default=1 << 20, help="bytes of each GPU window")
    ap.add_argument("--gpu-read", type=float, metavar="BYTES_PER_S",
                    help="PEACH2's GPU read rate (default the GPU model's, 002's 870 MB/s; "
                         "2.8e9 is HA-PACS/TCA's, which the sweeps use)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSON result (written by rank 0)")
    args = ap.parse_args(argv)
    if args.out:
        folder = Path(args.out).resolve().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            ap.error(f"--out: cannot write into {folder}")
    if args.gpu_read is not None and not 1e6 <= args.gpu_read <= 1e11:
        ap.error(f"--gpu-read: bytes per second, 1e6..1e11, not {args.gpu_read:g}")
    if not 1 <= args.window_cycles <= 28:
        ap.error("--window-cycles must be 1..28 (28 cycles = 112 ns, the switch's lookahead)")
    try:
        from peach2.sim.mpi import preset
        preset(args.preset)
        runs = [parse_run(r) for r in args.run]
        Groups(MachinePlan(args.shape, args.subclusters), args.per_subcluster)
    except ValueError as e:
        ap.error(str(e))
    result = run(args.shape, args.subclusters, runs, per_subcluster=args.per_subcluster,
                 mpi=under_mpiexec(), seed=args.seed, out=args.out, preset=args.preset,
                 gpu_size=args.gpu_size, window_cycles=args.window_cycles,
                 gpu_read=args.gpu_read)
    if result is not None:
        for r in result["runs"]:
            size = r["size"] if r["name"] != "halo" else \
                "x".join(map(str, r["size"]["dims"])) + "/" + "x".join(map(str, r["size"]["grid"]))
            took = (f"{r['time_ns']:10.0f} ns" if not r.get("cut")
                    else f"over {r['over_ns']:.0f} ns (cut short)")
            print(f"{r['name']:9} {r['network']:6} {size:>16}  {took}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
