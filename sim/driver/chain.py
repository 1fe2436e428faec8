"""DMA transfers the way the TCA API builds them (000 section 2.5), and halo-plane shapes.

The TCA API of the papers runs a DMA in four steps (000 section 2.5):

1. ``tcaSetDMADesc_Memcpy()`` builds descriptors (channel, source, destination, size) and links
   them with pointers: :class:`Chain` and :meth:`Chain.memcpy`;
2. ``tcaDescSet()`` registers the chain with the DMA controller:
   :meth:`peach2.sim.driver.driver.Driver.dma_desc_set` (writes :meth:`Chain.image` into host memory and
   ``CH_HEAD``);
3. ``tcaStartDMADesc()`` starts it: :meth:`~peach2.sim.driver.driver.Driver.dma_start`;
4. ``tcaWaitDMADesc()`` waits for it: :meth:`~peach2.sim.driver.driver.Driver.dma_wait`.

A :class:`Transfer` is what one descriptor (or one register-mode slot) moves: ``count`` bursts
of ``length`` bytes, burst *k* from ``src + k * (length + src_gap)`` to
``dst + k * (length + dst_gap)`` (the block-stride transfer of 000 section 2.3), optionally
followed by a 4-byte completion write and an MSI.  The byte format is
:mod:`peach2.dma.descriptor`'s; nothing here re-describes it.

Halo planes (000 section 4, 002 section 3.4): :func:`halo_plane` gives the block-stride shape of
the ``jk``, ``ik`` and ``ij`` planes of an ``N^3`` array of 8-byte elements laid out
``a[i][j][k]`` (``k`` fastest), :func:`halo_transfer` a transfer from one array's plane to
another's (another node's array through the TCA window, or a packed buffer).
"""

from dataclasses import dataclass, replace

from peach2.dma import descriptor
from peach2.dma.common import MAX_ANNOUNCED

__all__ = ["Transfer", "Chain", "memcpy", "PLANES", "halo_plane", "halo_transfer",
           "contiguous"]

_U32 = (1 << 32) - 1


@dataclass(frozen=True)
class Transfer:
    """What one descriptor moves (000 section 2.3: addresses, size, burst length and gap).

    Parameters
    ----------
    src : int
        Local PCIe address of the first source byte (read through port N).
    dst : int
        TCA address of the first destination byte (routed).
    length : int
        Bytes per burst (the whole transfer when ``count`` is None).
    count : int or None
        Bursts; ``None`` for a plain 32-byte descriptor (one burst).
    src_gap, dst_gap : int
        Bytes skipped after each burst on the source / destination side.
    seq_addr : int or None
        TCA address of the 4-byte completion write made after the data.
    seq_value : int
        Value of the completion write.
    irq : bool
        Raise the channel's MSI when the descriptor is done.
    """
    src: int
    dst: int
    length: int
    count: int = None
    src_gap: int = 0
    dst_gap: int = 0
    seq_addr: int = None
    seq_value: int = 0
    irq: bool = False

    @property
    def ext(self):
        """The descriptor needs the 32-byte extension (block-stride or completion write)."""
        return (self.count is not None or self.src_gap != 0 or self.dst_gap != 0
                or self.seq_addr is not None)

    @property
    def bursts(self):
        """Number of bursts."""
        return 1 if self.count is None else self.count

    @property
    def bytes(self):
        """Data bytes moved (completion write not included)."""
        return self.length * self.bursts

    @property
    def size(self):
        """Bytes of the descriptor in memory (32 or 64)."""
        return descriptor.EXT_BYTES if self.ext else descriptor.BASE_BYTES

    def src_span(self):
        """Return ``(first, end)`` source addresses touched (end exclusive)."""
        return self.src, self.src + (self.bursts - 1) * (self.length + self.src_gap) + self.length

    def dst_span(self):
        """Return ``(first, end)`` destination addresses written, completion write excluded."""
        return self.dst, self.dst + (self.bursts - 1) * (self.length + self.dst_gap) + self.length

    def pack(self, next=0, end=False, adj=0):
        """Return the descriptor bytes, linked to pointer ``next`` (ignored when ``end``),
        announcing ``adj`` descriptors right after it in memory (``control.adj``)."""
        return descriptor.pack(src=self.src, dst=self.dst, length=self.length,
                               next=0 if end else next, count=self.count, adj=adj,
                               src_gap=self.src_gap, dst_gap=self.dst_gap,
                               seq_value=self.seq_value if self.seq_addr is not None else None,
                               seq_addr=self.seq_addr, irq=self.irq, end=end, ext=self.ext)

    def fields(self, end=False):
        """Return the descriptor as the dict :func:`peach2.dma.descriptor.unpack` gives."""
        return descriptor.unpack(self.pack(end=end))


