"""The partitioned machine and its conservative synchronisation in fixed windows.

::

    rank 0                      rank 1                        every window [s, s + W):
    Partition 0  Partition 1    Partition 2  Partition 3      1. each partition steps its
        |  step    |  step          |  step    |  step          models and fabric to s + W
        +----+-----+                +----+-----+              2. all-to-all: the crossings
             +------ alltoall ----------+                        each produced, and each
             |  crossings, next times   |                        rank's next event time
        inject sorted by (stamp, origin port, origin seq)      3. inject at exact stamps
        next window starts at the earliest next event anywhere

A crossing produced at ``t`` takes effect at ``t + lookahead`` or later (``cable_ps +
switch_ps``, see :class:`PartitionFabric`), so with ``W <= lookahead`` everything a partition
needs for a window is in its event queue when the window starts: the result is the same for
any such ``W``, any placement of partitions on ranks, any number of ranks.  A longer window
would let a partition run past packets not yet sent to it (SimBricks reports that a
synchronisation interval longer than the link latency silently gives wrong results), so it is
refused.  Windows in which nothing happens anywhere are skipped: the next window starts at the
earliest pending event of any partition, which every rank learns from the same exchange.
"""

import time

from peach2.sim.infiniband import Params

from .crossing import KEY, destination
from .layout import Layout
from .local_transport import LocalTransport
from .partition import Partition
from .stats import SyncStats
from .transport import Transport

__all__ = ["Machine"]

