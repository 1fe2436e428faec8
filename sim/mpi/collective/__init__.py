"""MPI collectives on the point-to-point model: ``MPI_Bcast`` and ``MPI_Allgather`` as MPICH and
MVAPICH2 2.0 run them between nodes, written on :class:`~peach2.sim.mpi.Rank`'s calls.

- :func:`bcast`: binomial tree (``MPIR_Bcast_binomial``), any number of ranks;
- :func:`allgather`: recursive doubling (``MPIR_Allgather_RD_MV2``), powers of two;
- :func:`one_hop`, :func:`collective_time`: times on a fresh world (``times.py``).

They are used inside rank programs: ``yield from bcast(rank, buf, count, root)``.  Their
messages travel in the collective context (:data:`~peach2.sim.mpi.COLL`), so user messages in
flight never match them.  Sources: MPICH's bcast.c / allgather.c; Thakur, Rabenseifner and
Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005.

What is simplified: MVAPICH2 chooses among several algorithms by message size and process count
(e.g. scatter + allgather broadcast for large messages, ring allgather for large totals,
shared-memory steps within a node) and MVAPICH2-GDR may stage GPU buffers of collectives through
host memory; this model always runs these two algorithms, over the point-to-point protocols of
:mod:`peach2.sim.mpi.protocol` (which do their own GPU staging).  See docs/mpi.md.

``python -m peach2.sim.mpi.collective`` prints the table of times in docs/mpi.md.
"""

from .algorithms import ALLGATHER_TAG, BCAST_TAG, allgather, bcast
from .times import collective_time, one_hop

__all__ = ["bcast", "allgather", "BCAST_TAG", "ALLGATHER_TAG", "one_hop", "collective_time"]
