"""Times of the collectives on the model, and the table ``python -m peach2.sim.mpi.collective``
prints (docs/mpi.md, "Collectives").

A time is measured on a fresh world: every rank starts at 0 and the collective's time is when
the last rank returns from it.  Every byte is checked against what the collective must leave
(``AssertionError`` otherwise).  The model is deterministic, so one run gives the time.
"""

import random

from ..preset import preset
from .algorithms import allgather, bcast

__all__ = ["one_hop", "collective_time", "table", "print_table", "OPS", "RANKS", "SIZES"]

OPS = ("bcast", "allgather")
RANKS = (8, 16)
SIZES = (8, 64 << 10, 1 << 20)
US = 1_000_000                                      # ps per us


def _world(config, p, where):
    cfg = preset(config)
    return cfg.world(p), where or cfg.where


def one_hop(config="MV2GDR", nbytes=8, where=None):
    """Time (ps) from the start to the return of ``recv`` of one ``nbytes`` message from rank
    0 to rank 1, both starting at 0: the one-hop latency a tree of such hops adds up."""
    world, where = _world(config, 2, where)
    a, b = world.ranks[0].alloc(nbytes, where), world.ranks[1].alloc(nbytes, where)
    data = random.Random(nbytes).randbytes(nbytes)
    a.write(data)

    def program(rank):
        if rank.rank == 0:
            yield rank.send(a, 1, 0)
        else:
            yield rank.recv(b, 0, 0)
        return rank.now

    elapsed = world.run(program)[1]
    assert b.read() == data, f"{config} one hop of {nbytes} B: bytes differ"
    return elapsed


def collective_time(op, p, nbytes, config="MV2GDR", where=None, root=0):
    """Time (ps) of one ``op`` (``"bcast"`` of ``nbytes``, or ``"allgather"`` of ``nbytes``
    per rank) on ``p`` ranks of preset ``config``, buffers in ``where`` (default the
    preset's GPU); the time the last rank returns, all starting at 0."""
    world, where = _world(config, p, where)
    rng = random.Random(f"{op} {p} {nbytes}")
    if op == "bcast":
        expect = rng.randbytes(nbytes)
        bufs = [rank.alloc(nbytes, where) for rank in world.ranks]
        bufs[root].write(expect)
    elif op == "allgather":
        blocks = [rng.randbytes(nbytes) for _ in range(p)]
        bufs = [rank.alloc(p * nbytes, where) for rank in world.ranks]
        for r, buf in enumerate(bufs):
            buf.write(blocks[r], r * nbytes)
        expect = b"".join(blocks)
    else:
        raise ValueError(f"op must be one of {OPS}, not {op!r}")

    def program(rank):
        if op == "bcast":
            yield from bcast(rank, bufs[rank.rank], nbytes, root)
        else:
            yield from allgather(rank, bufs[rank.rank], nbytes)
        return rank.now

    elapsed = max(world.run(program))
    assert all(buf.read() == expect for buf in bufs), f"{op} p={p} {nbytes} B: bytes differ"
    return elapsed


def table(config="MV2GDR", where=None, ops=OPS, ranks=RANKS, sizes=SIZES):
    """``{"one_hop_us": ..., "rows": [{op, size, us: {p: time}}]}`` for ``print_table``."""
    rows = [{"op": op, "size": n,
             "us": {p: collective_time(op, p, n, config, where) / US for p in ranks}}
            for op in ops for n in sizes]
    return {"config": config, "where": where or preset(config).where,
            "one_hop_us": one_hop(config, 8, where) / US, "ranks": list(ranks), "rows": rows}


def print_table(result, out=None):
    """Print ``table()``'s result as the Markdown table of docs/mpi.md."""
    ranks = result["ranks"]
    print(f"{result['config']}, buffers in {result['where']}; one 8 B hop (send to recv "
          f"return) {result['one_hop_us']:.2f} us", file=out)
    print("", file=out)
    print("| collective | size | " + " | ".join(f"{p} ranks" for p in ranks) + " |", file=out)
    print("| --- | ---: | " + " | ".join("---:" for _ in ranks) + " |", file=out)
    for row in result["rows"]:
        size = row["size"]
        label = next((f"{size // s} {u}" for s, u in ((1 << 20, "MiB"), (1 << 10, "KiB"))
                      if size >= s), f"{size} B")
        if row["op"] == "allgather":
            label += " per rank"
        cells = " | ".join(f"{row['us'][p]:.1f} us" for p in ranks)
        print(f"| {row['op']} | {label} | {cells} |", file=out)
