"""What the MPI collective tests share (no simulator): recording the collective sends and
running one Broadcast on the MPI model with every rank's buffer random around the window."""

import random

from peach2.sim.mpi import COLL, P2P, preset
from peach2.sim.mpi.rank import Rank


def record_isends(monkeypatch, entry):
    """Wrap ``Rank.isend`` so that every collective send appends ``entry(rank, buf, dest,
    count, offset)`` to the returned list, in the order started (``send`` is ``isend`` +
    ``wait``, so every message is seen)."""
    log = []
    isend = Rank.isend

    def recording(self, buf, dest, tag, count=None, offset=0, *, context=P2P):
        if context is COLL:
            log.append(entry(self, buf, dest, count, offset))
        return isend(self, buf, dest, tag, count, offset, context=context)
    monkeypatch.setattr(Rank, "isend", recording)
    return log


def bcast_on_model(fn, p, count, root, *, configuration, where, offset, tail, key, **kw):
    """Run ``fn(rank, buf, count, root, offset, **kw)`` on a world of ``p`` ranks of the MPI
    ``configuration``, each rank's buffer (in memory ``where``) random bytes from ``key``;
    return every buffer after the run, what each must hold, and every rank's end time."""
    world = preset(configuration).world(p)
    rng = random.Random(repr(key))
    bufs, before = [], []
    for rank in world.ranks:
        data = rng.randbytes(offset + count + tail)
        buf = rank.alloc(len(data), where)
        buf.write(data)
        bufs.append(buf)
        before.append(data)
    window = before[root][offset:offset + count]
    want = [b[:offset] + window + b[offset + count:] for b in before]

    def program(rank):
        yield from fn(rank, bufs[rank.rank], count, root, offset, **kw)
        return rank.now

    times = world.run(program)
    return [b.read() for b in bufs], want, times
