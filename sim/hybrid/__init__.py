"""TCA/InfiniBand hybrid communication on the co-simulated machine: TCA inside a group of
nodes, MPI over InfiniBand across groups ("TCA/InfiniBand hybrid communication in
XcalableACC", sections 5-6).  See ``docs/hybrid.md``.

- :class:`Groups`: the TCA groups (sub-clusters, or 000 Figure 11's virtual split of one);
- :func:`broadcast`, :func:`allgather`: each over ``tca``, ``mpi`` or ``hybrid``, as phases;
- :func:`halo`: Himeno's halo exchange over the same three (:func:`halo_groups` maps its grid,
  :class:`PackKernel` times MPI's pack and unpack);
- :func:`run_collective`: runs one on a started :class:`~peach2.sim.system.MachineSim`;
- :mod:`.launch`: ``python -m peach2.sim.hybrid.launch`` (one process or one rank each).
"""

from .algorithms import NETWORKS, Hybrid, MpiPhase, Overlap, TcaPhase, allgather, broadcast
from .context import Context
from .groups import Groups
from .halo import halo, halo_grid, halo_groups, himeno_array
from .pack import PackKernel
from .runner import run_collective

__all__ = ["Groups", "Hybrid", "TcaPhase", "MpiPhase", "Overlap", "NETWORKS", "broadcast",
           "allgather", "halo", "halo_grid", "halo_groups", "himeno_array", "PackKernel",
           "Context", "run_collective"]
