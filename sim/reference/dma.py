"""Reference model of the DMA controller: what a chain or a register-mode start must write.

Written from the specification (``docs/dma.md``, 002 section 3.4, 000 sections 2.2-2.3), not from
the gateware.  Pure Python, no simulator: the testbenches compare host memory, the channel
registers and the MSIs with what these functions return.

- :func:`walk_chain` follows a chain in memory from its head pointer, checking every descriptor
  (the checks of ``docs/dma.md``, error ``DESC_MALFORMED``);
- :func:`transfer_writes` gives the bytes one descriptor writes, burst by burst, then its
  completion write;
- :func:`run_chain` / :func:`run_slots` / :func:`run_queue` give the whole :class:`Outcome` of
  a chained or a register-mode start, or of a register-mode queue: writes in order, ``CH_DESC_DONE``, ``CH_BYTES``, MSIs, the error code
  and ``CH_DESC_ADDR`` of a fault the model can foresee (a malformed descriptor, an unroutable
  destination, a read of source memory that fails);
- :func:`write_tlps` / :func:`read_requests` give the memory writes a burst is cut into (at
  ``mps`` destination boundaries) and a bound on the read requests.

Assumptions where the specification leaves room (stated so a mismatch is easy to place):
``CH_BYTES`` counts data bytes, not the 4-byte completion writes; a descriptor with an
unroutable ``dst`` or ``seq_addr`` writes nothing and stops the chain; a malformed descriptor
stops the chain before any of its writes; descriptors before a fault are complete.
"""

from dataclasses import dataclass, field

from peach2.dma import descriptor
from peach2.dma.common import MAX_ANNOUNCED
from peach2.params import N_DMA_SLOTS, DmaError

__all__ = ["Outcome", "MalformedDescriptor", "check_descriptor", "walk_chain",
           "transfer_writes", "run_chain", "run_slots", "run_queue", "apply", "write_tlps",
           "read_requests", "bursts"]

_U64 = (1 << 64) - 1


class MalformedDescriptor(ValueError):
    """A descriptor fails a check of ``docs/dma.md``; ``address`` is where it was read."""

    def __init__(self, address, reason):
        self.address = address
        self.reason = reason
        super().__init__(f"descriptor at {address:#x}: {reason}")


@dataclass
class Outcome:
    """What a start of a channel must do.

    Members
    -------
    writes : list of (int, bytes)
        ``(TCA address, data)`` in the order the engine makes them: every burst of a descriptor,
        then its completion write.  Later writes win where they overlap.
    seq_writes : list of (int, int, bytes)
        ``(descriptor index, TCA address, 4 bytes)`` of every completion write.
    desc_done : int
        ``CH_DESC_DONE`` at the end.
    bytes : int
        ``CH_BYTES`` at the end (data bytes of the descriptors done).
    irqs : int
        MSIs raised (descriptors done with ``irq``).
    error : DmaError
        ``CH_STATUS.error`` at the end.
    desc_addr : int or None
        ``CH_DESC_ADDR`` after a fault: the failing descriptor's address (register mode: slot).
    descriptors : list of (int, dict)
        ``(address or slot, fields)`` of every descriptor started, in order.
    """
    writes: list = field(default_factory=list)
    seq_writes: list = field(default_factory=list)
    desc_done: int = 0
    bytes: int = 0
    irqs: int = 0
    error: DmaError = DmaError.NONE
    desc_addr: int = None
    descriptors: list = field(default_factory=list)


def _fields(d):
    """Accept a :class:`~peach2.sim.driver.chain.Transfer` or a field dict; return the field dict."""
    if isinstance(d, dict):
        full = descriptor.unpack(b"")
        full.update(d)
        return full
    return d.fields()


