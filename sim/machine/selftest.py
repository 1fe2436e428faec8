"""Run reproducible traffic on the machine and write every delivery to a JSON file.

::

    python -m peach2.sim.machine.selftest --partitions 4 --ports 4 --out one.json
    mpiexec --allow-run-as-root --oversubscribe -n 2 \\
        python -m peach2.sim.machine.selftest --partitions 4 --ports 4 --out two.json

The two files' ``deliveries`` must be equal: the same messages, the same bytes (SHA-256 of
each payload, checked against what was sent), delivered at the same picoseconds, packet by
packet.  Under ``mpiexec`` the machine runs on :class:`MpiTransport` (one or more partitions
per rank) and rank 0 writes the file; otherwise on :class:`LocalTransport`.
"""

import argparse
import json
import sys

from .launch import under_mpiexec
from .local_transport import LocalTransport
from .machine import Machine
from .traffic import alltoall_sends, install, random_sends, record

__all__ = ["run", "main"]

DEFAULTS = {"partitions": 2, "ports": 4, "pattern": "random", "count": 200, "nbytes": 4096,
            "seed": 1, "span_ps": 20_000_000, "grid_ps": 1, "window_ps": None}


def sends_for(config):
    """Return the sends ``config`` describes (see :data:`DEFAULTS` for its keys)."""
    n_ports = config["partitions"] * config["ports"]
    if config["pattern"] == "random":
        return random_sends(n_ports, config["count"], config["seed"], config["span_ps"],
                            grid_ps=config["grid_ps"])
    if config["pattern"] == "alltoall":
        return alltoall_sends(n_ports, config["nbytes"])
    raise ValueError(f"unknown traffic pattern {config['pattern']!r} (random, alltoall)")


def run(config=None, transport=None):
    """Build the machine ``config`` describes, run its traffic to the end, return the results.

    Collective under MPI: every rank returns the same ``deliveries``; ``stats`` is this
    rank's.
    """
    config = {**DEFAULTS, **(config or {})}
    machine = Machine(config["partitions"], config["ports"], transport=transport,
                      window_ps=config["window_ps"])
    sends = sends_for(config)
    install(machine, sends)
    end_ps = machine.run()
    deliveries = record(machine)
    if len(deliveries) != len(sends):
        raise AssertionError(f"{len(sends)} messages sent, {len(deliveries)} delivered")
    return {"config": config, "transport": machine.transport.describe(),
            "ranks": machine.transport.size, "end_ps": end_ps,
            "window_ps": machine.window_ps, "lookahead_ps": machine.lookahead_ps,
            "deliveries": deliveries, "stats": machine.stats.as_dict()}


def _transport(name):
    if name == "local" or (name == "auto" and not under_mpiexec()):
        return LocalTransport()
    from .mpi_transport import MpiTransport
    return MpiTransport()


def main(argv=None):
    """Command line: see the module's docstring and ``--help``."""
    parser = argparse.ArgumentParser(prog="python -m peach2.sim.machine.selftest",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=DEFAULTS["partitions"])
    parser.add_argument("--ports", type=int, default=DEFAULTS["ports"],
                        help="ports per partition")
    parser.add_argument("--pattern", choices=("random", "alltoall"), default="random")
    parser.add_argument("--count", type=int, default=DEFAULTS["count"],
                        help="messages of the random pattern")
    parser.add_argument("--nbytes", type=int, default=DEFAULTS["nbytes"],
                        help="message size of the all-to-all")
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    parser.add_argument("--span-ps", type=int, default=DEFAULTS["span_ps"],
                        help="send times of the random pattern fall in [0, span)")
    parser.add_argument("--grid-ps", type=int, default=1,
                        help="send times are multiples of this (coarse: many ties)")
    parser.add_argument("--window-ps", type=int, default=None,
                        help="window length (default: the lookahead)")
    parser.add_argument("--transport", choices=("auto", "local", "mpi"), default="auto")
    parser.add_argument("--out", required=True, help="JSON file rank 0 writes")
    args = parser.parse_args(argv)
    config = {"partitions": args.partitions, "ports": args.ports, "pattern": args.pattern,
              "count": args.count, "nbytes": args.nbytes, "seed": args.seed,
              "span_ps": args.span_ps, "grid_ps": args.grid_ps, "window_ps": args.window_ps}
    transport = _transport(args.transport)
    result = run(config, transport)
    stats = transport.allgather(result.pop("stats"))
    if transport.rank == 0:
        result["stats"] = stats
        with open(args.out, "w") as f:
            json.dump(result, f)
        print(f"{len(result['deliveries'])} deliveries, end {result['end_ps']} ps, "
              f"{result['transport']}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
