"""One coroutine per clock that steps every awake per-cycle model.

A cocotb task that awaits ``RisingEdge(clk)`` costs a trigger registration, a callback and a
coroutine resume per cycle.  With 16 hard-IP models on one clock (a 16-node sub-cluster) that
scheduling, not the models' own work, was a third of the Python time per cycle.  An
:class:`EdgeTicker` awaits the edge once and calls the ``tick(now)`` method of every model that
joined it, in the order they joined; a model leaves while it sleeps and joins again when woken.

A model written for a ticker keeps its per-cycle state in attributes (not coroutine locals) and
must not await inside ``tick``.  A model given no ticker makes its own, so the per-cycle code is
the same either way; sharing one ticker only changes how many tasks wake per cycle.
"""

import cocotb
from cocotb.triggers import Event, RisingEdge
from cocotb.utils import get_sim_time

__all__ = ["EdgeTicker"]


class EdgeTicker:
    """Call ``model.tick(now)`` for every joined model at every rising edge of ``clk``.

    Parameters
    ----------
    clk : cocotb handle
        The clock whose rising edges are the models' cycles.

    Members
    -------
    models : list
        The models stepped at each edge, in the order they joined.
    """

    def __init__(self, clk):
        self.clk = clk
        self.models = []
        self._task = None
        self._joined = Event()

    def join(self, model):
        """Step ``model`` from the next edge on (no effect if it is already stepped)."""
        if model not in self.models:
            self.models.append(model)
        self._joined.set()
        if self._task is None:
            self._task = cocotb.start_soon(self._run())

    def leave(self, model):
        """Stop stepping ``model`` (it joins again when it has something to do)."""
        if model in self.models:
            self.models.remove(model)

    async def _run(self):
        edge = RisingEdge(self.clk)
        models = self.models
        while True:
            if not models:              # everything asleep: no Python at all per cycle
                self._joined.clear()
                await self._joined.wait()
            await edge
            now = get_sim_time("step")
            for model in tuple(models):
                model.tick(now)
