"""The HCA's view of its host: an abstract DMA interface.

The verbs layer moves data only through this interface, so it does not care what sits behind
it: the in-memory :class:`~peach2.sim.verbs.memory.HostMemory` of the unit tests, the node
model's paths (:mod:`peach2.sim.node`), or a PCIe endpoint on the node's root complex whose
memory requests run in another simulator (:mod:`peach2.sim.system`).

Two ways in:

- :meth:`DMA.read` / :meth:`DMA.write`, synchronous: called at simulated time ``t_ps``, in
  non-decreasing time order per HCA, they return when the access is complete in simulated
  time; the data effect of a write is applied at the call.  A model that computes its own
  timing (a busy-until per direction is enough) implements these two.
- :meth:`DMA.start_read` / :meth:`DMA.start_write`, what the verbs layer calls: the result is
  handed to a callback, ``done(t_done_ps, data)`` for a read and ``done(t_visible_ps)`` for a
  write.  The default calls the synchronous method and then ``done`` before returning, so a
  synchronous model gives exactly the times it gave before.  An asynchronous model (memory
  requests answered by a PCIe simulation) overrides them and calls ``done`` later, from an
  event of the HCA's fabric at the completion time (``fabric.now == t_done_ps``).  A read
  that fails on the bus (an Unsupported Request or Completer Abort completion) is reported as
  ``data = None``.
"""

import abc

__all__ = ["DMA"]


class DMA(abc.ABC):
    """Host memory as a device sees it over PCIe."""

    @abc.abstractmethod
    def read(self, t_ps, addr, nbytes):
        """Read ``nbytes`` at ``addr`` starting at ``t_ps``; return ``(t_done_ps, data)``.

        ``t_done_ps`` is when the last byte is in the device (completion received).
        """

    @abc.abstractmethod
    def write(self, t_ps, addr, data):
        """Write ``data`` at ``addr`` starting at ``t_ps``; return ``t_done_ps``.

        ``t_done_ps`` is when the data is visible to the host (a later CPU read sees it).
        """

    def start_read(self, t_ps, addr, nbytes, done):
        """Start a read at ``t_ps``; ``done(t_done_ps, data)`` receives its result (``data``
        is ``None`` if the bus refused it).

        Synchronous by default: :meth:`read`, then ``done``, before returning.
        """
        t_done, data = self.read(t_ps, addr, nbytes)
        done(t_done, data)

    def start_write(self, t_ps, addr, data, done=None):
        """Start a write at ``t_ps``; return when the device has handed the data over (its
        receive buffer may drain then); ``done(t_visible_ps)`` receives when the data is
        visible to the host.

        Synchronous by default: :meth:`write`, whose time is both, then ``done``.
        """
        t_done = self.write(t_ps, addr, data)
        if done is not None:
            done(t_done)
        return t_done