def memcpy(src, dst, length, *, count=None, src_gap=0, dst_gap=0, seq=None, irq=False):
    """Return a :class:`Transfer` (the arguments of ``tcaSetDMADesc_Memcpy``, 000 section 2.5).

    ``seq`` is ``(address, value)`` of the completion write, or None.
    """
    if length < 1 or length > _U32:
        raise ValueError(f"length must be 1 .. 2^32-1 bytes, not {length}")
    if count is not None and not 1 <= count <= _U32:
        raise ValueError(f"count must be 1 .. 2^32-1, not {count}")
    for name, gap in (("src_gap", src_gap), ("dst_gap", dst_gap)):
        if not 0 <= gap <= _U32:
            raise ValueError(f"{name} must be 0 .. 2^32-1, not {gap}")
    seq_addr, seq_value = (None, 0) if seq is None else seq
    if seq_addr is not None and seq_addr % 4:
        raise ValueError(f"the completion write address must be 4-byte aligned, not "
                         f"{seq_addr:#x}")
    return Transfer(src, dst, length, count, src_gap, dst_gap, seq_addr, seq_value, irq)


class Chain:
    """A chain of descriptors for one channel, placed in host memory (000 section 2.5).

    Descriptors are placed one after the other from ``base`` (32 bytes, 64 with the extension,
    which is 64-byte aligned: a 32-byte hole goes before one that would not be), or at the
    ``addresses`` given to :meth:`place`, and linked by pointers
    (:func:`peach2.dma.descriptor.pointer`); the last has ``end`` set.  Each descriptor
    announces (``control.adj``, up to 255) the descriptors of its size that follow it
    immediately in memory, so the engine fetches them in blocks; :meth:`image` with
    ``adjacent=False`` leaves ``adj`` 0 (one fetch per descriptor).

    Parameters
    ----------
    channel : int
        DMA channel the chain is for (0..3).
    base : int
        Bus address of the first descriptor in host memory; 32-byte aligned.

    Members
    -------
    transfers : list of Transfer
    """

    def __init__(self, channel, base):
        if base % 32:
            raise ValueError(f"descriptors are 32-byte aligned; {base:#x} is not")
        self.channel = channel
        self.base = base
        self.transfers = []
        self._addresses = None

    def memcpy(self, src, dst, length, **kwargs):
        """Append one descriptor (``tcaSetDMADesc_Memcpy``); see :func:`memcpy`.  Returns self."""
        self.transfers.append(memcpy(src, dst, length, **kwargs))
        return self

    def add(self, transfer):
        """Append a :class:`Transfer`; return self."""
        self.transfers.append(transfer)
        return self

    def __len__(self):
        return len(self.transfers)

    @property
    def size(self):
        """Bytes of host memory the chain takes when placed from ``base`` (the 64-byte
        descriptors' alignment holes included)."""
        at = self.base
        for t in self.transfers:
            at += at % t.size + t.size
        return at - self.base

    @property
    def bytes(self):
        """Data bytes the chain moves."""
        return sum(t.bytes for t in self.transfers)

    def place(self, addresses=None):
        """Place descriptor ``i`` at ``addresses[i]`` (32-byte aligned, non-overlapping).

        Default: one after the other from ``base``.  Returns the addresses.
        """
        if addresses is None:
            addresses, at = [], self.base
            for t in self.transfers:
                at += at % t.size           # 64-byte descriptors are 64-byte aligned
                addresses.append(at)
                at += t.size
        addresses = list(addresses)
        if len(addresses) != len(self.transfers):
            raise ValueError(f"{len(addresses)} addresses for {len(self.transfers)} descriptors")
        spans = sorted((a, a + t.size) for a, t in zip(addresses, self.transfers))
        for a, t in zip(addresses, self.transfers):
            if a % t.size:
                raise ValueError(f"{t.size}-byte descriptors are {t.size}-byte aligned; "
                                 f"{a:#x} is not")
        for (_, end), (a, _) in zip(spans, spans[1:]):
            if a < end:
                raise ValueError(f"descriptors overlap at {a:#x}")
        self._addresses = addresses
        return addresses

    @property
    def addresses(self):
        """Address of each descriptor (placed from ``base`` unless :meth:`place` said else)."""
        if self._addresses is None or len(self._addresses) != len(self.transfers):
            return self.place()
        return self._addresses

    @property
    def head(self):
        """Pointer to the first descriptor for ``CH_HEAD``, announcing in bits [4:1] the
        descriptors that follow it (up to 15), so the first fetch reads them with it."""
        return self.pointer(0) | min(15, self.announced) << 1

    @property
    def announced(self):
        """Descriptors that follow the head immediately in memory, up to
        :data:`~peach2.dma.common.MAX_ANNOUNCED`: ``CH_CTRL.adj`` of the start, so the engine
        fetches them all with the head (``CH_HEAD[4:1]`` says 15 at most)."""
        if not self.transfers:
            raise ValueError("the chain is empty")
        return min(MAX_ANNOUNCED, self.adjacency()[0])

    def pointer(self, i):
        """Return the pointer to descriptor ``i``."""
        return descriptor.pointer(self.addresses[i], self.transfers[i].ext)

    def adjacency(self):
        """Return each descriptor's ``adj``: how many descriptors of its size follow it
        immediately in memory, up to the chain's end (at most 255)."""
        n = len(self.transfers)
        adj = [0] * n
        for i in reversed(range(n - 1)):
            a, t = self.addresses[i], self.transfers[i]
            nxt = self.transfers[i + 1]
            if self.addresses[i + 1] == a + t.size and nxt.size == t.size:
                adj[i] = min(255, adj[i + 1] + 1)
        return adj

    def image(self, adjacent=True):
        """Return ``[(address, bytes)]`` of every descriptor, linked, the last with ``end``;
        with ``adjacent``, each announcing the run that follows it (:meth:`adjacency`)."""
        if not self.transfers:
            raise ValueError("the chain is empty")
        out = []
        n = len(self.transfers)
        adj = self.adjacency() if adjacent else [0] * n
        for i, (a, t) in enumerate(zip(self.addresses, self.transfers)):
            last = i == n - 1
            out.append((a, t.pack(next=0 if last else self.pointer(i + 1), end=last,
                                  adj=adj[i])))
        return out


