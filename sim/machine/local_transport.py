"""All partitions in one process, stepped window by window as the ranks of an MPI run are."""

import pickle

from .transport import Transport

__all__ = ["LocalTransport"]


class LocalTransport(Transport):
    """One rank holding every partition; the exchange is a hand-over in memory.

    Parameters
    ----------
    copy : bool
        Pass the crossings through :mod:`pickle` as :class:`MpiTransport` does (default), so
        a payload reaches its receiver as a copy in both and a sender that keeps changing its
        payload object cannot make one process and N ranks disagree.  ``False`` hands over the
        objects themselves (faster; payloads must then be left alone once sent).
    """

    rank = 0
    size = 1

    def __init__(self, copy=True):
        self.copy = bool(copy)

    def exchange(self, outgoing):
        """Return ``outgoing`` (one rank sends to itself), copied if :attr:`copy`."""
        if len(outgoing) != 1:
            raise ValueError(f"one rank exchanges one list, not {len(outgoing)}")
        if self.copy:
            return [pickle.loads(pickle.dumps(outgoing[0], pickle.HIGHEST_PROTOCOL))]
        return list(outgoing)

    def allgather(self, value):
        """Return ``[value]``."""
        return [value]