class Machine:
    """``n_partitions`` partitions of ``ports_per_partition`` ports on one flat switch.

    Every rank builds the same machine with the same arguments and makes the same calls
    (SPMD); each holds only its own partitions (:attr:`partitions`).  With
    :class:`LocalTransport` (the default) one process holds them all and steps them exactly as
    N ranks would, so the two give the same bytes at the same times.

    Parameters
    ----------
    n_partitions : int
        Number of partitions (sub-clusters).
    ports_per_partition : int or sequence of int
        Switch ports (HCAs) per partition, see :class:`Layout`.
    params : Params or None
        Fabric parameters (default :class:`Params()`).
    transport : Transport or None
        :class:`LocalTransport` (default) or :class:`MpiTransport`.
    window_ps : int or None
        Window length; default and maximum :attr:`lookahead_ps`.

    Members
    -------
    layout : Layout
        Which partition owns which port.
    lookahead_ps : int
        ``params.cable_ps + params.switch_ps``: no partition affects another sooner.
    window_ps : int
        The window length.
    stats : SyncStats
        This rank's counters.
    """

    def __init__(self, n_partitions, ports_per_partition, params=None, transport=None,
                 window_ps=None):
        self.layout = Layout(n_partitions, ports_per_partition)
        self.params = Params() if params is None else params
        if not isinstance(self.params, Params):
            raise TypeError(f"params must be a Params, not {type(self.params).__name__}")
        self.transport = LocalTransport() if transport is None else transport
        if not isinstance(self.transport, Transport):
            raise TypeError(f"transport must be a Transport, not {type(transport).__name__}")
        self.lookahead_ps = self.params.cable_ps + self.params.switch_ps
        if self.lookahead_ps <= 0:
            raise ValueError("cable_ps + switch_ps is 0: with no lookahead between partitions "
                             "the machine cannot be synchronised in windows")
        window_ps = self.lookahead_ps if window_ps is None else window_ps
        if isinstance(window_ps, bool) or not isinstance(window_ps, int) or window_ps <= 0:
            raise ValueError(f"window_ps must be a positive integer number of picoseconds, "
                             f"not {window_ps!r}")
        if window_ps > self.lookahead_ps:
            raise ValueError(
                f"window_ps = {window_ps} ps is longer than the lookahead, {self.lookahead_ps} "
                f"ps (cable_ps + switch_ps: a packet leaving an HCA at t may be forwarded by a "
                f"switch output of another partition at t + {self.lookahead_ps} ps); a longer "
                f"window would run partitions past packets not yet sent to them and silently "
                f"change the results")
        self.window_ps = window_ps
        self._rank_of = self.transport.placement(n_partitions)
        self._local = [Partition(self.layout, p, self.params)
                       for p in range(n_partitions) if self._rank_of[p] == self.transport.rank]
        self._by_index = {p.index: p for p in self._local}
        self._owner = self.layout.owners()
        self._now = 0
        self.stats = SyncStats()

    # -- what the layers above use ---------------------------------------------------------

    @property
    def now(self):
        """The machine's time: every event at or before it has run (after a run call)."""
        return self._now

    @property
    def partitions(self):
        """This rank's partitions, in index order."""
        return list(self._local)

    def partition(self, index):
        """Return partition ``index``; ``ValueError`` if it lives on another rank."""
        self.layout.ports(index)                       # checks the index
        if index not in self._by_index:
            raise ValueError(f"partition {index} runs on rank {self._rank_of[index]}, "
                             f"not on this rank ({self.transport.rank})")
        return self._by_index[index]

    def partition_of(self, port):
        """Return the index of the partition that owns ``port``."""
        return self.layout.partition_of(port)

    def rank_of(self, index):
        """Return the rank that runs partition ``index``."""
        self.layout.ports(index)
        return self._rank_of[index]

    def is_local(self, index):
        """True when partition ``index`` runs on this rank."""
        return index in self._by_index

    def run_until(self, t_ps):
        """Run every event at or before ``t_ps`` in every partition; collective."""
        if isinstance(t_ps, bool) or not isinstance(t_ps, int) or t_ps < self._now:
            raise ValueError(f"t_ps must be an integer number of picoseconds not before the "
                             f"machine's time {self._now}, not {t_ps!r}")
        self._run(t_ps, need_idle=False)
        for partition in self._local:
            partition.settle(t_ps)
        self._now = t_ps

    def run(self, limit_ps=None):
        """Run until nothing is pending anywhere (or to ``limit_ps``); return the time reached.

        Collective.  A model without ``next_event_ps`` never reports idle, so with one the
        run needs ``limit_ps``; every rank refuses it alike otherwise.
        """
        if limit_ps is not None:
            self.run_until(limit_ps)
            return self._now
        self._run(None, need_idle=True)
        return self._now

    def gather(self, fn):
        """Return ``[fn(partition) for every partition]`` in index order, on every rank."""
        mine = {p.index: fn(p) for p in self._local}
        merged = {}
        for part in self.transport.allgather(mine):
            merged.update(part)
        return [merged[i] for i in range(self.layout.n_partitions)]

    # -- the synchronisation ----------------------------------------------------------------

    def _run(self, last, need_idle):
        wall = time.perf_counter()
        start_ps = self._now
        nxt, busy = self._exchange({}, self._local_next(self._now))
        if need_idle and busy:
            raise ValueError("a model attached without next_event_ps() never reports idle: "
                             "give run() a limit_ps, or use run_until")
        window = self.window_ps
        while nxt is not None and (last is None or nxt <= last):
            start = nxt
            end = start + window if last is None else min(start + window, last + 1)
            t0 = time.perf_counter()
            outgoing = {}
            for partition in self._local:
                for item in partition.step(start, end):
                    outgoing.setdefault(self._owner[destination(item)], []).append(item)
            self.stats.step_s += time.perf_counter() - t0
            self.stats.windows += 1
            self._now = end - 1
            nxt, _ = self._exchange(outgoing, self._local_next(end))
        if last is not None:
            self._now = max(self._now, last)
        self.stats.simulated_ps += self._now - start_ps
        self.stats.wall_s += time.perf_counter() - wall

    def _local_next(self, edge):
        """Earliest pending time among this rank's partitions, and whether a model is busy."""
        times, busy = [], False
        for partition in self._local:
            t = partition.next_event_ps(edge)
            busy = busy or partition.has_opaque_model()
            if t is not None:
                times.append(t)
        return (min(times) if times else None), busy

    def _exchange(self, outgoing, local):
        """All-to-all of crossings and next times; inject what came; return the global next."""
        transport = self.transport
        local_next, busy = local
        stamps = [min(item[0] for item in items) for items in outgoing.values()]
        if stamps:
            local_next = min(stamps) if local_next is None else min(local_next, *stamps)
            self.stats.crossings_sent += sum(len(items) for items in outgoing.values())
        per_rank = [(local_next, busy, {}) for _ in range(transport.size)]
        for dst, items in outgoing.items():
            per_rank[self._rank_of[dst]][2][dst] = items
        t0 = time.perf_counter()
        received = transport.exchange(per_rank)
        t1 = time.perf_counter()
        self.stats.exchange_s += t1 - t0
        self.stats.exchanges += 1
        nexts = [n for n, _, _ in received if n is not None]
        any_busy = any(b for _, b, _ in received)
        inbox = {}
        for _, _, by_partition in received:
            for dst, items in by_partition.items():
                inbox.setdefault(dst, []).extend(items)
        for dst, items in inbox.items():
            items.sort(key=KEY)
            self._by_index[dst].inject(items)
            self.stats.crossings_received += len(items)
        self.stats.step_s += time.perf_counter() - t1
        return (min(nexts) if nexts else None), any_busy

    def __repr__(self):
        return (f"Machine({self.layout!r}, window {self.window_ps} ps, "
                f"{self.transport.describe()}, rank {self.transport.rank})")