def check_descriptor(d, ext_pointer=None, *, register_mode=False, follows=None):
    """Return why descriptor ``d`` (field dict) is malformed, or None (``docs/dma.md``, Checks).

    ``ext_pointer`` is bit 0 of the pointer it was fetched through (None in register mode,
    where there is no pointer and ``next`` is ignored).  ``follows`` is the pointer to the
    descriptor right after it in memory when it lies in an announced adjacent run (or announces
    one with ``adj``): its ``next`` must then be that pointer.
    """
    if d["magic"] != descriptor.MAGIC:
        return f"magic {d['magic']:#04x}, not {descriptor.MAGIC:#04x}"
    if d["control"] & descriptor.CONTROL_RESERVED:
        return f"reserved control bits set ({d['control']:#010x})"
    if d["length"] == 0:
        return "length 0"
    if d["ext"]:
        if d["reserved"]:
            return f"reserved field {d['reserved']:#x}"
        if d["count"] == 0:
            return "count 0"
    if ext_pointer is not None and bool(d["ext"]) != bool(ext_pointer):
        return f"ext {d['ext']} disagrees with the pointer's bit 0 ({int(ext_pointer)})"
    if not register_mode and not d["end"]:
        if d["next"] & 0x1E:
            return f"next {d['next']:#x} has bits [4:1] set"
        if d["next"] & 0x21 == 0x21:
            return f"next {d['next']:#x} points to a 64-byte descriptor not 64-byte aligned"
        if follows is not None and d["next"] != follows:
            return (f"next {d['next']:#x} is not the following descriptor {follows:#x} of "
                    f"its adjacent run")
    if d["seq"]:
        if not d["ext"]:
            return "seq without ext"
        if d["seq_addr"] % 4:
            return f"seq_addr {d['seq_addr']:#x} not 4-byte aligned"
    return None


def walk_chain(head, read_desc, *, announced=0, limit=1 << 16):
    """Follow a chain from pointer ``head``; return ``[(address, fields)]`` up to ``end``.

    ``read_desc(address, n)`` returns ``n`` bytes of host memory.  Raises
    :class:`MalformedDescriptor` at the first descriptor that fails its checks, with the
    descriptors before it in ``exc.good``.  Adjacent runs are followed as the engine does
    (``docs/dma.md``, "Descriptors are fetched in blocks"): the descriptors known to follow one
    are the most of those known to follow the one before, less one, and its own ``adj``
    (for the head, the most of ``head`` bits [4:1] and ``announced``, the start's
    ``CH_CTRL.adj``); inside them ``next`` must be the following one.
    """
    if not 0 <= announced <= MAX_ANNOUNCED:
        raise ValueError(f"announced must be 0..{MAX_ANNOUNCED}, not {announced}")
    out = []
    ptr = head
    known = max((head >> 1) & 0xF, announced) + 1    # announced after the head
    while True:
        addr, ext = ptr & ~0x1F & _U64, ptr & 1
        if ext and addr & 0x20:
            exc = MalformedDescriptor(addr, "64-byte descriptor not 64-byte aligned")
            exc.good = out
            raise exc
        # The engine fetches exactly what the pointer says: an extension it did not read
        # is zero (unpack pads).
        size = descriptor.EXT_BYTES if ext else descriptor.BASE_BYTES
        d = descriptor.unpack(read_desc(addr, size))
        # Known to follow it: what was known beyond the one before, or its own adj if more.
        known = max(known - 1, 0, d["adj"])
        follows = ((addr + size) & _U64) | ext if known else None
        reason = check_descriptor(d, ext, follows=follows)
        if reason is not None:
            exc = MalformedDescriptor(addr, reason)
            exc.good = out
            raise exc
        out.append((addr, d))
        if d["end"]:
            return out
        if len(out) >= limit:
            raise ValueError(f"chain from {head:#x} has no end within {limit} descriptors")
        ptr = d["next"]


def bursts(d):
    """Return ``[(src, dst, length)]`` of the bursts of descriptor ``d`` (field dict)."""
    d = _fields(d)
    n = d["count"] if d["ext"] else 1
    out = []
    for k in range(n):
        s = (d["src"] + k * (d["length"] + (d["src_gap"] if d["ext"] else 0))) & _U64
        t = (d["dst"] + k * (d["length"] + (d["dst_gap"] if d["ext"] else 0))) & _U64
        out.append((s, t, d["length"]))
    return out


def transfer_writes(d, read_src):
    """Return ``[(TCA address, bytes)]`` descriptor ``d`` writes: its bursts, then the seq write.

    ``read_src(address, n)`` returns ``n`` bytes of source memory.
    """
    d = _fields(d)
    out = [(t, bytes(read_src(s, n))) for s, t, n in bursts(d)]
    if d["seq"]:
        out.append((d["seq_addr"], d["seq_value"].to_bytes(4, "little")))
    return out


def _run(items, read_src, routable, readable, register_mode):
    o = Outcome()
    for where, d in items:
        o.descriptors.append((where, d))
        targets = [t for _, t, _ in bursts(d)] + ([d["seq_addr"]] if d["seq"] else [])
        if routable is not None and not all(routable(t) for t in targets):
            o.error, o.desc_addr = DmaError.DST_UNROUTABLE, where
            return o
        if readable is not None:
            bad = next((readable(s, n) for s, _, n in bursts(d) if readable(s, n)), None)
            if bad is not None:
                o.error, o.desc_addr = bad, where
                return o
        writes = transfer_writes(d, read_src)
        o.writes += writes
        if d["seq"]:
            o.seq_writes.append((o.desc_done, *writes[-1]))
        o.desc_done += 1
        o.bytes += d["length"] * (d["count"] if d["ext"] else 1)
        o.irqs += bool(d["irq"])
    return o


