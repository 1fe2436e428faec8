"""Halo exchange of a distributed 3-D array over a 2-D process grid, with block-stride DMA.

000 section 4 (Figure 5) and 5.2-5.3: the array ``a[i][j][k]`` (``k`` fastest, 8-byte elements
by default) of ``N^3`` elements, or ``Ni x Nj x Nk`` (``HaloGrid.box``: Himeno's sizes, 000
section 6.1), is divided over ``px x py`` processes along ``i`` and ``j`` (``k`` is not divided,
as 000's Himeno runs); each process holds ``(Ni/px + 2) x (Nj/py + 2) x Nk`` elements, its part
plus one halo plane on each side in ``i`` and ``j``.  Exchanging halos (non-periodic, as
Himeno):

- along ``i``: a ``jk`` plane (``i`` constant, inner ``j``, all ``k``) is one contiguous block
  of ``Nj/py * Nk`` elements: a plain descriptor (Block);
- along ``j``: an ``ik`` plane (``j`` constant) is ``Ni/px`` bursts of ``Nk`` elements, one
  every ``(Nj/py + 2) * Nk`` elements: one block-stride descriptor (Block Stride), sent straight from
  the array into the neighbour's array, no packing (000 section 4: "Chained DMA を用いることで,
  Pack/Unpack が必要なくなり").

Order (000 section 5.3, ``reflect_init``): two PEACH2s sending into one at once collide and
lose bandwidth, so nodes are *paired per dimension* and each node's one chain holds its
descriptors in phase order: phase 0 pairs coordinates (0,1), (2,3), ... along ``i``; phase 1
pairs (1,2), (3,4), ... along ``i``; phases 2 and 3 the same along ``j``.  In each phase a
node receives from its partner alone.  The chains are not synchronised between nodes (one DMA
start per node, as 000), so the phases stay apart as long as the nodes keep pace;
``order="naive"`` (down, up along ``i``, then along ``j``, skipping missing neighbours) is the
comparison.  Every descriptor ends in a completion write into the receiver's flag for that
phase; a node is done when the flags of all its partners have landed.
"""

from dataclasses import dataclass

from peach2.sim.driver import memcpy

from .memory import Place
from .plan import FLAG, Collective, Program, Step

__all__ = ["HaloGrid", "halo_exchange", "halo_local", "halo_reference", "ORDERS"]

ORDERS = ("pairwise", "naive")
#: (dimension, pairing parity) of each phase, in chain order.
PHASES = ((0, 0), (0, 1), (1, 0), (1, 1))


@dataclass(frozen=True)
class HaloGrid:
    """An ``n^3`` array (or ``dims = (Ni, Nj, Nk)`` with ``Ni = n``: :meth:`box`) of
    ``elem``-byte elements over ``px x py`` processes (``i`` by ``px``, ``j`` by ``py``); rank
    ``x * py + y`` holds block ``(x, y)``.  A size that does not divide raises ``ValueError``."""
    n: int
    px: int
    py: int
    elem: int = 8
    dims: tuple = None

    def __post_init__(self):
        dims = (self.n,) * 3 if self.dims is None else tuple(self.dims)
        object.__setattr__(self, "dims", dims)
        for name, v in (("px", self.px), ("py", self.py), ("elem", self.elem)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        if len(dims) != 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1
                                 for d in dims) or dims[0] != self.n:
            raise ValueError(f"dims must be three positive integers (Ni, Nj, Nk) with Ni = n, "
                             f"not {self.dims!r}")
        if dims[0] % self.px or dims[1] % self.py:
            raise ValueError(f"the {dims[0]} x {dims[1]} x {dims[2]} array does not divide "
                             f"into {self.px} x {self.py} blocks along i and j")

    @classmethod
    def box(cls, dims, px, py, elem=8):
        """The ``Ni x Nj x Nk`` array ``dims`` over ``px x py`` processes."""
        dims = tuple(dims)
        if len(dims) != 3:
            raise ValueError(f"dims must be (Ni, Nj, Nk), not {dims!r}")
        return cls(dims[0], px, py, elem, dims)

    @property
    def ni(self):
        return self.dims[0] // self.px

    @property
    def nj(self):
        return self.dims[1] // self.py

    @property
    def nk(self):
        return self.dims[2]

    @property
    def shape(self):
        """Local array shape with halos: ``(ni + 2, nj + 2, nk)``."""
        return self.ni + 2, self.nj + 2, self.nk

    @property
    def local_bytes(self):
        a, b, c = self.shape
        return a * b * c * self.elem

    def offset(self, i, j, k=0):
        """Byte offset of local element ``(i, j, k)`` (halo indices 0 and ``ni+1``/``nj+1``)."""
        return ((i * (self.nj + 2) + j) * self.nk + k) * self.elem

    def coords(self, rank):
        return divmod(rank, self.py)

    def neighbour(self, rank, dim, step):
        """Rank ``step`` (+-1) away along ``dim`` (0: ``i``, 1: ``j``), or None at the edge."""
        c = list(self.coords(rank))
        c[dim] += step
        if not 0 <= c[dim] < (self.px, self.py)[dim]:
            return None
        return c[0] * self.py + c[1]

    def plane(self, dim, index):
        """``(offset, length, count, gap)`` of local plane ``index`` along ``dim`` (inner part)."""
        row = self.nk * self.elem
        if dim == 0:        # jk plane: contiguous
            return self.offset(index, 1), self.nj * row, 1, 0
        return self.offset(1, index), row, self.ni, (self.nj + 2) * row - row

    def send(self, dim, step):
        """``(source plane, destination plane)`` indices of a send ``step`` (+-1) along ``dim``:
        the last inner plane into the neighbour's halo on that side."""
        inner = (self.ni, self.nj)[dim]
        return (inner, 0) if step > 0 else (1, inner + 1)


