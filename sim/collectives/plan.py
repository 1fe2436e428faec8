"""A communication written as each node's program of chained DMAs, and the runner of it.

This is the shape every collective of :mod:`peach2.sim.collectives.algorithms` and :mod:`peach2.sim.collectives.halo`
takes, and the one a user writes their own in (docs/collectives.md).  A node's
:class:`Program` is a list of :class:`Step` s; a step is one chained DMA (000 section 2.5:
``tcaSetDMADesc_Memcpy`` per descriptor, ``tcaDescSet``, ``tcaStartDMADesc``) that the node
starts once the completion writes it waits for have landed in its own memory.  Each
descriptor that hands data to another node ends with a completion write (``seq``, docs/dma.md)
into a flag of the receiver's host memory: the write travels behind the data on the same path,
so the flag means the data is there (000 section 5.3: ``tcaDMAWaitRecv``).

:func:`prepare` writes every chain into its node's host memory once (``reflect_init`` of 000
section 5.3: the set-up is done once while the pattern does not change) and registers it with
its channel (``CH_HEAD``) when the node's steps use distinct channels; :func:`run` then clears
the flags, starts every node's program at the same simulated instant and returns when every
node has seen its last flag (:class:`Result`), and afterwards waits for every channel it used
and raises :class:`~peach2.sim.driver.driver.DmaFault` if one stopped with an error.

Simplification: the nodes' programs all start at the same instant, as if a barrier had just
released them (the papers time their collectives the same way, from the start call).

Building a plan (the classes here, :mod:`~peach2.sim.collectives.algorithms`,
:mod:`~peach2.sim.collectives.halo`) needs no simulator; :func:`prepare` and :func:`run` import
cocotb when they are called.
"""

from dataclasses import dataclass, field

from peach2.params import N_DMA_CHANNELS
from peach2.sim.driver import Chain

from .memory import gather
from .paths import PATHS, SENDERS, step_path

__all__ = ["FLAG", "Step", "Program", "Collective", "Result", "prepare", "run"]

#: Value of every completion write of a collective (flags are cleared to 0 before a run).
FLAG = 1

@dataclass
class Step:
    """One chained DMA on ``channel``: ``transfers`` (``peach2.sim.driver.chain.Transfer``), started
    once every ``(Place, value)`` of ``wait`` (the node's own host memory) holds its value.  How
    it leaves the node is :func:`run`'s ``paths`` (the chain, register mode on the same channel,
    or the CPU's stores or puts: :mod:`peach2.sim.collectives.paths`)."""
    channel: int
    transfers: list
    wait: list = field(default_factory=list)


@dataclass
class Program:
    """What ``node`` does: its ``steps`` in order, then wait for ``done`` (``(Place, value)``
    in its own host memory); the collective is over at the node when they have landed."""
    node: int
    steps: list
    done: list = field(default_factory=list)


@dataclass
class Collective:
    """A communication pattern: every node's :class:`Program`, the flags to clear before a run
    (places of 4-byte words) and ``info`` (what it is: steps, bytes, ... for reports)."""
    name: str
    programs: list
    flags: list
    info: dict = field(default_factory=dict)
    _chains: dict = field(default_factory=dict, repr=False)
    _preset: set = field(default_factory=set, repr=False)
    _slots: set = field(default_factory=set, repr=False)
    _paths: dict = field(default_factory=dict, repr=False)
    _prepared: str = field(default=None, repr=False)


@dataclass
class Result:
    """Times (simulated ns) of one run: ``start``; ``done[node]`` when the node saw its last
    flag (its start when it waits for none); ``seen[(node, offset)]`` when each flag was seen;
    ``time`` = the last node's done - start."""
    start: float
    done: dict
    seen: dict

    @property
    def time(self):
        return max(self.done.values()) - self.start


async def prepare(mem, coll, paths="dma"):
    """Get ``coll`` ready to :func:`run` with ``paths``: decide each step's path
    (:func:`~peach2.sim.collectives.paths.step_path`; a forced path a step cannot take raises
    ``ValueError`` here, before anything is sent), write every chain into its node's host memory
    (once), and where a node's steps use distinct channels register each chain with its channel
    and fill the slots of each register-mode step (all nodes at once).  :func:`run` calls it
    when ``paths`` changes; then run as often as wanted."""
    for prog in coll.programs:
        for s in prog.steps:
            if not 0 <= s.channel < N_DMA_CHANNELS:
                raise ValueError(f"node {prog.node}: channel {s.channel} out of range")
            if not s.transfers:
                raise ValueError(f"node {prog.node}: a step without descriptors")
    coll._paths = {(prog.node, i): step_path(mem, prog.node, s, paths)
                   for prog in coll.programs for i, s in enumerate(prog.steps)}
    await gather(_prepare_node(mem, coll, prog) for prog in coll.programs)
    coll._prepared = paths


