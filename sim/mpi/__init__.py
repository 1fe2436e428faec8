"""MPI over InfiniBand as MVAPICH2-GDR 2.0 runs it on HA-PACS/TCA (Odajima et al., 000, sec. 4).

Pure Python on the event engine of ``peach2.sim.infiniband``'s fabric; integer picoseconds,
deterministic; imports only the standard library, ``peach2.sim.infiniband`` and
``peach2.sim.node``.  See ``docs/mpi.md``.

- :class:`World`: ranks (one per node) on one switch; runs rank programs (generators);
- :class:`Rank`: ``alloc``, ``isend``/``irecv``/``wait``/``waitall``/``send``/``recv``;
- :class:`MPIParams`: protocol thresholds named after MVAPICH2's variables, CPU overheads;
- :func:`preset` / :data:`PRESETS`: ``MV2GDR``, ``MV2GDR-QPI``, ``MV2GDR-QPI-Tuned``,
  ``MV2-staged``;
- :class:`MPIError` (``code`` ``MPI_ERR_TRUNCATE``, ``MPI_ERR_RANK``, ``MPI_ERR_BUFFER``, ...),
  :class:`Deadlock`;
- :func:`bcast` (binomial tree), :func:`allgather` (recursive doubling): collectives for rank
  programs (``yield from bcast(rank, buf, count, root)``), in their own context :data:`COLL`
  apart from the user's point-to-point :data:`P2P` (sub-package ``collective``).

``python -m peach2.sim.mpi.pingpong`` prints the calibration and the ping-pong table,
``python -m peach2.sim.mpi.collective`` the collectives' times.
"""

from .buffer import Buffer
from .collective import allgather, bcast
from .errors import (
                     ERR_BUFFER,
                     ERR_COUNT,
                     ERR_OTHER,
                     ERR_RANK,
                     ERR_REQUEST,
                     ERR_ROOT,
                     ERR_TAG,
                     ERR_TRUNCATE,
                     Deadlock,
                     MPIError,
)
from .params import TAG_UB, MPIParams
from .preset import PRESETS, Preset, preset
from .rank import Rank
from .request import ANY_SOURCE, ANY_TAG, COLL, P2P, Request, Status
from .wait import Wait
from .world import World

__all__ = ["World", "Rank", "Buffer", "Request", "Status", "Wait", "MPIParams", "Preset",
           "PRESETS", "preset", "MPIError", "Deadlock", "ANY_SOURCE", "ANY_TAG", "TAG_UB",
           "P2P", "COLL", "bcast", "allgather", "ERR_BUFFER", "ERR_COUNT", "ERR_OTHER",
           "ERR_RANK", "ERR_REQUEST", "ERR_ROOT", "ERR_TAG", "ERR_TRUNCATE"]
