"""Reference model of the put engine (``docs/put.md``), written from the documentation.

:func:`put_outcome` says what the chip must send for one inline put written into BAR 4: the
memory writes (their port, address as they leave, bytes) or the refusal code, from the put's 64
bytes, whether it arrived as one well-formed 64-byte write, the route table, the node offset and
which ports' links are down.  Tests compare the put engine and the chip with it.
"""

from dataclasses import dataclass

from peach2.params import PutError
from peach2.put.descriptor import CONTROL_RESERVED, DATA_BYTES, MAGIC, unpack

from .router import MASK64

__all__ = ["PutWrite", "put_outcome"]


@dataclass(frozen=True)
class PutWrite:
    """A memory write the put engine sends: leaving through ``port`` with ``address`` (after
    the node offset subtraction on N) and ``data``."""
    port: str
    address: int
    data: bytes

    @classmethod
    def of(cls, port, tlp):
        """The write a memory-write ``Tlp`` leaving through ``port`` makes (byte enables
        applied; its bytes are contiguous)."""
        raw = bytes(tlp.get_data())
        start = tlp.get_first_be_offset()
        end = len(raw) - tlp.get_last_be_offset() if len(raw) > 4 else \
            start + tlp.get_be_byte_count()
        return cls(port, (tlp.address & ~3) + start, raw[start:end])


def _translated(address, offset):
    """``address`` leaving through N: the offset taken off its DW address, its byte lane kept
    (as the router's and the DMA's translation: offset bits [1:0] move no byte's lane)."""
    return (((address & ~3) - offset) & MASK64 & ~3) | (address & 3)


def put_outcome(raw, state, *, well_formed=True, down=()):
    """Return ``(error, writes)`` for the put ``raw`` (64 bytes).

    ``state`` is a :class:`~peach2.sim.reference.router.RouterState` (routes and offset);
    ``down`` the ports ("N", "E", "W", "S") whose link is down.  ``error`` is a
    :class:`~peach2.params.PutError`; ``writes`` the data write then the completion write (with
    ``seq``), or ``[]`` when the put is refused (a put is sent whole or not at all).
    """
    if not well_formed:
        return PutError.WRITE_MALFORMED, []
    d = unpack(raw)
    if (d["magic"] != MAGIC or d["control"] & CONTROL_RESERVED or d["reserved"]
            or not 1 <= d["length"] <= DATA_BYTES or (d["seq"] and d["seq_addr"] % 4)):
        return PutError.DESC_MALFORMED, []
    dst, length = d["dst"], d["length"]
    if (dst % 4096) + length > 4096:
        return PutError.CROSSES_PAGE, []
    targets = [(dst, d["data"][:length])]
    if d["seq"]:
        targets.append((d["seq_addr"], d["seq_value"].to_bytes(4, "little")))
    ports = [state.lookup(address) for address, _ in targets]
    if None in ports:
        return PutError.DST_UNROUTABLE, []
    if any(port in down for port in ports):
        return PutError.DST_LINK_DOWN, []
    writes = [PutWrite(port, _translated(address, state.offset) if port == "N" else address, data)
              for port, (address, data) in zip(ports, targets)]
    return PutError.NONE, writes
