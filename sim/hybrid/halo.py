"""Himeno's halo exchange over TCA, over MPI with pack/unpack, and hybrid (TCA for ``j``, MPI
for ``i``): "TCA/InfiniBand hybrid communication in XcalableACC", sections 4, 5.2-5.3, 6.1.

The array ``a[i][j][k]`` (C order, ``float`` elements as Himeno's ``p``) of ``Ni x Nj x Nk`` is
divided over a ``Pi x Pj`` process grid (``k`` not divided, as 000's runs); rank
``x * Pj + y`` (global node ``g``) holds block ``(x, y)`` with one halo plane on each side in
``i`` and ``j`` (:class:`~peach2.sim.collectives.HaloGrid`).  Planes:

- ``i`` neighbours exchange a ``jk`` plane: one contiguous run (Block);
- ``j`` neighbours exchange an ``ik`` plane: ``Ni/Pi`` runs of ``Nk`` elements, one every
  ``(Nj/Pj + 2) * Nk`` elements (Block Stride).

The three networks (``network``):

========  ===================================================================================
tca       both directions by PEACH2 DMA: one chain per node, ``i`` planes as one burst, ``j``
          planes as one block-stride descriptor each, no pack; pairwise order per dimension so
          that no node receives from two PEACH2s at once (000 section 5.3)
mpi       MVAPICH2-GDR point to point: ``i`` planes sent straight from the array (``isend`` /
          ``irecv`` at the plane's offset); ``j`` planes packed by a GPU kernel into a
          contiguous buffer, sent, and unpacked by a kernel at the receiver (:class:`.PackKernel`)
hybrid    000's choice (sections 5.2, 6.1): ``i`` (Block) over MPI, across groups; ``j`` (Block
          Stride) over TCA inside the group, pairwise, no pack; both started at once and
          waited for together (``reflect_do``: ``MPI_Startall``, ``tcaDMAStart``)
========  ===================================================================================

The grid is mapped so that a group is one row of it: the ``Pj`` nodes of row ``x`` (``j``
neighbours) are group ``x``, and ``i`` neighbours are in different groups
(:func:`halo_groups`).  Nodes beyond ``Pi * Pj`` sit the exchange out.

For ``mpi`` the buffer holds, after the local array, four pack slots of one ``ik`` plane each:
``[sent to -j | sent to +j | received from -j | received from +j]``; they are checked too.
"""

import random
from array import array

from peach2.sim.collectives import HaloGrid, halo_exchange, halo_local, halo_reference

from .algorithms import NETWORKS, Hybrid, MpiPhase, Overlap, TcaPhase, _check
from .groups import Groups
from .pack import PackKernel

__all__ = ["SIZES", "ELEM", "HALO_TAG", "halo", "halo_grid", "halo_groups", "himeno_array",
           "plane_bytes", "put_plane"]

#: Himeno's problem sizes (i, j, k) that 000 section 6.1 runs.
SIZES = {"small": (64, 64, 128), "middle": (128, 128, 256)}
#: Bytes per element: Himeno's arrays are ``float``.
ELEM = 4
#: First tag of the halo's messages: ``HALO_TAG + 2 * dim + (the sender's step > 0)``.
HALO_TAG = 40


def halo_grid(size):
    """The :class:`~peach2.sim.collectives.HaloGrid` of ``{"dims": (Ni, Nj, Nk), "grid":
    (Pi, Pj), "elem": bytes}`` (``elem`` defaults to :data:`ELEM`)."""
    return HaloGrid.box(size["dims"], *size["grid"], elem=size.get("elem", ELEM))


def himeno_array(dims, seed, elem=ELEM):
    """A global ``Ni x Nj x Nk`` array of random ``float`` values in [0, 1) (``elem`` 4) or
    random bytes (other ``elem``), drawn from ``seed``.  Random values, not Himeno's initial
    ``p`` (which depends on ``i`` only), so that a plane sent to the wrong place shows."""
    n = dims[0] * dims[1] * dims[2]
    rng = random.Random(f"himeno:{seed}:{dims}")
    if elem == 4:
        return array("f", (rng.random() for _ in range(n))).tobytes()
    return rng.randbytes(n * elem)


