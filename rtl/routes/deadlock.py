"""The channel dependency graph (CDG) of destination routes and its cycle search.

Deadlock check
--------------
Posted writes cross every link with credit flow control: a packet that holds a buffer at the
receiving end of link ``c1`` and needs a buffer of link ``c2`` waits until ``c2`` has room.  The
*channel dependency graph* (CDG) has a vertex per directed link ``(node, port) -> neighbour``
(:func:`channel_name`: ``"3.E->4"``) and per node's delivery to its host (``"4.N"``), and an
edge ``c1 -> c2`` when some (source, destination) route uses ``c1`` and then ``c2``.  A route set
cannot deadlock if its CDG has no cycle (Dally and Seitz, 1987); a cycle of full buffers around
the cycle is a deadlock that credit flow control cannot resolve (with cut-through routing the
buffers of a cycle can fill).  :meth:`peach2.routes.route_set.RouteSet.cycle` returns one cycle as a
list of channels.
"""

__all__ = ["channel_name", "dependencies", "find_cycle"]


def channel_name(topology, channel):
    """Return ``"3.E->4"`` for the link channel ``(3, "E")``, ``"4.N"`` for a delivery."""
    node, port = channel
    if port == "N":
        return f"{node}.N"
    return f"{node}.{port}->{topology.links[(node, port)]}"


def dependencies(topology, next_hops):
    """The CDG of destination routes: ``{channel: {channel, ...}}``, channel ``(node, port)``.

    With destination routes that reach their destination, ``c1 = (x, p) -> c2 = (y, q)`` is
    used exactly when ``x`` sends some destination ``d != x`` by ``p`` to ``y`` and ``y`` sends
    ``d`` by ``q``: the route from ``x`` itself to ``d`` has it.
    """
    n = topology.n_nodes
    graph = {(x, "N"): set() for x in range(n)}
    for x in range(n):
        for p in topology.neighbours(x):
            graph[(x, p)] = set()
    for d in range(n):
        for x in range(n):
            if x != d:
                p = next_hops[x][d]
                y = topology.links[(x, p)]
                graph[(x, p)].add((y, next_hops[y][d]))
    return graph


def find_cycle(graph):
    """Return one cycle of ``graph`` as a list of vertices (first one smallest), or ``None``."""
    state = {}
    for root in sorted(graph):
        if root in state:
            continue
        state[root] = 1
        path, stack = [root], [iter(sorted(graph[root]))]
        while stack:
            for w in stack[-1]:
                if state.get(w) == 1:
                    cycle = path[path.index(w):]
                    i = cycle.index(min(cycle))
                    return cycle[i:] + cycle[:i]
                if w not in state:
                    state[w] = 1
                    path.append(w)
                    stack.append(iter(sorted(graph[w])))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()
    return None
