"""Broadcast, Allgather and point-to-point puts over PEACH2 DMA, as a user writes them.

Written over the driver model only (:mod:`peach2.sim.collectives.plan`): each node runs chained
DMAs that end in completion writes, and waits for the completion writes other nodes make into
its own memory.  Buffers are symmetric places (:class:`~peach2.sim.collectives.memory.Place`:
node, window, offset), so they can be host memory or, once the cluster has them, GPU windows.

- :func:`broadcast`: binomial tree in ``log2(p)`` steps (000 section 5.4, Figure 7).  The root
  sends to ranks ``p/2, p/4, ..., 1``; a rank ``r`` that received from ``r - h`` (``h`` its
  lowest set bit) forwards to ``r + h/2, ..., r + 1``.  Each forwarding node issues *one*
  chained DMA with a descriptor per destination, started once its data has arrived, as 000
  does ("Chained DMA ... DMA 通信を 1 回だけ発行").  000 sends step 1 between its two virtual
  sub-clusters over InfiniBand (MPI); here every step is TCA.
- :func:`allgather`: recursive doubling (000 section 5.5, Figure 8).  In step ``s`` rank ``r``
  sends the ``2^s`` blocks it holds to rank ``r xor 2^s`` (one descriptor with a completion
  write), after the data of step ``s - 1`` has arrived; distance and size double each step.
  Any block size from 1 byte: the DMA moves any byte length at any alignment (000 could not
  gather a scalar: its minimum transfer was 16 bytes, section 6.3); 000 runs the last step over
  InfiniBand, here it is TCA.
- :func:`puts`: independent transfers, one chained DMA per sender (the collision case:
  two senders into one receiver; the latency per hop: one sender at a time).

Each builder returns a :class:`~peach2.sim.collectives.plan.Collective`; run it with
:func:`~peach2.sim.collectives.plan.run`.  The ``*_reference`` functions are the pure-Python
results the tests compare every node's memory with.
"""

from peach2.sim.driver import memcpy

from .memory import Place
from .plan import FLAG, Collective, Program, Step

__all__ = ["broadcast", "allgather", "puts", "broadcast_reference", "allgather_reference",
           "log2_exact"]


def log2_exact(p):
    """``log2(p)`` for a power of two ``p >= 2``; ``ValueError`` otherwise."""
    if p < 2 or p & (p - 1):
        raise ValueError(f"the algorithm needs a power-of-two number of nodes >= 2, not {p}")
    return p.bit_length() - 1


def _flag_word(mem, node, offset):
    """``(tca address, value)`` of the completion write into ``node``'s flag at ``offset``."""
    return mem.tca(Place(node, "host", offset), 4), FLAG


def broadcast(mem, nodes, buf, size, *, root=0, window="host", channel=0):
    """The Broadcast of ``size`` bytes at window offset ``buf`` of ``nodes[root]`` into the same
    offset of every node of ``nodes`` (a power of two of them), in ``log2(p)`` steps.

    ``info``: ``steps``, ``bytes`` (per node), ``sends``: ``(step, from node, to node)`` of
    every send (step 1 is the root's first).
    """
    p = len(nodes)
    steps = log2_exact(p)
    if size < 1:
        raise ValueError(f"size must be at least 1 byte, not {size}")
    flag = mem.symmetric(4)
    programs, flags, sends = [], [], []
    for rel in range(p):
        node = nodes[(rel + root) % p]
        h = p if rel == 0 else rel & -rel
        src = mem.local(Place(node, window, buf), size)
        transfers = []
        d = h // 2
        while d >= 1:
            dst_node = nodes[(rel + d + root) % p]
            transfers.append(memcpy(src, mem.tca(Place(dst_node, window, buf), size), size,
                                    seq=_flag_word(mem, dst_node, flag)))
            sends.append((log2_exact(p // d), node, dst_node))
            d //= 2
        mine = [] if rel == 0 else [(Place(node, "host", flag), FLAG)]
        if rel:
            flags.append(Place(node, "host", flag))
        programs.append(Program(node, [Step(channel, transfers, mine)] if transfers else [],
                                done=mine))
    return Collective("broadcast", programs, flags,
                      {"nodes": p, "steps": steps, "bytes": size,
                       "sends": sorted(sends)})


def allgather(mem, nodes, buf, size, *, window="host"):
    """The Allgather of one ``size``-byte block per node: node ``nodes[r]``'s block at window
    offset ``buf + r * size`` ends up at that offset on every node (``p * size`` bytes each),
    by recursive doubling in ``log2(p)`` steps; step ``s`` runs on channel ``s % 4``."""
    p = len(nodes)
    steps = log2_exact(p)
    if size < 1:
        raise ValueError(f"the block size must be at least 1 byte, not {size}")
    flags0 = mem.symmetric(4 * steps)
    programs, flags = [], []
    for r, node in enumerate(nodes):
        prog = Program(node, [])
        for s in range(steps):
            partner = nodes[r ^ (1 << s)]
            first = (r >> s << s) * size
            length = (1 << s) * size
            t = memcpy(mem.local(Place(node, window, buf + first), length),
                       mem.tca(Place(partner, window, buf + first), length), length,
                       seq=_flag_word(mem, partner, flags0 + 4 * s))
            wait = [] if s == 0 else [(Place(node, "host", flags0 + 4 * (s - 1)), FLAG)]
            prog.steps.append(Step(s % 4, [t], wait))
            flags.append(Place(node, "host", flags0 + 4 * s))
        prog.done = [(Place(node, "host", flags0 + 4 * (steps - 1)), FLAG)]
        programs.append(prog)
    return Collective("allgather", programs, flags,
                      {"nodes": p, "steps": steps, "bytes": size, "gathered": p * size})


def puts(mem, transfers, *, channel=0):
    """Independent transfers ``[(src Place, dst Place, size)]``, each with a completion write
    into a flag of its receiver; one chained DMA per sending node (its transfers in the order
    given), every sender started at once.  ``Result.seen[(receiver, flag offset)]`` times each
    transfer's arrival; ``info["flags"][i]`` is transfer ``i``'s flag offset."""
    by_node, flags, offsets = {}, [], []
    for src, dst, size in transfers:
        if src.window == "host" and dst.window == "host" and src.node == dst.node \
                and abs(src.offset - dst.offset) < size:
            raise ValueError("a local copy must not overlap itself")
        flag = mem.symmetric(4)
        t = memcpy(mem.local(src, size), mem.tca(dst, size), size,
                   seq=_flag_word(mem, dst.node, flag))
        by_node.setdefault(src.node, []).append(t)
        flags.append(Place(dst.node, "host", flag))
        offsets.append(flag)
    programs = {node: Program(node, [Step(channel, ts)]) for node, ts in by_node.items()}
    for f in flags:
        programs.setdefault(f.node, Program(f.node, [])).done.append((f, FLAG))
    return Collective("puts", list(programs.values()), flags,
                      {"transfers": [(s, d, n) for s, d, n in transfers], "flags": offsets,
                       "bytes": sum(n for _, _, n in transfers)})


# -- reference results -----------------------------------------------------------------------

def broadcast_reference(data, p):
    """Every node's buffer after a Broadcast of ``data`` among ``p`` nodes."""
    return [bytes(data)] * p


def allgather_reference(blocks):
    """Every node's buffer after an Allgather of ``blocks`` (one per rank, equal sizes)."""
    if len({len(b) for b in blocks}) > 1:
        raise ValueError("Allgather blocks must all have the same size")
    whole = b"".join(blocks)
    return [whole] * len(blocks)
