"""Running a hybrid collective on the co-simulated machine, node by node, phase by phase.

::

    node g:  phase 0 ──done at t0──> phase 1 ──done at t1──> ... ──> done
             TCA phase: its program in its group's Collective, gated until g's previous
                        phase is over (peach2.sim.collectives.run(gate=..., notify=...))
             MPI phase: world.start_rank(g, program, t) on the machine's fabric

Where a phase's end meets the next phase's start:

- MPI -> MPI and TCA -> MPI: exact.  The machine runs a window only after cocotb has reached
  its end, so an MPI program started at a cocotb time ``t`` inside the window still starts at
  ``t`` (:mod:`peach2.sim.system.machine_driver`).
- MPI -> TCA: at the next window edge.  The machine learns that an MPI step ended at ``t``
  when it runs the window holding ``t``, after cocotb already stands at that window's end; so
  the TCA step starts up to one window (112 ns by default) late.  The run reports every such
  delay (``handoff_ns``), and a shorter window (``MachineSim(window_ps=...)``) bounds it lower.

An :class:`~.algorithms.Overlap` starts its TCA part (the gate) and its MPI part (the rank
program) at the same time on a node; the node's phase is over when the later of the two is.

The collective's time is from the common start to the last node's end (MPI ends at the exact
time the rank's program returned), as 000 times its collectives from the start call.

``trace=True`` also records every TCA cable's and InfiniBand port's bytes over the run
(:class:`peach2.sim.system.link_trace.LinkTrace`; the result's ``links``); it only watches, so
the times are the same with and without it.

``limit_ps`` cuts a run short (a tuning sweep's ``--cutoff``: a choice that cannot be the
fastest need not run to its end): a run not over ``limit_ps`` after its start (checked with the
end of every node, every four windows, with eight windows to spare for an MPI end the machine
has not reported yet) stops there, and its result says only that it takes longer (``cut``,
``over_ns``), with no bytes checked. The machine is left in the middle of the collective, so
nothing may run on it after a cut run.
"""

import time

import cocotb
from cocotb.triggers import Event
from cocotb.utils import get_sim_time

from peach2.sim.collectives import run as run_tca
from peach2.sim.collectives.plan import prepare
from peach2.sim.system.link_trace import LinkTrace

from .algorithms import MpiPhase, Overlap, TcaPhase
from .context import Context

__all__ = ["run_collective"]

#: A run of one collective that is not over after this much simulated time (20 ms) fails.
TIMEOUT_PS = 20_000_000_000


async def run_collective(sim, groups, coll, *, timeout_ps=TIMEOUT_PS, check=True, trace=False,
                         limit_ps=None):
    """Run ``coll`` (:class:`~.algorithms.Hybrid`) on ``sim`` (a started
    :class:`~peach2.sim.system.MachineSim` with its worlds); return its figures (the same on
    every MPI rank of the simulation).

    Every node's buffer is filled with ``coll.initial(g)`` first and compared with
    ``coll.expected(g)`` after (``check``); a difference raises ``AssertionError`` naming the
    node and the first differing byte.  Not over within ``timeout_ps``: ``TimeoutError`` naming
    the nodes still in a phase.  ``trace``: record the links' utilisation too (the result's
    ``links``, :meth:`~peach2.sim.system.link_trace.LinkTrace.finish`; ``phase_kinds``:
    ``"tca"``, ``"mpi"`` or ``"overlap"`` per phase; ``phase_ps``: ``{"g:i": ps}`` when node
    ``g``'s phase ``i`` ended).  ``limit_ps``: stop a run not over by then (see above) and
    return ``{"name", "network", "nodes", "groups", "bytes", "cut": True, "over_ns"}``.
    """
    if limit_ps is not None and limit_ps <= 0:
        raise ValueError(f"limit_ps must be positive, not {limit_ps}")
    groups = coll.groups or groups          # +hops: the collective's own, smaller groups
    ctx = Context(sim, groups, coll.nbytes)
    links = LinkTrace(sim) if trace else None
    result = None
    try:
        result = await _run(sim, groups, coll, ctx, timeout_ps, check, links, limit_ps)
        return result
    finally:
        # The buffers go back after a whole run; a run cut short or failed leaves the machine
        # mid-collective, its MPI requests pending on them, and nothing runs after it.
        if result is not None and not result["cut"]:
            ctx.free()
        if links is not None:
            links.stop()


