"""Stepping the co-simulated machine from cocotb: one window of the chips, then the machine to
the same edge.

::

    await Timer(W)                 the chips, hosts and GPUs of every local sub-cluster run to
                                   the window's edge e
    machine.run_until(e - 1)       the MPI ranks, HCAs and switch run their events up to it
                                   (HCA DMAs start in cocotb); crossings are exchanged

Anything cocotb does at ``t`` inside a window reaches the machine exactly (the machine has not
run that window yet); anything the machine does at ``t`` reaches cocotb at the next edge, at
most one window late (:mod:`.endpoint_dma`).
"""

from cocotb.triggers import Timer
from cocotb.utils import get_sim_time

from .plan import CLOCK_PS

__all__ = ["MachineDriver"]


class MachineDriver:
    """Steps ``machine`` one window at a time from inside a cocotb test.

    Members
    -------
    machine : Machine
    window_ps : int
        The machine's window, a whole number of clock cycles.
    windows : int
        Windows run so far.
    watchers : list
        ``watch(edge_ps)`` callables, called after every :meth:`step` (the chips and the
        machine both at ``edge_ps``): e.g. :class:`~.link_trace.LinkTrace` samples the cables'
        counters there.  Watching only; they must not change the simulation.
    """

    def __init__(self, machine, check_every=4):
        if machine.window_ps % CLOCK_PS:
            raise ValueError(f"the window ({machine.window_ps} ps) must be a whole number of "
                             f"{CLOCK_PS} ps clock cycles")
        self.machine = machine
        self.window_ps = machine.window_ps
        self.check_every = check_every
        self.windows = 0
        self.watchers = []

    async def align(self, t_ps):
        """Collective: run the machine and cocotb to the first window edge at or after the
        latest ``t_ps`` of every rank; return that edge."""
        latest = max(self.machine.transport.allgather(t_ps))
        edge = -(-latest // self.window_ps) * self.window_ps
        now = int(get_sim_time("ps"))
        if edge > now:
            await Timer(edge - now, "ps")
        if edge > self.machine.now + 1:
            self.machine.run_until(edge - 1)
        return edge

    async def step(self):
        """Advance cocotb by one window, then the machine to the same edge; return it."""
        await Timer(self.window_ps, "ps")
        edge = int(get_sim_time("ps"))
        self.machine.run_until(edge - 1)
        self.windows += 1
        for watch in self.watchers:
            watch(edge)
        return edge

    async def run(self, done):
        """Step windows until ``done()`` holds on every rank (asked every ``check_every``
        windows, a collective); return the edge where it held everywhere."""
        while True:
            edge = await self.step()
            if self.windows % self.check_every == 0 \
                    and all(self.machine.transport.allgather(bool(done()))):
                return edge
