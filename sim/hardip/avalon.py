"""Avalon-ST codec of the Stratix IV hard IP for PCI Express: TLP <-> 128-bit beats.

Framing (both directions, the vendor's user guide of the IP Compiler for PCI Express), as pure
functions the device model (:mod:`peach2.sim.hardip.model`) and the tests use: :func:`tlp_to_avalon_beats` and
:func:`avalon_beats_to_tlp` (not the internal stream's ``peach2.sim.reference.stream.tlp_to_beats``).
A beat carries 4 DW lanes, lane ``i`` in data bits ``[32i+31:32i]``; header DWs start at lane 0
of the SOP beat (header byte 0 in bits [31:24] of its DW); payload DWs are little-endian and quad-
word aligned: the first payload DW sits at stream DW position ``s`` = 3 or 4 (3-DW header,
address bit 2 = 1 or 0) or 4 or 5 (4-DW header, bit 2 = 0 or 1); completions use bit 2 of the
lower address.  ``empty`` = 1 on the EOP beat when only bits [63:0] are valid.

:func:`avalon_beats_to_tlp` raises :class:`FramingError` on a broken packet; :func:`damage` breaks a
packet's beats on purpose (for the bad-input tests).  No simulator is needed: everything here is
plain Python on cocotbext-pcie :class:`Tlp` objects.
"""

from typing import NamedTuple

from cocotbext.pcie.core.tlp import Tlp, TlpType

__all__ = ["AvalonBeat", "FramingError", "DAMAGE", "damage", "payload_offset",
           "tlp_to_avalon_beats", "avalon_beats_to_tlp", "unpack_word", "stream_layout", "describe",
           "M32", "MEM_REQ", "IO_REQ", "CPL"]

M32 = 0xFFFF_FFFF
M128 = (1 << 128) - 1
_CPL_TYPES = (0x0A, 0x0B)
MEM_REQ = {TlpType.MEM_READ, TlpType.MEM_READ_64, TlpType.MEM_WRITE, TlpType.MEM_WRITE_64}
IO_REQ = {TlpType.IO_READ, TlpType.IO_WRITE}
CPL = {TlpType.CPL, TlpType.CPL_DATA, TlpType.CPL_LOCKED, TlpType.CPL_LOCKED_DATA}


class AvalonBeat(NamedTuple):
    """One 128-bit Avalon-ST beat (``empty``/``bardec``/``be`` as the model drives them)."""
    data: int
    sop: bool
    eop: bool
    empty: int = 0
    bardec: int = 0
    be: int = 0
    err: bool = False


class FramingError(ValueError):
    """A beat sequence breaks a Stratix IV framing rule; ``rule`` names it."""
    def __init__(self, rule, message):
        self.rule = rule
        super().__init__(f"{rule}: {message}")


def describe(tlp):
    """One-line summary of a TLP (type, address or IDs, length), for messages."""
    ft = tlp.fmt_type
    if ft in CPL:
        where = (f"req {tlp.requester_id} cpl {tlp.completer_id} tag {tlp.tag} "
                 f"lower_addr {tlp.lower_address:#x} byte_count {tlp.byte_count}")
    else:
        where = f"addr {tlp.address:#x} req {tlp.requester_id} tag {tlp.tag}"
    return f"{ft.name} {where} length {tlp.length} DW be {tlp.first_be:x}/{tlp.last_be:x}"


def stream_layout(dw0, dw2, dw3):
    """Return ``(header DWs, first payload DW position, stream DWs, payload DWs)`` of a TLP."""
    fmt, typ = dw0 >> 29, (dw0 >> 24) & 0x1F
    h = 4 if fmt & 1 else 3
    if not fmt & 2:
        return h, h, h, 0
    length = (dw0 & 0x3FF) or 1024
    if typ in _CPL_TYPES:
        bit2 = (dw2 >> 2) & 1
    else:
        bit2 = ((dw3 if h == 4 else dw2) >> 2) & 1
    s = h if (h == 3) == bool(bit2) else h + 1
    return h, s, s + length, length


def payload_offset(tlp):
    """Return the stream DW position of the first payload DW of ``tlp`` (3, 4 or 5)."""
    hdr = tlp.pack_header()
    dws = [int.from_bytes(hdr[i:i + 4], "big") for i in range(0, len(hdr), 4)] + [0]
    return stream_layout(dws[0], dws[2], dws[3])[1]


def _be_word(tlp, s, ndw):
    """Return ``rx_st_be`` bits for the whole stream (4 bits per DW position)."""
    be = ((1 << 4 * ndw) - 1) << 4 * s
    if tlp.fmt_type in MEM_REQ or tlp.fmt_type in IO_REQ:
        be &= ~(0xF << 4 * s)
        be |= (tlp.first_be & 0xF) << 4 * s
        if ndw > 1:
            last = s + ndw - 1
            be = (be & ~(0xF << 4 * last)) | ((tlp.last_be & 0xF) << 4 * last)
    return be