async def _run(sim, groups, coll, ctx, timeout_ps, check, links, limit_ps):
    local = ctx.nodes
    for g in local:
        ctx.write(g, coll.initial(g))
    # the TCA collectives of every phase, built and written into host memory before the start
    tca = {}
    for i, phase in enumerate(coll.phases):
        phase = _part(phase, TcaPhase)
        if phase is not None:
            for k in ctx.local_groups():
                c = phase.build(ctx, k)
                if c is not None:
                    await prepare(ctx.mem(k), c)
                    tca[(i, k)] = c
    in_tca = {}
    for (i, k), c in tca.items():
        for prog in c.programs:
            g = groups.members(k)[groups.local(k).index(prog.node)]
            in_tca.setdefault(g, set()).add(i)
    if any(len(phases) > 1 for phases in in_tca.values()):
        raise ValueError("a node takes part in two TCA phases: their chains would share its "
                         "DMA channels' head registers")
    start = await sim.align(int(get_sim_time("ps")))
    if links is not None:
        links.begin(start)
    state = _State(sim, groups, coll, ctx, in_tca, start)
    wall = time.perf_counter()
    tasks = []
    for (i, k), c in tca.items():
        first = groups.members(k)[0] - groups.local(k)[0]

        async def gate(node, i=i, first=first):
            await state.gates[(first + node, i)].wait()

        def notify(node, t_ns, i=i, first=first):
            state.part_over(first + node, i, round(t_ns * 1000), machine=False)
        tasks.append(cocotb.start_soon(run_tca(ctx.mem(k), c, timeout_ns=timeout_ps / 1000,
                                               gate=gate, notify=notify)))
    for g in local:
        state.phase_over(g, -1, start, machine=False)
    spare = 8 * sim.machine.window_ps         # an MPI end is learned up to a window late
    while True:
        edge = await sim.driver.step()
        if sim.driver.windows % 4 == 0:
            if all(sim.transport.allgather(state.finished)):
                break
            if limit_ps is not None and edge - start > limit_ps + spare:
                return {"name": coll.name, "network": coll.network,
                        "nodes": groups.plan.n_nodes, "groups": groups.count,
                        "bytes": coll.nbytes, "cut": True, "over_ns": limit_ps / 1000}
        if edge - start > timeout_ps:
            raise TimeoutError(f"{coll.name} ({coll.network}) not over after {timeout_ps} ps: "
                               f"{state.pending()}")
    for task in tasks:
        await task
    wall = time.perf_counter() - wall
    if check:
        for g in local:
            want, got = coll.expected(g), ctx.read(g)
            if got != want:
                bad = next(j for j in range(len(want)) if got[j] != want[j])
                raise AssertionError(f"{coll.name} ({coll.network}): node {g}'s GPU0 differs "
                                     f"from the model at byte {bad} of {len(want)}")
    mine = {"done_ps": {g: state.done[g] for g in local},
            "phase_ps": {f"{g}:{i}": t for (g, i), t in state.ends.items()},
            "handoff_ps": state.handoffs}
    merged = {"done_ps": {}, "phase_ps": {}, "handoff_ps": []}
    for part in sim.transport.allgather(mine):
        merged["done_ps"].update(part["done_ps"])
        merged["phase_ps"].update(part["phase_ps"])
        merged["handoff_ps"] += part["handoff_ps"]
    end = max(merged["done_ps"].values())
    extra = {}
    if links is not None:
        extra = {"links": links.finish(end),
                 "phase_kinds": [_kind(p) for p in coll.phases],
                 "phase_ps": dict(sorted(merged["phase_ps"].items()))}
    return {"name": coll.name, "network": coll.network, "nodes": groups.plan.n_nodes,
            "groups": groups.count, "bytes": coll.nbytes, "info": coll.info,
            "start_ps": start, "time_ns": (end - start) / 1000,
            "done_ns": {str(g): (t - start) / 1000 for g, t in sorted(merged["done_ps"].items())},
            "phases": [p.name for p in coll.phases],
            "handoff_ns": max(merged["handoff_ps"], default=0) / 1000,
            "wall_s": wall, "checked": check, "cut": False, **extra}


