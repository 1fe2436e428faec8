"""Run the machine: in this process, or as this rank of an ``mpiexec`` (one per sub-cluster).

::

    python -m peach2.sim.system.launch --shape 2x2 --subclusters 2 --out one.json
    mpiexec --allow-run-as-root --oversubscribe -n 2 \\
        python -m peach2.sim.system.launch --shape 2x2 --subclusters 2 --out two.json

Each process builds (or takes from the cache) the Verilator model of its HDL top and runs the
cocotb test :func:`peach2.sim.system.cosim.machine_all_to_all` in a simulator subprocess, which
inherits the MPI environment and joins the job (Open MPI survives that; this process never
initialises MPI itself).  Build the rank's top once first (:func:`prebuild`, or
``--build-only``), so the ranks do not wait for one another's compiler.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from peach2.sim.machine.launch import launcher_rank, launcher_size, mpiexec_command, under_mpiexec
from peach2.sim.run import ROOT, SIM_BUILD, emit_verilog, run_cocotb

from .plan import MachinePlan

__all__ = ["run", "prebuild", "ranks_command", "main"]

MODULE = "peach2.sim.system.launch"


def copies_per_rank(subclusters, ranks):
    """Sub-clusters each of ``ranks`` ranks simulates (the machine places them in blocks);
    refuses a count that does not divide evenly, naming both."""
    if ranks < 1 or subclusters % ranks:
        raise SystemExit(f"{subclusters} sub-clusters cannot be shared evenly by {ranks} MPI "
                         f"ranks: start a number of ranks that divides {subclusters}")
    return subclusters // ranks


def _name(plan, mpi):
    where = f"rank{launcher_rank()}" if mpi else "one"
    return f"machine-{plan.shape}x{plan.subclusters}-{where}"


def prebuild(plan, copies):
    """Build (or find in the cache) the Verilator model of ``copies`` sub-clusters of ``plan``
    without running it; return its folder."""
    from peach2.sim.run import verilator
    top = plan.top(copies)
    build_dir = SIM_BUILD / f"machine-{plan.shape}-build{copies}"
    build_dir.mkdir(parents=True, exist_ok=True)
    sources = [emit_verilog(top, "cluster", build_dir / "cluster-vl.v", simulator="verilator")]
    sources += top.extra_sources(build_dir, "verilator")
    return verilator.build(sources=sources, toplevel=top.sim_toplevel,
                           build_args=list(top.verilator_args), waves=False,
                           root=SIM_BUILD / "_verilator")


def run(shape, subclusters, *, mpi=False, seed=1, out=None, hca_dma="endpoint", **params):
    """Run the machine's traffic (this process: every sub-cluster; ``mpi``: this rank's);
    return the result rank 0 wrote (``None`` on other ranks).

    ``hca_dma``: ``"endpoint"``, every HCA is a PCIe endpoint of its node's cocotb root
    complex (:mod:`.endpoint_dma`); ``"node"``, its DMA takes the node model's time and touches
    the cocotb bytes directly (the machine before the endpoint)."""
    if hca_dma not in ("endpoint", "node"):
        raise ValueError(f"hca_dma must be 'endpoint' or 'node', not {hca_dma!r}")
    plan = MachinePlan(shape, subclusters)
    copies = copies_per_rank(subclusters, launcher_size()) if mpi else subclusters
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(out) if out else Path(tmp) / "machine.json"
        params = {"shape": shape, "subclusters": subclusters, "mpi": mpi,
                  "out": str(out.resolve()), "hca_endpoint": hca_dma == "endpoint", **params}
        run_cocotb(component=plan.top(copies), toplevel="cluster",
                   test_module="peach2.sim.system.cosim", name=_name(plan, mpi),
                   test_dir=ROOT, params=params, seed=seed, simulator="verilator")
        if out.exists():
            return json.loads(out.read_text())
    return None


def ranks_command(ranks, args):
    """The ``mpiexec`` argv that runs this module on ``ranks`` ranks with ``args``."""
    return mpiexec_command(ranks, MODULE, args)


def main(argv=None):
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="2x2", help="one sub-cluster's topology (2x2, 2x8, ...)")
    ap.add_argument("--subclusters", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSON result (written by rank 0)")
    ap.add_argument("--mpi-size", type=int, default=2048, help="largest MPI message, bytes")
    ap.add_argument("--tca-size", type=int, default=512, help="largest TCA transfer, bytes")
    ap.add_argument("--stores", type=int, default=1, help="PIO stores per node pair")
    ap.add_argument("--idle-windows", type=int, default=0,
                    help="windows to step with no traffic before it starts (speed when idle)")
    ap.add_argument("--hca-dma", choices=("endpoint", "node"), default="endpoint",
                    help="the HCA's DMA: TLPs of a PCIe endpoint, or the node model's timing")
    ap.add_argument("--build-only", action="store_true", help="build the model and stop")
    args = ap.parse_args(argv)
    for name in ("subclusters", "mpi_size", "tca_size", "stores"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.idle_windows < 0:
        ap.error("--idle-windows must not be negative")
    plan = MachinePlan(args.shape, args.subclusters)
    mpi = under_mpiexec()
    if args.build_only:
        print(prebuild(plan, copies_per_rank(args.subclusters, launcher_size()) if mpi
                       else args.subclusters))
        return 0
    result = run(args.shape, args.subclusters, mpi=mpi, seed=args.seed, out=args.out,
                 mpi_size=args.mpi_size, tca_size=args.tca_size, stores=args.stores,
                 idle_windows=args.idle_windows, hca_dma=args.hca_dma)
    if result is not None:
        print(f"{result['transport']}: end {result['end_ps']} ps, {result['windows']} windows, "
              f"{result['bytes_checked']} bytes checked, {result['cycles_per_s']:.0f} cycles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