def _runs(grid, dim, index):
    """``(offset, length)`` of every contiguous run of plane ``index`` along ``dim`` (0:
    ``jk``, one run; 1: ``ik``, ``ni`` runs one local row apart) in the local array."""
    off, length, count, gap = grid.plane(dim, index)
    return [(off + r * (length + gap), length) for r in range(count)]


def plane_bytes(grid, local, dim, index):
    """The bytes of plane ``index`` along ``dim`` (0: ``jk``, 1: ``ik``; inner part) of a
    local array ``local``, in order: what a pack kernel writes into its contiguous buffer."""
    return b"".join(local[at:at + n] for at, n in _runs(grid, dim, index))


def put_plane(grid, local, dim, index, data):
    """Write ``data`` (a packed plane) into plane ``index`` along ``dim`` of ``local``
    (a bytearray): what an unpack kernel does."""
    runs = _runs(grid, dim, index)
    if len(data) != sum(n for _, n in runs):
        raise ValueError(f"a plane of {len(runs)} x {runs[0][1]} bytes, not {len(data)}")
    done = 0
    for at, n in runs:
        local[at:at + n] = data[done:done + n]
        done += n


def _fits(grid, plan):
    """The grid's process count; ``ValueError`` when the machine has fewer nodes."""
    p = grid.px * grid.py
    if p > plan.n_nodes:
        raise ValueError(f"a {grid.px} x {grid.py} grid needs {p} nodes; the machine has "
                         f"{plan.n_nodes}")
    return p