async def _prepare_node(mem, coll, prog):
    drv = await mem.dma_ready(prog.node)
    channels = [s.channel for s in prog.steps]
    distinct = len(set(channels)) == len(channels)
    for i, s in enumerate(prog.steps):
        key = (prog.node, i)
        if key not in coll._chains:
            chain = Chain(s.channel, 0)
            for t in s.transfers:
                chain.add(t)
            chain.base = mem.alloc_descriptors(prog.node, chain.size)
            for address, raw in chain.image():
                await drv.memory.write(address, raw)
            coll._chains[key] = chain
            if distinct:
                await drv.dma_set_head(s.channel, chain.head)
                coll._preset.add(key)
        if distinct and coll._paths[key] == "register" and key not in coll._slots:
            await drv.dma_reg_set(s.channel, s.transfers)
            coll._slots.add(key)


async def _node(mem, coll, prog, seen, done, clk, timeout_ns, gate, notify):
    from cocotb.triggers import ClockCycles
    from cocotb.utils import get_sim_time

    drv = mem.cluster.drivers[prog.node]
    if gate is not None:
        await gate(prog.node)
    started = set()

    async def channel_free(channel):        # the channel's previous chain must be over
        if channel in started:
            await drv.dma_wait(channel, pause=lambda: ClockCycles(clk, 16))
    for i, step in enumerate(prog.steps):
        key = (prog.node, i)
        for place, value in step.wait:
            seen[(place.node, place.offset)] = await mem.wait_word(place, value, timeout_ns)
        path = coll._paths[key]
        if path in SENDERS:
            await SENDERS[path](mem, prog.node, step)
            continue
        if path == "register":
            if key not in coll._slots:
                await channel_free(step.channel)
                await drv.dma_reg_set(step.channel, step.transfers)
            await drv.dma_reg_start(step.channel, len(step.transfers))
        else:
            if key not in coll._preset:
                await channel_free(step.channel)
                await drv.dma_set_head(step.channel, coll._chains[key].head)
            await drv.dma_start(step.channel, adj=coll._chains[key].announced)
        started.add(step.channel)
    t = get_sim_time("ns")
    for place, value in prog.done:
        t = seen[(place.node, place.offset)] = await mem.wait_word(place, value, timeout_ns)
    done[prog.node] = t
    if notify is not None:
        notify(prog.node, t)


def default_timeout_ns(coll):
    """A bound no run of ``coll`` should reach: 200 us plus 20 ns per byte a node receives
    (50 MB/s)."""
    return 200_000 + 20 * coll.info.get("gathered", coll.info.get("bytes", 0))


async def run(mem, coll, timeout_ns=None, *, gate=None, notify=None, paths="dma"):
    """Clear ``coll``'s flags, run every node's program from the same instant, return the
    :class:`Result`; then check every channel used ended without an error (``DmaFault``).

    ``paths`` (:data:`~peach2.sim.collectives.paths.PATHS`): ``"dma"`` sends every step as its
    chained DMA; ``"auto"`` picks each step's path by size and source
    (:func:`~peach2.sim.collectives.paths.step_path`: CPU stores, inline puts, register mode or
    the chain); ``"pio"``, ``"inline"`` or ``"register"`` forces that path on every step.

    ``gate``: an async function of a node, awaited before that node's program starts (a node
    of a hybrid collective starts its TCA step when its MPI step is over); the node's flags
    are still waited for from the run's start, so data may arrive before the gate opens.
    ``notify(node, t_ns)`` is called the moment a node's program is over.

    A flag not seen within ``timeout_ns`` (default :func:`default_timeout_ns`) raises
    ``TimeoutError`` naming it, or ``DmaFault`` when a channel stopped with an error, or
    ``PutFault`` when the chip refused a put (``PUT_STATUS``); after the last flag, every channel
    used is waited for and every node that sent puts is asked for refusals, so a put refused
    before a flag that came anyway still raises ``PutFault``."""
    from cocotb.triggers import ClockCycles
    from cocotb.utils import get_sim_time

    if paths not in PATHS:
        raise ValueError(f"paths must be one of {PATHS}, not {paths!r}")
    timeout_ns = default_timeout_ns(coll) if timeout_ns is None else timeout_ns
    if coll._prepared != paths and any(p.steps for p in coll.programs):
        await prepare(mem, coll, paths)
    for place in coll.flags:
        mem.write(place, bytes(4))
    clk = mem.cluster.dut.clk
    seen, done = {}, {}
    start = get_sim_time("ns")

    async def channels_ended(prog):     # the channels the node's steps ran on
        drv = mem.cluster.drivers[prog.node]
        for channel in sorted({s.channel for i, s in enumerate(prog.steps)
                               if coll._paths[(prog.node, i)] not in SENDERS}):
            await drv.dma_wait(channel, pause=lambda: ClockCycles(clk, 64), max_polls=10_000)

    async def puts_sent(prog):
        if any(coll._paths[(prog.node, i)] == "inline" for i in range(len(prog.steps))):
            await mem.cluster.drivers[prog.node].put_check()
    try:
        await gather(_node(mem, coll, prog, seen, done, clk, timeout_ns, gate, notify)
                     for prog in coll.programs)
    except TimeoutError:        # a flag never came: a channel that stopped or a refused put says why
        await gather(channels_ended(prog) for prog in coll.programs)
        await gather(puts_sent(prog) for prog in coll.programs)
        raise
    result = Result(start, done, seen)
    await gather(channels_ended(prog) for prog in coll.programs)
    await gather(puts_sent(prog) for prog in coll.programs)     # none refused on the way
    return result
