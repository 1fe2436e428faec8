"""The tuned network: which network (and options) a collective takes, per machine and size,
chosen from measurements as MPI libraries choose their algorithms.

MVAPICH2 picks a broadcast from a table of size ranges per process count
(:mod:`peach2.sim.mpi.collective.tuning`), written from runs on the machine it tunes for.  The
hybrid has more to choose: MPI alone, the hybrid with its MPI steps sent from GPU0 or staged
through host memory, and, for the Allgather, the TCA part by recursive doubling or along the
rings (:data:`~peach2.sim.hybrid.algorithms.OPTIONS`).  :func:`build_table` makes a table from
measured times: for every machine (collective, nodes, TCA groups) the fastest choice at every measured size,
and ranges that switch half-way (in log scale) between two measured sizes whose choices
differ.  :func:`choose` reads it; the network ``tuned`` of the launcher and the sweeps is the
choice :func:`choose` makes from :func:`load_table`, the tables of the saved tuning sweeps
(``docs/results/tuning.json``, ``python -m peach2.sim.hybrid.sweep --tune``: each
machine's table is built from its training sizes and checked at sizes between them).

A machine the table has no row for takes the row of the same collective and group count with
the nearest node count (MVAPICH2 takes the next larger process count, else the last row); a
collective or group count it has never seen raises ``KeyError`` naming what it has.
"""

import json
import math
from pathlib import Path

from ..algorithms import parse_network

__all__ = ["CHOICES", "build_table", "choose", "fastest_times", "load_table", "TABLE_FILE",
           "table_rows"]

#: What the table chooses among, per collective (options a machine cannot take, and ``hops``
#: that leave the groups as they are, are skipped: :func:`~.sweep.choices`).
CHOICES = {"broadcast": ("mpi", "hybrid", "hybrid+staged", "hybrid+hops1", "hybrid+hops2",
                         "hybrid+hops1+staged", "hybrid+hops2+staged"),
           "allgather": ("mpi", "hybrid", "hybrid+staged", "hybrid+ring", "hybrid+ring+staged",
                         "hybrid+hops1", "hybrid+hops2", "hybrid+hops1+staged",
                         "hybrid+hops2+staged")}

#: The saved measurements the default table is built from.
TABLE_FILE = Path(__file__).resolve().parents[3] / "docs" / "results" / "tuning.json"


def _key(collective, nodes, groups):
    return f"{collective}:{nodes}:{groups}"


def build_table(times):
    """``times``: ``[{"collective", "nodes", "groups", "network", "size", "time_ns"}]``
    (every choice measured at the same sizes; a choice missing at a size is not a candidate
    there, nor one cut short, with ``over_ns`` in place of ``time_ns``: slower than the
    fastest there, :func:`~.sweep.tuning_sweep`).  Returns
    ``{"collective:nodes:groups": [[max_bytes, network], ..., [-1, network]]}``: sizes up to
    ``max_bytes`` take ``network``, the last range every larger size."""
    by = {}
    for t in times:
        parse_network(t["network"], t["collective"])
        if "time_ns" not in t:
            continue
        by.setdefault(_key(t["collective"], t["nodes"], t["groups"]), {}) \
            .setdefault(t["size"], {})[t["network"]] = t["time_ns"]
    table = {}
    for key, sizes in by.items():
        best = [(s, min(sizes[s], key=lambda n: (sizes[s][n], n))) for s in sorted(sizes)]
        ranges = []
        for (s, net), (s_next, net_next) in zip(best, best[1:]):
            if net != net_next:
                ranges.append([math.isqrt(s * s_next), net])   # half-way in log scale
        ranges.append([-1, best[-1][1]])
        table[key] = ranges
    return table


def fastest_times(times, skip=()):
    """``{size: ns}``: the fastest measured time (``time_ns``; a run cut short, with
    ``over_ns``, is not a time) per size in ``times``, of networks not in ``skip``."""
    best = {}
    for t in times:
        if "time_ns" in t and t["network"] not in skip:
            best[t["size"]] = min(best.get(t["size"], t["time_ns"]), t["time_ns"])
    return best


def choose(table, collective, nodes, groups, size):
    """The network ``table`` gives ``collective`` of ``size`` bytes (the Broadcast's bytes,
    the Allgather's block) on ``nodes`` nodes in ``groups`` TCA groups."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive number of bytes, not {size!r}")
    key = _key(collective, nodes, groups)
    if key not in table:
        near = [k for k in table if k.split(":")[0] == collective
                and k.split(":")[2] == str(groups)]
        if not near:
            raise KeyError(f"the tuning table has no {collective} on {groups} groups; it has "
                           f"{sorted(table)}")
        key = min(near, key=lambda k: (abs(int(k.split(":")[1]) - nodes),
                                       -int(k.split(":")[1])))
    for most, network in table[key]:
        if most == -1 or size <= most:
            return network
    return table[key][-1][1]


def load_table(path=TABLE_FILE):
    """The tables of the saved tuning sweeps at ``path`` (``{"machines": [{"table": ...}]}``,
    :func:`~.sweep.tuning_sweep`), merged; ``FileNotFoundError`` saying how to
    make them."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no tuning table at {path}: measure one with python -m "
                                f"peach2.sim.hybrid.sweep --tune ...")
    table = {}
    for machine in json.loads(path.read_text())["machines"]:
        table.update(machine["table"])
    return table


def table_rows(table):
    """Markdown lines of ``table``: one row per machine and range."""
    lines = ["| collective | nodes | groups | bytes up to | network |",
             "| --- | ---: | ---: | ---: | --- |"]
    for key in sorted(table, key=lambda k: (k.split(":")[0], int(k.split(":")[1]),
                                           int(k.split(":")[2]))):
        collective, nodes, groups = key.split(":")
        for most, network in table[key]:
            lines.append(f"| {collective} | {nodes} | {groups} | "
                         f"{'larger' if most == -1 else most} | `{network}` |")
    return lines