def _phase_partner(grid, rank, dim, parity):
    c = grid.coords(rank)[dim]
    step = 1 if (c % 2 == parity) else -1
    return grid.neighbour(rank, dim, step), step


def _sends(grid, rank, order):
    """``[(phase, dim, step, partner)]`` of ``rank``'s sends in its chain's order."""
    if order == "pairwise":
        out = []
        for phase, (dim, parity) in enumerate(PHASES):
            partner, step = _phase_partner(grid, rank, dim, parity)
            if partner is not None:
                out.append((phase, dim, step, partner))
        return out
    if order == "naive":
        out = []
        for dim in (0, 1):
            for step in (-1, 1):
                partner = grid.neighbour(rank, dim, step)
                if partner is not None:
                    out.append((2 * dim + (step > 0), dim, step, partner))
        return out
    raise ValueError(f"order must be one of {ORDERS}, not {order!r}")


def halo_exchange(mem, grid, nodes, buf, *, window="host", order="pairwise", channel=0):
    """The halo exchange of ``grid`` among ``nodes`` (rank ``r`` on ``nodes[r]``), each node's
    local array at window offset ``buf``: one chain per node, a descriptor per neighbour."""
    if len(nodes) != grid.px * grid.py:
        raise ValueError(f"{len(nodes)} nodes for a {grid.px} x {grid.py} grid")
    flags0 = mem.symmetric(4 * len(PHASES))
    programs, flags, descriptors = [], [], 0
    for rank, node in enumerate(nodes):
        transfers = []
        for phase, dim, step, partner in _sends(grid, rank, order):
            src_i, dst_i = grid.send(dim, step)
            s_off, length, count, gap = grid.plane(dim, src_i)
            d_off = grid.plane(dim, dst_i)[0]
            span = (count - 1) * (length + gap) + length
            dst = nodes[partner]
            seq = (mem.tca(Place(dst, "host", flags0 + 4 * phase), 4), FLAG)
            src_a = mem.local(Place(node, window, buf + s_off), span)
            dst_a = mem.tca(Place(dst, window, buf + d_off), span)
            if count == 1:
                transfers.append(memcpy(src_a, dst_a, length, seq=seq))
            else:
                transfers.append(memcpy(src_a, dst_a, length, count=count, src_gap=gap,
                                        dst_gap=gap, seq=seq))
        # Neighbours send to each other: one receive per own send, flagged in the slot the
        # partner's send uses (pairwise: the shared phase; naive: the partner's direction).
        receives = [(Place(node, "host", flags0 + 4 * (phase if order == "pairwise"
                                                        else 2 * dim + (step < 0))), FLAG)
                    for phase, dim, step, _ in _sends(grid, rank, order)]
        flags += [p for p, _ in receives]
        descriptors += len(transfers)
        programs.append(Program(node, [Step(channel, transfers)] if transfers else [],
                                done=receives))
    block = grid.nj * grid.nk * grid.elem
    strided = grid.ni * grid.nk * grid.elem
    return Collective("halo", programs, flags,
                      {"n": grid.n, "dims": grid.dims, "grid": (grid.px, grid.py), "order": order,
                       "descriptors": descriptors, "jk_bytes": block, "ik_bytes": strided,
                       "bytes": sum(t.bytes for p in programs for s in p.steps
                                    for t in s.transfers)})


# -- reference ----------------------------------------------------------------------------------

def _check_sizes(grid, whole, local):
    a, b, c = grid.dims
    if len(whole) != a * b * c * grid.elem or len(local) != grid.local_bytes:
        raise ValueError(f"the global array has {len(whole)} bytes and the local one "
                         f"{len(local)}; the grid needs {a * b * c * grid.elem} and "
                         f"{grid.local_bytes}")


def _global_row(grid, whole, gi, gj):
    """The ``k`` row ``(gi, gj)`` of the global array (bytes)."""
    row = grid.nk * grid.elem
    at = (gi * grid.dims[1] + gj) * row
    return whole[at:at + row]


def halo_local(grid, whole, rank, fill):
    """Rank ``rank``'s local array before the exchange: its block of the global array
    ``whole`` (``Ni x Nj x Nk`` elements, ``a[i][j][k]``) inside, ``fill`` (same size as the
    local array) in the halo."""
    _check_sizes(grid, whole, fill)
    x, y = grid.coords(rank)
    out = bytearray(fill)
    row = grid.nk * grid.elem
    for i in range(1, grid.ni + 1):
        for j in range(1, grid.nj + 1):
            at = grid.offset(i, j)
            out[at:at + row] = _global_row(grid, whole, x * grid.ni + i - 1, y * grid.nj + j - 1)
    return bytes(out)


def halo_reference(grid, whole, rank, before):
    """Rank ``rank``'s local array after the exchange, from its array ``before`` it: the
    halo planes that face a neighbour hold the neighbour's edge of the global array; corners
    and halos at the grid's edge keep what they held."""
    _check_sizes(grid, whole, before)
    x, y = grid.coords(rank)
    out = bytearray(before)
    row = grid.nk * grid.elem
    for i in range(grid.ni + 2):
        for j in range(grid.nj + 2):
            inner_i, inner_j = 1 <= i <= grid.ni, 1 <= j <= grid.nj
            if inner_i == inner_j:      # the inside, or a corner
                continue
            gi, gj = x * grid.ni + i - 1, y * grid.nj + j - 1
            if not (0 <= gi < grid.dims[0] and 0 <= gj < grid.dims[1]):
                continue                # halo at the edge of the grid: nobody sends
            at = grid.offset(i, j)
            out[at:at + row] = _global_row(grid, whole, gi, gj)
    return bytes(out)
