"""MPI collectives on the point-to-point model: ``MPI_Bcast`` and ``MPI_Allgather`` as MPICH and
MVAPICH2 2.0 run them between nodes, written on :class:`~peach2.sim.mpi.Rank`'s calls.

- :func:`bcast`: binomial tree (``MPIR_Bcast_binomial``), any number of ranks;
- :func:`allgather`: recursive doubling (``MPIR_Allgather_RD_MV2``), powers of two;
- :func:`knomial_bcast`, :func:`pipelined_bcast`, :func:`scatter_ring_bcast`: MVAPICH2's own
  broadcasts (``mv2_bcast.py``);
- :func:`mv2_bcast`: the one MVAPICH2's tuning table picks per process count and size, and
  :func:`select_bcast`, the pick (``tuning.py``);
- :func:`naive_cuda_bcast`, :func:`naive_cuda_allgather`: the same on GPU buffers staged
  through host memory, as MVAPICH2's CUDA builds run them (``staged.py``);
- :func:`one_hop`, :func:`collective_time`: times on a fresh world (``times.py``).

They are used inside rank programs: ``yield from bcast(rank, buf, count, root)``.  Their
messages travel in the collective context (:data:`~peach2.sim.mpi.COLL`), so user messages in
flight never match them.  Sources: MPICH's bcast.c / allgather.c; Thakur, Rabenseifner and
Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005.

What is simplified: the allgather is recursive doubling at every size (MVAPICH2 switches to a
ring for large totals); one rank per node, so no shared-memory steps; ``bcast``,
``allgather`` and ``mv2_bcast`` send GPU buffers message by message through the point-to-point
protocols of :mod:`peach2.sim.mpi.protocol`, the ``naive_cuda_*`` ones stage them whole.  See docs/mpi.md.

``python -m peach2.sim.mpi.collective`` prints the table of times in docs/mpi.md.
"""

from .algorithms import ALLGATHER_TAG, BCAST_TAG, allgather, bcast
from .mv2_bcast import knomial_bcast, knomial_tree, pipelined_bcast, scatter_ring_bcast
from .staged import naive_cuda_allgather, naive_cuda_bcast
from .times import collective_time, one_hop
from .tuning import BCAST_ALGORITHMS, BCAST_TUNING, mv2_bcast, select_bcast

__all__ = ["bcast", "allgather", "BCAST_TAG", "ALLGATHER_TAG", "one_hop", "collective_time",
           "knomial_bcast", "knomial_tree", "pipelined_bcast", "scatter_ring_bcast",
           "mv2_bcast", "select_bcast", "BCAST_TUNING", "BCAST_ALGORITHMS",
           "naive_cuda_bcast", "naive_cuda_allgather"]