def halo_groups(plan, grid, network):
    """The :class:`.Groups` a halo exchange of ``grid`` runs with on ``plan``: one group for
    ``tca`` and ``mpi``, one row of the grid (``Pj`` nodes) per group for ``hybrid`` (a
    sub-cluster split virtually when it holds more than one row, as 000 Figure 11)."""
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, not {network!r}")
    _fits(grid, plan)
    if network == "hybrid":
        if plan.n % grid.py:
            raise ValueError(f"hybrid: a row of the grid ({grid.py} nodes, the j neighbours) "
                             f"must fill a TCA group, and {grid.py} does not divide the "
                             f"sub-cluster's {plan.n} nodes")
        return Groups(plan, plan.n // grid.py)
    if network == "tca" and plan.subclusters != 1:
        raise ValueError(f"TCA alone reaches one sub-cluster; this machine has "
                         f"{plan.subclusters}: use network='hybrid' or 'mpi'")
    return Groups(plan, 1)


def halo(groups, grid, whole, *, network="hybrid", pack=PackKernel(), seed=1):
    """The halo exchange of ``grid`` (a :class:`~peach2.sim.collectives.HaloGrid`), the global
    array ``whole`` (``Ni x Nj x Nk`` elements), over ``network``; ``groups`` as
    :func:`halo_groups` gives them.  The halos start as noise drawn from ``seed``."""
    _check(network, groups, "a halo exchange")
    p = _fits(grid, groups.plan)
    if network == "hybrid" and groups.size != grid.py:
        raise ValueError(f"hybrid: each group must be one row of the grid ({grid.py} nodes), "
                         f"not {groups.size}: use halo_groups()")
    a, b, c = grid.dims
    if len(whole) != a * b * c * grid.elem:
        raise ValueError(f"the global array must have {a * b * c * grid.elem} bytes, not "
                         f"{len(whole)}")
    local = grid.local_bytes
    plane_j = grid.ni * grid.nk * grid.elem
    slots = 4 * plane_j if network == "mpi" else 0
    nbytes = local + slots
    cache = {}

    def fill(g):
        return random.Random(f"halo-fill:{seed}:{g}").randbytes(local)

    def initial(g):
        if ("in", g) not in cache:
            cache[("in", g)] = (halo_local(grid, whole, g, fill(g)) if g < p else fill(g)) \
                + bytes(slots)
        return cache[("in", g)]

    def expected(g):
        before = initial(g)[:local]
        if g >= p:
            return before + bytes(slots)
        after = halo_reference(grid, whole, g, before)
        packed = [bytes(plane_j)] * 4
        for side, step in enumerate((-1, 1)):
            if grid.neighbour(g, 1, step) is not None:
                src, _ = grid.send(1, step)
                packed[side] = plane_bytes(grid, after, 1, src)
                packed[2 + side] = plane_bytes(grid, after, 1, grid.send(1, -step)[1])
        return after + (b"".join(packed) if slots else b"")

    def by_mpi(dims):
        def program(ctx, rank):
            me = rank.rank
            sends = [(d, s, grid.neighbour(me, d, s)) for d in dims for s in (-1, 1)] \
                if me < p else []
            sends = [x for x in sends if x[2] is not None]
            return _exchange(rank, ctx.buffer(me), grid, sends, pack, local) if sends else None
        return program

    def tca_all(ctx, k):
        return halo_exchange(ctx.mem(k), grid, groups.local(k)[:p], ctx.offset,
                             window=ctx.window) if p > 1 else None

    def tca_row(ctx, k):
        if k >= grid.px or grid.py == 1:
            return None
        row = HaloGrid.box((grid.ni, grid.dims[1], grid.nk), 1, grid.py, grid.elem)
        return halo_exchange(ctx.mem(k), row, groups.local(k), ctx.offset, window=ctx.window)

    phases = {"tca": [TcaPhase("TCA halo: i block, j block-stride, pairwise", tca_all)],
              "mpi": [MpiPhase("MPI halo: i direct, j packed", by_mpi((0, 1)))],
              "hybrid": [Overlap("i over MPI with j over TCA", [
                  MpiPhase("MPI i planes (block)", by_mpi((0,))),
                  TcaPhase("TCA j planes (block-stride, pairwise)", tca_row)])]}[network]
    plane_i = grid.nj * grid.nk * grid.elem
    i_bytes = sum(plane_i for g in range(p) for s in (-1, 1) if grid.neighbour(g, 0, s) is not None)
    j_bytes = sum(plane_j for g in range(p) for s in (-1, 1) if grid.neighbour(g, 1, s) is not None)
    return Hybrid("halo", network, nbytes, phases, initial=initial, expected=expected,
                  info={"dims": list(grid.dims), "grid": [grid.px, grid.py],
                        "elem": grid.elem, "i_plane": plane_i, "j_plane": plane_j,
                        "block_stride_share": j_bytes / max(1, i_bytes + j_bytes),
                        "pack_ps": pack.time_ps([plane_j]) if network == "mpi" else 0})


def _tag(dim, step):
    return HALO_TAG + 2 * dim + (step > 0)


def _exchange(rank, buf, grid, sends, pack, local):
    """One rank's MPI part: pack its ``j`` planes, post every receive, then every send, wait
    for all (``MPI_Startall``, ``MPI_Waitall``), unpack.  ``sends``: ``(dim, step, peer)``."""
    plane_j = grid.ni * grid.nk * grid.elem

    def slot(received, step):
        return local + (2 * received + (step > 0)) * plane_j

    strided = [(d, s, nb) for d, s, nb in sends if d == 1]
    if strided:
        for _, step, _ in strided:
            buf.write(_gather(buf, grid, 1, grid.send(1, step)[0]), slot(False, step))
        yield rank.elapse(pack.time_ps([plane_j] * len(strided)))
    reqs = []
    for dim, step, peer in sends:
        if dim == 1:
            reqs.append(rank.irecv(buf, peer, _tag(dim, -step), plane_j, slot(True, step)))
        else:
            off, length, _, _ = grid.plane(0, grid.send(0, -step)[1])
            reqs.append(rank.irecv(buf, peer, _tag(dim, -step), length, off))
    for dim, step, peer in sends:
        if dim == 1:
            reqs.append(rank.isend(buf, peer, _tag(dim, step), plane_j, slot(False, step)))
        else:
            off, length, _, _ = grid.plane(0, grid.send(0, step)[0])
            reqs.append(rank.isend(buf, peer, _tag(dim, step), length, off))
    yield rank.waitall(reqs)
    if strided:
        for _, step, _ in strided:
            _scatter(buf, grid, 1, grid.send(1, -step)[1], buf.read(slot(True, step), plane_j))
        yield rank.elapse(pack.time_ps([plane_j] * len(strided)))


def _gather(buf, grid, dim, index):
    """:func:`plane_bytes` of the rank's buffer (the pack kernel reads GPU memory)."""
    return b"".join(buf.read(at, n) for at, n in _runs(grid, dim, index))


def _scatter(buf, grid, dim, index, data):
    """:func:`put_plane` into the rank's buffer (the unpack kernel writes GPU memory)."""
    done = 0
    for at, n in _runs(grid, dim, index):
        buf.write(data[done:done + n], at)
        done += n
