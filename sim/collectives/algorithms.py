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
- :func:`ring_allgather`: the same result without sharing a ring link: the blocks go round
  every ring of the double ring both ways at once, one hop per step, then recursive doubling
  between the rings (one S hop on a 2xK).  More steps than recursive doubling (``ceil((K-1)/2)``
  on a ring of K against ``log2(K)``), but no step puts two flows on one link, so it wins where
  a step is bandwidth-bound (docs/collectives.md, "Which Allgather").
- :func:`direct_broadcast`, :func:`direct_allgather`: one step, every send at once (the root
  to every node; every node to every node), each receiver waiting for one flag per sender.
  For small messages sent as inline puts (docs/put.md, ``run(..., paths="auto")``), where a
  step's latency is the cost and issuing one more put costs tens of nanoseconds, one step beats
  ``log2(p)`` of them; for large ones every send shares the sender's link.
- :func:`puts`: independent transfers, one chained DMA per sender (the collision case:
  two senders into one receiver; the latency per hop: one sender at a time).

Each builder returns a :class:`~peach2.sim.collectives.plan.Collective`; run it with
:func:`~peach2.sim.collectives.plan.run`.  The ``*_reference`` functions are the pure-Python
results the tests compare every node's memory with.
"""

from peach2.sim.driver import memcpy

from .memory import Place
from .plan import FLAG, Collective, Program, Step

__all__ = ["broadcast", "allgather", "ring_allgather", "direct_broadcast", "direct_allgather", "puts",
           "broadcast_reference", "allgather_reference", "log2_exact"]


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


def ring_allgather(mem, nodes, buf, size, *, ring=None, window="host"):
    """The Allgather of :func:`allgather` (node ``nodes[r]``'s block at ``buf + r * size`` ends
    up at that offset on every node) in steps of one hop: ``nodes`` are ``p / ring`` rings of
    ``ring`` nodes each (default one ring of all), ``nodes[j * ring + i]`` the ``i``-th of ring
    ``j``, each node cabled E to the next of its ring (as ``peach2 routes`` numbers a ring or
    the rings of a 2xK: ``ring=K``).

    - Ring steps ``s = 1 .. ceil((K-1)/2)``: every node sends the block that started ``s - 1``
      nodes W of it on E, and (while ``s <= floor((K-1)/2)``) the block that started ``s - 1``
      nodes E of it on W, both in one chain once the blocks of step ``s - 1`` have landed.  So
      every ring link carries one block per direction per step: no two flows share a link.
    - Then recursive doubling between rings (``p / ring`` a power of two): ring ``j``'s node
      ``i`` exchanges everything its ``2^t`` rings hold with node ``i`` of ring ``j xor 2^t``
      (on a 2xK: one step over the S cable, the whole ring's ``K`` blocks).

    Every step's descriptors end in a completion write into a flag of their receiver; step
    ``s`` runs on channel ``s % 4`` (a fifth step waits for the first's chain to be over).
    """
    p = len(nodes)
    k = p if ring is None else ring
    if isinstance(k, bool) or not isinstance(k, int) or k < 1 or p % k:
        raise ValueError(f"ring must divide the {p} nodes, not {ring!r}")
    rings = p // k
    if rings & (rings - 1) or p < 2:
        raise ValueError(f"the rings are joined by recursive doubling: {p} nodes in rings of "
                         f"{k} make {rings} rings, not a power of two (or fewer than 2 nodes)")
    if size < 1:
        raise ValueError(f"the block size must be at least 1 byte, not {size}")
    east, west = k // 2, (k - 1) // 2           # steps with an E send, with a W send
    across = rings.bit_length() - 1
    n_flags = east + west + across
    flags0 = mem.symmetric(4 * n_flags)
    flag_e = [flags0 + 4 * s for s in range(east)]                  # arrived from W at step s
    flag_w = [flags0 + 4 * (east + s) for s in range(west)]         # arrived from E at step s
    flag_x = [flags0 + 4 * (east + west + t) for t in range(across)]

    def send(node, partner, first, length, flag):
        return memcpy(mem.local(Place(node, window, buf + first * size), length * size),
                      mem.tca(Place(partner, window, buf + first * size), length * size),
                      length * size, seq=_flag_word(mem, partner, flag))

    programs, flags = [], []
    for g, node in enumerate(nodes):
        j, i = divmod(g, k)
        base = j * k
        prog = Program(node, [])
        waits = []
        for s in range(east):               # east >= west: every ring step sends E
            # the block that started s nodes W of me goes E
            transfers = [send(node, nodes[base + (i + 1) % k], base + (i - s) % k, 1, flag_e[s])]
            if s < west:        # the block that started s nodes E of me goes W
                transfers.append(send(node, nodes[base + (i - 1) % k], base + (i + s) % k, 1,
                                      flag_w[s]))
            prog.steps.append(Step(len(prog.steps) % 4, transfers, waits))
            waits = [(Place(node, "host", f[s]), FLAG) for f in (flag_e, flag_w) if s < len(f)]
        # a step's chains run on their own channels: the blocks of step s - 1 may still land
        # after those of step s, so what is sent on holds every block of the ring
        mine = [(Place(node, "host", flags0 + 4 * f), FLAG) for f in range(n_flags)]
        waits = mine[:east + west]
        for t in range(across):
            partner = nodes[((j ^ (1 << t)) * k) + i]
            first = (j >> t << t) * k
            prog.steps.append(Step(len(prog.steps) % 4,
                                   [send(node, partner, first, (1 << t) * k, flag_x[t])], waits))
            waits = [(Place(node, "host", flag_x[t]), FLAG)]
        prog.done = mine
        flags += [place for place, _ in mine]
        programs.append(prog)
    return Collective("allgather", programs, flags,
                      {"nodes": p, "steps": east + across, "bytes": size,
                       "gathered": p * size, "algorithm": "ring", "ring": k})


def direct_broadcast(mem, nodes, buf, size, *, root=0, window="host", channel=0):
    """The Broadcast of :func:`broadcast` in one step: ``nodes[root]`` sends to every other
    node, farthest in rank first (one chained DMA with a descriptor per node, or one inline put
    each); any number of nodes >= 2."""
    p = len(nodes)
    if p < 2 or size < 1:
        raise ValueError(f"needs at least 2 nodes and 1 byte, not {p} and {size}")
    flag = mem.symmetric(4)
    src_node = nodes[root]
    src = mem.local(Place(src_node, window, buf), size)
    order = sorted((r for r in range(p) if r != root), key=lambda r: -abs(r - root))
    transfers = [memcpy(src, mem.tca(Place(nodes[r], window, buf), size), size,
                        seq=_flag_word(mem, nodes[r], flag)) for r in order]
    flags = [Place(nodes[r], "host", flag) for r in order]
    programs = [Program(src_node, [Step(channel, transfers)])]
    programs += [Program(nodes[r], [], done=[(Place(nodes[r], "host", flag), FLAG)])
                 for r in order]
    return Collective("direct_broadcast", programs, flags,
                      {"nodes": p, "steps": 1, "bytes": size, "algorithm": "direct",
                       "sends": [(1, src_node, nodes[r]) for r in order]})


def direct_allgather(mem, nodes, buf, size, *, window="host", channel=0):
    """The Allgather of :func:`allgather` in one step: every node sends its block to every
    other node (starting with the next rank, so no two senders start on the same receiver),
    each into its own flag there; any number of nodes >= 2."""
    p = len(nodes)
    if p < 2 or size < 1:
        raise ValueError(f"needs at least 2 nodes and 1 byte, not {p} and {size}")
    flags0 = mem.symmetric(4 * p)
    programs, flags = [], []
    for r, node in enumerate(nodes):
        src = mem.local(Place(node, window, buf + r * size), size)
        transfers = []
        for k in range(1, p):
            peer = nodes[(r + k) % p]
            transfers.append(memcpy(src, mem.tca(Place(peer, window, buf + r * size), size),
                                    size, seq=_flag_word(mem, peer, flags0 + 4 * r)))
        mine = [(Place(node, "host", flags0 + 4 * q), FLAG) for q in range(p) if q != r]
        flags += [place for place, _ in mine]
        programs.append(Program(node, [Step(channel, transfers)], done=mine))
    return Collective("direct_allgather", programs, flags,
                      {"nodes": p, "steps": 1, "bytes": size, "gathered": p * size,
                       "algorithm": "direct"})


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
