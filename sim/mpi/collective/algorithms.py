"""MPI_Bcast by a binomial tree and MPI_Allgather by recursive doubling, as MPICH writes them.

Both are rank-program building blocks: call them inside a rank program with ``yield from``::

    def program(rank):
        yield from bcast(rank, buf, count=4096, root=0)
        yield from allgather(rank, table, block=64)

Each function checks its arguments when called and raises :class:`~..errors.MPIError` before
anything is sent; it returns a generator that runs the algorithm on the rank's non-blocking
calls in the collective context :data:`~..request.COLL` (user messages never match its
messages, whatever their tag).  Every rank must make the same call with the same ``count`` /
``block``, ``root`` and ``offset``, as MPI requires; ranks that disagree get what MPI gives
(``MPI_ERR_TRUNCATE`` or a size mismatch, or a deadlock).

The algorithms follow MPICH's ``MPIR_Bcast_binomial`` (src/mpi/coll/bcast.c) and its
recursive-doubling allgather (allgather.c), which MVAPICH2 carries as
``MPIR_Bcast_binomial_MV2`` and ``MPIR_Allgather_RD_MV2``; both are described in
Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 19(1), 2005.
"""

from ..buffer import Buffer
from ..errors import ERR_BUFFER, ERR_COUNT, ERR_OTHER, ERR_RANK, ERR_ROOT, MPIError
from ..request import COLL

__all__ = ["bcast", "allgather", "check_bcast", "check_received", "BCAST_TAG", "ALLGATHER_TAG"]

#: MPICH's tags for the point-to-point messages of collectives; they travel in the collective
#: context, so user messages with the same tags never match them.
BCAST_TAG = 2           # MPIR_BCAST_TAG
ALLGATHER_TAG = 7       # MPIR_ALLGATHER_TAG


def bcast(rank, buf, count, root, offset=0, group=None):
    """Broadcast ``count`` bytes of ``buf`` at ``offset`` from ``root`` to every rank
    (``MPI_Bcast`` of ``MPI_BYTE``): ``yield from bcast(rank, buf, count, root)``.

    ``group``: the ranks of the communicator, in its order (default every rank, as
    ``MPI_COMM_WORLD``); ``root`` is then an index into it, and the rank must be a member.

    Binomial tree (``MPIR_Bcast_binomial``): with ``rel = (rank - root) mod p``, a rank receives
    from ``rel - mask`` for the lowest set bit ``mask`` of ``rel``, then sends, one blocking send
    after the other, to ``rel + m`` for every ``m = mask/2, mask/4, ..., 1`` with
    ``rel + m < p`` (the root starts from the lowest power of two ``>= p``).  Any ``p >= 1``;
    ``ceil(log2 p)`` steps.  Nothing is sent when ``count`` is 0 or ``p`` is 1 (MPICH returns at
    once).  A received size other than ``count`` raises ``MPI_ERR_OTHER`` (MPICH's
    ``collective_size_mismatch``).

    Raises ``MPI_ERR_ROOT`` for a root outside ``0..p-1``, ``MPI_ERR_COUNT`` for a negative
    count or offset or a range outside ``buf``, ``MPI_ERR_BUFFER`` for a buffer that is not a
    live one of this rank, ``MPI_ERR_OTHER`` for GPU memory without ``MV2_USE_CUDA``.
    """
    members = check_bcast(rank, buf, count, root, offset, group)
    return _binomial(rank, buf, count, root, offset, members)


def check_bcast(rank, buf, count, root, offset, group):
    """Refuse a broadcast's bad arguments as :func:`bcast` documents; return the
    communicator's ranks in order."""
    members = _members(rank, group)
    p = len(members)
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < p:
        raise MPIError(ERR_ROOT, f"rank {rank.rank}: root = {root!r} is not a rank of this "
                       f"communicator (0..{p - 1})")
    _check(rank, buf, offset, count, "count", count)
    return members


def _members(rank, group):
    """The communicator's ranks: every rank, or ``group`` checked (distinct ranks of the
    world, this rank among them)."""
    if group is None:
        return list(range(rank.size))
    members = list(group)
    if len(set(members)) != len(members) or any(
            isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < rank.size
            for g in members):
        raise MPIError(ERR_RANK, f"rank {rank.rank}: group {members} must be distinct ranks "
                       f"of this world (0..{rank.size - 1})")
    if rank.rank not in members:
        raise MPIError(ERR_RANK, f"rank {rank.rank} is not a member of group {members}")
    return members


