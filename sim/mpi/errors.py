"""MPI error classes, named after MPI's (``MPI_ERR_TRUNCATE`` -> :data:`ERR_TRUNCATE`, ...).

Bad input raises :class:`MPIError` with one of these codes and a sentence saying what was
wrong.  Errors found when a call is made (an unknown rank, a buffer this rank never allocated)
raise at the call; errors found when a message is matched (a receive buffer too small) complete
the request in error, and waiting on it raises.  A truncated message is not consumed: it stays
queued for a receive that can hold it, so nothing is lost.
"""

__all__ = ["MPIError", "Deadlock", "ERR_BUFFER", "ERR_COUNT", "ERR_RANK", "ERR_ROOT", "ERR_TAG",
           "ERR_TRUNCATE", "ERR_REQUEST", "ERR_OTHER"]

ERR_BUFFER = "MPI_ERR_BUFFER"        # not a buffer of this rank (unknown, freed, unregistered)
ERR_COUNT = "MPI_ERR_COUNT"          # count/offset outside the buffer
ERR_RANK = "MPI_ERR_RANK"            # no such rank
ERR_ROOT = "MPI_ERR_ROOT"            # a collective's root is no rank
ERR_TAG = "MPI_ERR_TAG"              # tag outside 0..TAG_UB (or ANY_TAG on a send)
ERR_TRUNCATE = "MPI_ERR_TRUNCATE"    # message longer than the receive buffer
ERR_REQUEST = "MPI_ERR_REQUEST"      # not a request of this rank
ERR_OTHER = "MPI_ERR_OTHER"          # e.g. a GPU buffer without MV2_USE_CUDA


class MPIError(Exception):
    """An MPI call failed.

    Members
    -------
    code : str
        One of the ``ERR_*`` names, e.g. ``"MPI_ERR_TRUNCATE"``.
    """

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code


class Deadlock(MPIError):
    """Every event has run and some rank still waits for a request that cannot complete.

    Members
    -------
    blocked : dict of int to str
        For each waiting rank, what it waits for.
    """

    def __init__(self, blocked):
        lines = "; ".join(f"rank {r}: {what}" for r, what in sorted(blocked.items()))
        super().__init__(ERR_OTHER, f"deadlock: nothing left to simulate, yet {lines}")
        self.blocked = dict(blocked)