# -- halo planes ------------------------------------------------------------------------------

#: The three halo planes of an ``N^3`` array ``a[i][j][k]``: the index held constant is the one
#: missing from the name (``jk``: ``i`` = const).
PLANES = ("jk", "ik", "ij")


def halo_plane(n, plane, index, elem=8):
    """Return ``(offset, length, count, gap)`` of a plane of an ``n^3`` array of ``elem`` bytes.

    Layout ``a[i][j][k]``, ``k`` fastest (000 section 4: the halo exchange of Himeno).
    ``jk`` (``i = index``): one block of ``n*n*elem`` bytes; ``ik`` (``j = index``): ``n``
    bursts of ``n*elem`` bytes every ``n*n*elem`` bytes; ``ij`` (``k = index``): ``n*n`` bursts
    of ``elem`` bytes every ``n*elem`` bytes.  ``gap`` is the stride minus the burst length.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    if not 0 <= index < n:
        raise ValueError(f"plane index {index} out of range 0..{n - 1}")
    if plane == "jk":
        return index * n * n * elem, n * n * elem, 1, 0
    if plane == "ik":
        return index * n * elem, n * elem, n, n * n * elem - n * elem
    if plane == "ij":
        return index * elem, elem, n * n, n * elem - elem
    raise ValueError(f"plane must be one of {PLANES}, not {plane!r}")


def halo_transfer(n, plane, src_array, dst_array, src_index, dst_index=None, *, elem=8,
                  packed_src=False, packed_dst=False, seq=None, irq=False):
    """Return the :class:`Transfer` of one halo plane from one ``n^3`` array to another.

    Parameters
    ----------
    n, plane, elem :
        As :func:`halo_plane`.
    src_array : int
        Local PCIe address of the source array (or packed buffer with ``packed_src``).
    dst_array : int
        TCA address of the destination array (or packed buffer with ``packed_dst``): the same
        node's or another node's host window.
    src_index, dst_index : int
        Plane index in the source and destination arrays (``dst_index`` defaults to
        ``src_index``); a halo exchange sends the last inner plane into the neighbour's halo.
    packed_src, packed_dst : bool
        The side is a packed buffer of the plane's bytes (gap 0, offset 0): gather or scatter.

    A ``jk`` plane is one block: a plain descriptor.  Others are block-stride descriptors.
    """
    dst_index = src_index if dst_index is None else dst_index
    s_off, length, count, gap = halo_plane(n, plane, src_index, elem)
    d_off, _, _, _ = halo_plane(n, plane, dst_index, elem)
    if count == 1:
        return memcpy(src_array + (0 if packed_src else s_off),
                      dst_array + (0 if packed_dst else d_off), length, seq=seq, irq=irq)
    return memcpy(src_array + (0 if packed_src else s_off),
                  dst_array + (0 if packed_dst else d_off), length, count=count,
                  src_gap=0 if packed_src else gap, dst_gap=0 if packed_dst else gap,
                  seq=seq, irq=irq)


def contiguous(transfer):
    """Return the same number of bytes as one contiguous burst (the benchmark's reference)."""
    return replace(transfer, length=transfer.bytes, count=None, src_gap=0, dst_gap=0)