def _kind(phase):
    if isinstance(phase, Overlap):
        return "overlap"
    return "tca" if isinstance(phase, TcaPhase) else "mpi"


def _part(phase, kind):
    """The part of ``phase`` of type ``kind`` (the phase itself, or a part of an Overlap)."""
    if isinstance(phase, Overlap):
        return phase.part(kind)
    return phase if isinstance(phase, kind) else None


class _State:
    """Which phase each local node is in, its phase ends and the MPI -> TCA delays."""

    def __init__(self, sim, groups, coll, ctx, in_tca, start):
        self.sim, self.groups, self.coll, self.ctx = sim, groups, coll, ctx
        self.in_tca, self.start = in_tca, start
        self.gates = {(g, i): Event() for g in in_tca for i in in_tca[g]}
        self.ends = {}              # (g, phase) -> ps
        self.done = {}              # g -> ps
        self.handoffs = []          # ps each MPI -> TCA start came late
        self.where = {}             # g -> the phase it is in
        self.left = {}              # g -> parts of its phase not over yet
        self.latest = {}            # g -> the latest end of its phase's parts so far

    @property
    def finished(self):
        return len(self.done) == len(self.ctx.nodes)

    def pending(self):
        return {g: self.coll.phases[i].name for g, i in sorted(self.where.items())
                if g not in self.done}

    def part_over(self, g, i, t_ps, *, machine):
        """A part of node ``g``'s phase ``i`` ended at ``t_ps``; the phase is over with the
        last of its parts."""
        self.left[g] -= 1
        self.latest[g] = max(self.latest[g], t_ps)
        if not self.left[g]:
            self.phase_over(g, i, self.latest[g], machine=machine)

    def phase_over(self, g, i, t_ps, *, machine):
        """Node ``g``'s phase ``i`` ended at ``t_ps`` (``machine``: seen by the machine, so
        cocotb learns it only now); start its next phase."""
        if i >= 0:
            self.ends[(g, i)] = t_ps
        j = i + 1
        while j < len(self.coll.phases):
            self.where[g] = j
            started = self._start(g, j, t_ps, machine)
            if started:
                self.left[g], self.latest[g] = started, t_ps
                return
            self.ends[(g, j)] = t_ps            # sits this phase out
            j += 1
        self.done[g] = t_ps

    def _start(self, g, j, t_ps, machine):
        """Start the parts of phase ``j`` node ``g`` takes part in; return how many."""
        phase, started = self.coll.phases[j], 0
        if _part(phase, TcaPhase) is not None and j in self.in_tca.get(g, ()):
            if machine:
                self.handoffs.append(int(get_sim_time("ps")) - t_ps)
            self.gates[(g, j)].set()
            started += 1
        mpi = _part(phase, MpiPhase)
        if mpi is not None:
            rank = self.sim.rank(g)
            gen = mpi.program(self.ctx, rank)
            if gen is not None:
                world = self.sim.worlds[self.groups.plan.subcluster_of(g)]
                world.start_rank(g, lambda r, gen=gen: gen, max(t_ps, rank.now),
                                 on_return=lambda r, v, j=j: self.part_over(
                                     r, j, self.sim.rank(r).now, machine=True))
                started += 1
        return started