def allgather(rank, buf, block, offset=0, held=1):
    """Gather every rank's ``block`` bytes into every rank (``MPI_Allgather`` of ``MPI_BYTE``
    with ``MPI_IN_PLACE``): ``yield from allgather(rank, buf, block)``.

    Rank ``r``'s block is at ``offset + r*block`` of ``buf``; afterwards every rank holds all
    ``p`` blocks there.  Recursive doubling (MVAPICH2's ``MPIR_Allgather_RD_MV2``): in step
    ``s`` a rank exchanges the ``2**s`` blocks it holds with rank ``r xor 2**s`` (irecv, isend,
    waitall: ``MPIC_Sendrecv``), so ``log2 p`` steps.  Powers of two only: for other ``p``
    recursive doubling needs extra steps, and MPICH uses Bruck's algorithm there (Thakur et
    al.); this model refuses them.  Nothing is sent when ``block`` is 0 or ``p`` is 1.

    ``held`` (a power of two dividing ``p``): every rank already holds the ``held`` blocks of
    its aligned group (ranks ``r & -held`` on), as after the first ``log2 held`` steps, so the
    steps start at distance ``held`` (a hybrid Allgather whose groups gathered over TCA).

    Raises ``MPI_ERR_OTHER`` when ``p`` is not a power of two, ``MPI_ERR_COUNT`` for a negative
    block or offset or when ``p*block`` bytes at ``offset`` leave ``buf``, ``MPI_ERR_BUFFER``
    and ``MPI_ERR_OTHER`` as :func:`bcast` does.
    """
    p = rank.size
    if p & (p - 1):
        raise MPIError(ERR_OTHER, f"rank {rank.rank}: recursive-doubling allgather needs a "
                       f"power-of-two number of ranks, not {p} (MPICH uses Bruck's algorithm "
                       f"there, which this model does not have)")
    _check_held(rank, held)
    total = p * block if isinstance(block, int) and not isinstance(block, bool) else block
    _check(rank, buf, offset, block, "block", total)
    return _recursive_doubling(rank, buf, block, offset, held)


def _check_held(rank, held):
    p = rank.size
    if isinstance(held, bool) or not isinstance(held, int) or held < 1 or held & (held - 1) \
            or p % held:
        raise MPIError(ERR_OTHER, f"rank {rank.rank}: held must be a power of two dividing "
                       f"the {p} ranks, not {held!r}")


def _check(rank, buf, offset, count, name, nbytes):
    """Refuse what the first send or receive would refuse, before anything is sent."""
    for what, value in ((name, count), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise MPIError(ERR_COUNT, f"rank {rank.rank}: {what} must be a non-negative "
                           f"integer, not {value!r}")
    if not isinstance(buf, Buffer) or buf.freed or buf.rank != rank.rank:
        raise MPIError(ERR_BUFFER, f"rank {rank.rank}: {buf!r} is not a live buffer of this "
                       f"rank")
    if offset + nbytes > buf.length:
        raise MPIError(ERR_COUNT, f"rank {rank.rank}: {nbytes} bytes at offset {offset} leave "
                       f"{buf!r}")
    if buf.gpu is not None and not rank.params.MV2_USE_CUDA:
        raise MPIError(ERR_OTHER, f"{buf!r} is GPU memory but MV2_USE_CUDA is off")


def check_received(rank, status, count):
    """A Broadcast's receive must bring ``count`` bytes: else ``MPI_ERR_OTHER`` (MPICH's
    ``collective_size_mismatch``), naming both ranks."""
    if status.count != count:
        raise MPIError(ERR_OTHER, f"rank {rank.rank}: bcast received {status.count} bytes "
                       f"from rank {status.source}, expected {count} (the ranks disagree on "
                       f"the count)")


def _binomial(rank, buf, count, root, offset, members):
    p, me = len(members), members.index(rank.rank)
    if p == 1 or count == 0:
        return
    rel = (me - root) % p
    mask = 1
    while mask < p:
        if rel & mask:
            status = yield rank.recv(buf, members[(me - mask) % p], BCAST_TAG, count, offset,
                                     context=COLL)
            check_received(rank, status, count)
            break
        mask <<= 1
    mask >>= 1
    while mask:
        if rel + mask < p:
            yield rank.send(buf, members[(me + mask) % p], BCAST_TAG, count, offset,
                            context=COLL)
        mask >>= 1


def _recursive_doubling(rank, buf, block, offset, held=1):
    p, me = rank.size, rank.rank
    if p == 1 or block == 0:
        return
    mask = held
    while mask < p:
        peer = me ^ mask
        mine, theirs = me & -mask, peer & -mask      # first block each side holds
        yield rank.waitall([
            rank.irecv(buf, peer, ALLGATHER_TAG, mask * block, offset + theirs * block,
                       context=COLL),
            rank.isend(buf, peer, ALLGATHER_TAG, mask * block, offset + mine * block,
                       context=COLL)])
        mask <<= 1
