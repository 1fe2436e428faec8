"""Reproducible traffic for the machine's equality tests and benchmark, and what to compare.

A send is ``(t_ps, src, dst, nbytes, k)``: the ``k``-th message of port ``src``, whose bytes
are a function of ``(src, k, nbytes)`` alone (:func:`payload`), so every rank and every run
builds the same messages without shipping them.  A delivery record is
``[t_deliver_ps, src, seq, dst, nbytes, sha256 of the delivered bytes, packet drain times]``;
records are sorted by ``(t_deliver_ps, src, seq)``, the fabric's delivery order, and checked
against the bytes that were sent.
"""

import hashlib
import random

from peach2.sim.infiniband import Fabric

__all__ = ["payload", "random_sends", "alltoall_sends", "install", "record", "run_fabric"]


def payload(src, k, nbytes):
    """Return the bytes of message ``k`` of port ``src``: ``nbytes`` seeded pseudo-random bytes."""
    return random.Random(src * 1_000_003 + k).randbytes(nbytes)


def random_sends(n_ports, count, seed, span_ps, sizes=(0, 8, 64, 300, 2048, 4096, 9000),
                 grid_ps=1):
    """Return ``count`` sends between random distinct ports at random times in ``[0, span)``.

    Times are multiples of ``grid_ps``: a coarse grid makes many sends, and so many arrivals
    and deliveries, fall on the same picosecond.
    """
    rng = random.Random(seed)
    sends = []
    for _ in range(count):
        src = rng.randrange(n_ports)
        dst = rng.randrange(n_ports - 1)
        dst += dst >= src
        t = rng.randrange(span_ps) // grid_ps * grid_ps
        sends.append([t, src, dst, rng.choice(sizes)])
    sends.sort()
    return _numbered(sends)


def alltoall_sends(n_ports, nbytes, rounds=1, gap_ps=0, start_ps=0):
    """Return an all-to-all: in step ``j`` (at ``start + j * gap``) port ``s`` sends to ``s + j``.

    ``rounds`` repeats the ``n_ports - 1`` steps; with ``gap_ps`` 0 every message is handed
    over at ``start_ps`` and the HCAs' transmit FIFOs and the switch do the pacing.
    """
    sends = []
    steps = n_ports - 1
    for r in range(rounds):
        for j in range(1, n_ports):
            t = start_ps + (r * steps + j - 1) * gap_ps
            for src in range(n_ports):
                sends.append([t, src, (src + j) % n_ports, nbytes])
    return _numbered(sends)


def _numbered(sends):
    counts = {}
    out = []
    for t, src, dst, nbytes in sends:
        k = counts.get(src, 0)
        counts[src] = k + 1
        out.append((t, src, dst, nbytes, k))
    return out


def install(machine, sends, with_payload=True):
    """Hand every send whose source port is on this rank to its partition; return how many."""
    done = 0
    for t, src, dst, nbytes, k in sends:
        index = machine.partition_of(src)
        if machine.is_local(index):
            data = payload(src, k, nbytes) if with_payload else None
            machine.partition(index).send(t, src, dst, nbytes, data, tag=k)
            done += 1
    return done


def _records(messages, with_payload):
    out = []
    for m in messages:
        digest = None
        if with_payload:
            data = bytes(m.payload)
            if data != payload(m.src, m.tag, m.nbytes):
                raise AssertionError(f"message {m.src}->{m.dst} #{m.tag} arrived with other "
                                     f"bytes than were sent")
            digest = hashlib.sha256(data).hexdigest()
        out.append([m.t_deliver_ps, m.src, m.seq, m.dst, m.nbytes, digest, list(m.packet_times)])
    out.sort(key=lambda r: (r[0], r[1], r[2]))
    return out


def record(machine, with_payload=True):
    """Return every partition's deliveries (collective), sorted, bytes checked against the sends.

    Call it once, after the run: it takes the partitions' polled deliveries.
    """
    parts = machine.gather(lambda p: _records(p.delivered(), with_payload))
    out = [r for part in parts for r in part]
    out.sort(key=lambda r: (r[0], r[1], r[2]))
    return out


def run_fabric(n_ports, sends, params=None, with_payload=True):
    """Run ``sends`` on one unpartitioned :class:`Fabric`; return its delivery records."""
    fabric = Fabric(n_ports, params)
    for t, src, dst, nbytes, k in sends:
        fabric.send(t, src, dst, nbytes, payload(src, k, nbytes) if with_payload else None,
                    tag=k)
    fabric.run()
    return _records(fabric.delivered(), with_payload)