def tlp_to_avalon_beats(tlp, bardec=0, rng=None):
    """Frame ``tlp`` into Stratix IV 128-bit beats.

    Parameters
    ----------
    tlp : Tlp
        The TLP; its ``data`` must hold ``length`` DWs when it has a payload.
    bardec : int
        One-hot BAR hit, put on the SOP beat.
    rng : random.Random or None
        "Dirty" mode: fill don't-care DW positions (alignment pad, unused lanes of the EOP
        beat) and ``empty`` of non-EOP beats with random bits instead of zeros.

    Returns
    -------
    list of AvalonBeat
    """
    hdr = tlp.pack_header()
    h = len(hdr) // 4
    word = 0
    for i in range(h):
        word |= int.from_bytes(hdr[4 * i:4 * i + 4], "big") << 32 * i
    n, be = h, 0
    if tlp.has_data():
        data = bytes(tlp.get_data())
        ndw = len(data) // 4
        hdr_dws = [(word >> 32 * i) & M32 for i in range(4)]
        s = stream_layout(hdr_dws[0], hdr_dws[2], hdr_dws[3])[1]
        word |= int.from_bytes(data, "little") << 32 * s
        if rng is not None and s > h:
            word |= rng.getrandbits(32) << 32 * h
        n = s + ndw
        be = _be_word(tlp, s, ndw)
    nbeats = (n + 3) // 4
    tail = 4 * nbeats - n
    if rng is not None and tail:
        word |= rng.getrandbits(32 * tail) << 32 * n
    empty = 1 if n - 4 * (nbeats - 1) <= 2 else 0
    beats = []
    for k in range(nbeats):
        last = k == nbeats - 1
        e = empty if last else (rng.getrandbits(1) if rng is not None else 0)
        beats.append(AvalonBeat((word >> 128 * k) & M128, k == 0, last, e,
                          bardec if k == 0 else 0, (be >> 16 * k) & 0xFFFF))
    return beats


def unpack_word(word, nbeats, empty):
    """Check beat count / ``empty`` of a whole packet (``word``: beats concatenated) and unpack."""
    dw0, dw2, dw3 = word & M32, (word >> 64) & M32, (word >> 96) & M32
    h, s, n, length = stream_layout(dw0, dw2, dw3)
    want = (n + 3) // 4
    if nbeats != want:
        raise FramingError("length", f"{h}-DW header, length field {length} DW, payload from "
                           f"stream DW {s}: expected {want} beats, got {nbeats}")
    want_empty = 1 if n - 4 * (nbeats - 1) <= 2 else 0
    if empty != want_empty:
        raise FramingError("empty", f"EOP beat uses {n - 4 * (nbeats - 1)} DW lanes: "
                           f"expected empty={want_empty}, got {empty}")
    hdr = b"".join(((word >> 32 * i) & M32).to_bytes(4, "big") for i in range(h))
    try:
        tlp = Tlp.unpack_header(hdr)
    except Exception as exc:  # unknown fmt/type: cocotbext raises plain Exception/ValueError
        raise FramingError("header", f"cannot decode header {hdr.hex()}: {exc}") from None
    if length:
        tlp.data = bytearray(((word >> 32 * s) & ((1 << 32 * length) - 1))
                             .to_bytes(4 * length, "little"))
    return tlp


#: The ways :func:`damage` can break a TLP's beats.
DAMAGE = ("err_sop", "err_late", "short", "long", "empty", "no_eop", "stray")


def damage(rng, beats, how):
    """Return ``beats`` broken in one of the ways the hard IP would only produce on a fault.

    ``how`` is one of :data:`DAMAGE`: ``rx_st_err`` on the first or the last beat, one beat
    short (eop early), one beat too many, the wrong ``empty``, no eop at all, or a lone beat
    without sop.  For :meth:`HardIPModel.inject_beats`.
    """
    beats = list(beats)
    if how == "err_sop":
        beats[0] = beats[0]._replace(err=True)
    elif how == "err_late":
        beats[-1] = beats[-1]._replace(err=True)
    elif how == "short":
        beats = beats[:-1]
        beats[-1] = beats[-1]._replace(eop=True)
    elif how == "long":
        beats[-1] = beats[-1]._replace(eop=False)
        beats.append(AvalonBeat(rng.getrandbits(128), False, True))
    elif how == "empty":
        beats[-1] = beats[-1]._replace(empty=1 - beats[-1].empty)
    elif how == "no_eop":
        beats[-1] = beats[-1]._replace(eop=False)
    elif how == "stray":
        beats = [AvalonBeat(rng.getrandbits(128), False, True)]
    else:
        raise ValueError(f"unknown damage {how!r}; one of {DAMAGE}")
    return beats


def avalon_beats_to_tlp(beats):
    """Check the framing of one packet's beats and return its :class:`Tlp`.

    Raises :class:`FramingError` (``rule`` in ``sop``, ``eop``, ``length``, ``empty``,
    ``header``) when the beats break a rule.  Don't-care DW positions are ignored.
    """
    if not beats:
        raise FramingError("length", "no beats")
    for k, b in enumerate(beats):
        if b.sop != (k == 0):
            raise FramingError("sop", f"beat {k}: sop={int(b.sop)}")
        if b.eop != (k == len(beats) - 1):
            raise FramingError("eop", f"beat {k}: eop={int(b.eop)}")
    word = 0
    for k, b in enumerate(beats):
        word |= b.data << 128 * k
    return unpack_word(word, len(beats), beats[-1].empty)