def run_chain(head, read_mem, *, announced=0, read_src=None, routable=None, readable=None):
    """Return the :class:`Outcome` of a chained start from pointer ``head``, with
    ``CH_CTRL.adj`` = ``announced``.

    Parameters
    ----------
    read_mem : callable
        ``read_mem(address, n) -> bytes`` of host memory (descriptors; and sources unless
        ``read_src`` is given).
    routable : callable, optional
        ``routable(tca_address) -> bool`` (e.g. from :func:`peach2.routes.match_route`);
        default: every address routes.
    readable : callable, optional
        ``readable(src, n) -> DmaError or None``: the error a read of source memory meets
        (``CPL_UR`` for unmapped memory...); default: every read succeeds.
    """
    read_src = read_src or read_mem
    try:
        items = walk_chain(head, read_mem, announced=announced)
        bad = None
    except MalformedDescriptor as exc:
        items, bad = exc.good, exc
    o = _run(items, read_src, routable, readable, False)
    if bad is not None and o.error == DmaError.NONE:
        o.error, o.desc_addr = DmaError.DESC_MALFORMED, bad.address
    return o


def run_slots(slots, read_src, *, routable=None, readable=None):
    """Return the :class:`Outcome` of a register-mode start of ``slots`` (1..4 descriptors).

    ``slots`` are :class:`~peach2.sim.driver.chain.Transfer` s or field dicts; ``next`` and ``end`` are
    ignored.  ``CH_DESC_ADDR`` of a fault is the slot number.
    """
    if not slots:
        return Outcome(error=DmaError.DESC_MALFORMED, desc_addr=0)
    if len(slots) > N_DMA_SLOTS:
        raise ValueError(f"a register-mode start takes 1..{N_DMA_SLOTS} slots, not {len(slots)}")
    return _run_slots(slots, read_src, routable, readable)


def run_queue(slots, read_src, *, routable=None, readable=None):
    """Return the :class:`Outcome` of a register-mode queue (``CH_CTRL.queue``) that ran
    ``slots`` in order, as started and appended (any number, 0 included), then was stopped.

    Slot ``i`` of the queue is register slot ``i % 4``: a fault's ``CH_DESC_ADDR``.  A fault
    ends the queue as it ends a register-mode start: the slots after it are not run."""
    return _run_slots(slots, read_src, routable, readable)


def _run_slots(slots, read_src, routable, readable):
    items = []
    for i, s in enumerate(slots):
        d = _fields(s)
        reason = check_descriptor(d, register_mode=True)
        if reason is not None:
            o = _run(items, read_src, routable, readable, True)
            if o.error == DmaError.NONE:
                o.error, o.desc_addr = DmaError.DESC_MALFORMED, i % N_DMA_SLOTS
            return o
        items.append((i % N_DMA_SLOTS, d))
    return _run(items, read_src, routable, readable, True)


def apply(writes, memory, base=0):
    """Apply ``[(address, bytes)]`` to ``memory`` (a bytearray holding ``base`` onwards).

    Writes outside ``memory`` are ignored; return the number of bytes applied.
    """
    n = 0
    for addr, data in writes:
        lo, hi = max(addr, base), min(addr + len(data), base + len(memory))
        if lo < hi:
            memory[lo - base:hi - base] = data[lo - addr:hi - addr]
            n += hi - lo
    return n


def write_tlps(dst, length, mps):
    """Return ``[(address, bytes)]`` of the memory writes a burst is cut into.

    ``docs/dma.md``: writes are split at ``mps`` destination boundaries (which never cross
    4 KiB), so every write but the first and the last is ``mps`` bytes and aligned.
    """
    out = []
    end = dst + length
    while dst < end:
        n = min(end, (dst // mps + 1) * mps) - dst
        out.append((dst, n))
        dst += n
    return out


def read_requests(src, length, mrrs):
    """Return the fewest reads a burst can take (``mrrs`` at most, none across 4 KiB).

    A lower bound on the engine's read requests (it may cut more to align them with the
    destination); the benchmarks use it for the wire bound of read requests on N.
    """
    out = []
    end = src + length
    while src < end:
        lo = src & ~3
        n = min(end, lo + mrrs, (src | 0xFFF) + 1) - src
        out.append((src, n))
        src += n
    return out
