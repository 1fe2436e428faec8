"""MVAPICH2's "naive" CUDA collectives: a GPU buffer staged through host memory, the host
algorithm run on the copy, the result copied back.

MVAPICH2's CUDA builds (MVAPICH2-GDR too) do this for small and medium collectives on device
buffers when ``MV2_CUDA_USE_NAIVE`` is set (default 1): ``MPIR_Bcast_MV2`` and
``MPIR_Allgather_MV2`` call ``cuda_stage_alloc`` (``cudaMemcpy`` of the GPU buffer into a
registered host buffer), run the host algorithm, and ``cuda_stage_free`` (``cudaMemcpy`` back)
while the message is at most ``rdma_cuda_bcast_naive_limit`` (2 MiB) or, per rank's block,
``rdma_cuda_allgather_naive_limit`` (1 MiB) (``src/mpi/coll/bcast_osu.c``, ``allgather_osu.c``;
the limits as ``rdma_param.c`` of the 2.x source read sets them; 2.0's own values were not
available).  So a collective on GPU buffers moves host-to-host over InfiniBand (1.4 us a hop,
the full link) instead of GPUDirect RDMA message by message, and pays two ``cudaMemcpy``.

Modelled: every rank copies the window into a host buffer of its socket (the broadcast: every
rank, as ``cuda_stage_alloc`` copies the send buffer wherever it is; the allgather: its own
block), runs :func:`~.tuning.mv2_bcast` / :func:`~.algorithms.allgather` on it, and copies the
result back (the broadcast: every rank but the root; the allgather: all ``p`` blocks).  Each
copy is a synchronous ``cudaMemcpy`` on the GPU's copy engine
(:meth:`peach2.sim.node.Node.copy`; the CPU waits).  Host buffers, one rank, zero bytes or a
message above the limit: the unstaged algorithm.
"""

from .algorithms import _check, _check_held, _recursive_doubling, allgather, check_bcast
from .tuning import BCAST_TUNING, mv2_bcast

__all__ = ["naive_cuda_bcast", "naive_cuda_allgather", "MV2_CUDA_USE_NAIVE",
           "MV2_CUDA_BCAST_NAIVE_LIMIT", "MV2_CUDA_ALLGATHER_NAIVE_LIMIT"]

#: MVAPICH2's defaults (``rdma_cuda_use_naive``, ``rdma_cuda_bcast_naive_limit``,
#: ``rdma_cuda_allgather_naive_limit`` in rdma_param.c).
MV2_CUDA_USE_NAIVE = True
MV2_CUDA_BCAST_NAIVE_LIMIT = 2 << 20
MV2_CUDA_ALLGATHER_NAIVE_LIMIT = 1 << 20


def _copy(rank, dst, src, nbytes):
    """A synchronous ``cudaMemcpy`` of ``nbytes`` from address ``src`` to ``dst``: the CPU
    launches it (``copy_launch_ps``), then the engine moves the bytes.  They are read when the
    launch is over, not at the call: in a hybrid collective the last TCA writes into the GPU
    may still be on the GPU's link when the CPU sees their completion flag in host memory, and
    the launch's doorbell travels behind them (PCIe keeps posted writes in order on a link)."""
    launched = rank.now + rank.node.params.copy_launch_ps
    rank.block_cpu(launched)
    yield rank.elapse(launched - rank.now)
    # the engine starts when the launch is over, whenever this rank's CPU comes back to it
    done = rank.node.copy(launched, dst, src, nbytes, launched=True)
    rank.block_cpu(done)
    yield rank.elapse(max(0, done - rank.now))


def naive_cuda_bcast(rank, buf, count, root, offset=0, group=None, table=BCAST_TUNING,
                     naive=MV2_CUDA_USE_NAIVE, limit=MV2_CUDA_BCAST_NAIVE_LIMIT):
    """``MPI_Bcast`` as MVAPICH2's CUDA build runs it on ``buf``: staged through host memory
    up to ``limit`` bytes when ``buf`` is GPU memory and ``naive``, else :func:`mv2_bcast`.
    ``yield from`` it; arguments as :func:`~.algorithms.bcast`."""
    members = check_bcast(rank, buf, count, root, offset, group)
    if not naive or buf.gpu is None or count == 0 or len(members) == 1 or count > limit:
        return mv2_bcast(rank, buf, count, root, offset, group, table)
    return _bcast(rank, buf, count, root, offset, group, table, members)


def _bcast(rank, buf, count, root, offset, group, table, members):
    host = rank.alloc(count, "host")
    yield from _copy(rank, host.addr, buf.addr + offset, count)
    yield from mv2_bcast(rank, host, count, root, 0, group, table)
    if members.index(rank.rank) != root:
        yield from _copy(rank, buf.addr + offset, host.addr, count)
    rank.free(host)


def naive_cuda_allgather(rank, buf, block, offset=0, naive=MV2_CUDA_USE_NAIVE,
                         limit=MV2_CUDA_ALLGATHER_NAIVE_LIMIT, held=1):
    """``MPI_Allgather`` (in place) as MVAPICH2's CUDA build runs it: staged through host
    memory up to ``limit`` bytes per block when ``buf`` is GPU memory and ``naive``, else
    :func:`~.algorithms.allgather`.  ``yield from`` it; arguments as that function's
    (``held``: the blocks of its aligned group every rank holds already, all copied to the
    host in one ``cudaMemcpy``)."""
    gen = allgather(rank, buf, block, offset, held)    # checks everything, sends nothing yet
    if not naive or buf.gpu is None or block == 0 or rank.size == 1 or block > limit:
        return gen
    gen.close()
    return _allgather(rank, buf, block, offset, held)


def _allgather(rank, buf, block, offset, held):
    _check_held(rank, held)
    p, me = rank.size, rank.rank
    host = rank.alloc(p * block, "host")
    _check(rank, host, 0, block, "block", p * block)
    first = (me & -held) * block
    yield from _copy(rank, host.addr + first, buf.addr + offset + first, held * block)
    yield from _recursive_doubling(rank, host, block, 0, held)
    yield from _copy(rank, buf.addr + offset, host.addr, p * block)
    rank.free(host)
