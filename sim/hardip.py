"""Bus-functional model of the Stratix IV GX hard IP for PCI Express (Gen2 x8, 128-bit Avalon-ST).

The model is a cocotbext-pcie :class:`~cocotbext.pcie.core.Device` (shaped like
``cocotbext.pcie.intel.s10.S10PcieDevice``): its link side is a cocotbext-pcie ``SimPort`` (wire
time, ACK/NAK, flow control), its application side drives and checks the IP Compiler for PCI
Express pins ``{prefix}rx_st_*`` / ``{prefix}tx_st_*`` of the DUT, one beat per 250 MHz cycle.

Framing (both directions, brief section 3), as pure functions the tests also use:
:func:`tlp_to_beats` and :func:`beats_to_tlp`.  A beat carries 4 DW lanes, lane ``i`` in data bits
``[32i+31:32i]``; header DWs start at lane 0 of the SOP beat (header byte 0 in bits [31:24] of its
DW); payload DWs are little-endian and quad-word aligned: the first payload DW sits at stream DW
position ``s`` = 3 or 4 (3-DW header, address bit 2 = 1 or 0) or 4 or 5 (4-DW header, bit 2 = 0 or
1); completions use bit 2 of the lower address.  ``empty`` = 1 on the EOP beat when only bits
[63:0] are valid.

Simplifications versus the real hard IP
---------------------------------------
- No link training, LTSSM, power management, ``tl_cfg_*``, MSI pins, ``ko_cpl_spc_vc0`` or
  ``cpl_err``: the link is up from time zero; config space lives in the model and is never
  passed to the DUT.  The DUT does not learn its bus number: read :attr:`HardIP.pcie_id` after
  enumeration and give it to the DUT by other means.
- ``rx_st_be`` is 0xF per payload DW lane, except the first/last payload DW of memory and I/O
  requests, which carry ``first_be``/``last_be``; header and pad lanes are 0.
- ``rx_st_mask``: at most ``mask_slack`` non-posted requests still start after the model sees
  mask high (the real core: up to about 10); posted requests and completions pass held-back
  non-posted requests (legal PCIe ordering).
- ``tx_cred[35:0]`` (PH [2:0], PD [14:3], NPH [17:15], NPD [20:18], CPLH [23:21], CPLD [35:24],
  saturating; layout as used by Altera-era user designs, not checked against the handbook) is
  refreshed every ``cred_update_cycles`` cycles from the link port's credit state.
- ``tx_st_ready`` falls when the backpressure generator says so or when ``tx_buffer_tlps`` TLPs
  wait for the link; the link side waits for flow-control credits, so a partner short of
  credits fills that buffer and drops ready.  The limit is soft: a TLP in flight completes.
- ``tx_st_err`` on any beat of a packet nullifies it (counted in ``nullified``); the beat count
  of a nullified packet is not checked.
- RX flow-control credits are returned to the link when the TLP's EOP beat reaches the DUT, so
  the DUT's backpressure reaches the link partner.  Completions have infinite credits (as an
  endpoint advertises); ``cpl_space`` optionally checks the DUT reserved room for them.
"""

import logging
import random
from collections import deque
from typing import NamedTuple

import cocotb
from cocotb.triggers import Event, RisingEdge, ValueChange
from cocotb.utils import get_sim_time
from cocotbext.pcie.core import Device, Endpoint
from cocotbext.pcie.core.caps import MsiCapability
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

__all__ = ["Beat", "FramingError", "Violation", "HardIP", "HardIPFunction",
           "payload_offset", "tlp_to_beats", "beats_to_tlp", "quiet_pcie_loggers"]

M32 = 0xFFFF_FFFF
M128 = (1 << 128) - 1
_CPL_TYPES = (0x0A, 0x0B)
_MEM_REQ = {TlpType.MEM_READ, TlpType.MEM_READ_64, TlpType.MEM_WRITE, TlpType.MEM_WRITE_64}
_IO_REQ = {TlpType.IO_READ, TlpType.IO_WRITE}
_CPL = {TlpType.CPL, TlpType.CPL_DATA, TlpType.CPL_LOCKED, TlpType.CPL_LOCKED_DATA}


class Beat(NamedTuple):
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


class Violation(NamedTuple):
    """One protocol violation seen on the DUT's TX interface (or RX-side misuse)."""
    rule: str
    cycle: int
    time_ns: float
    message: str

    def __str__(self):
        return f"[{self.rule}] cycle {self.cycle} ({self.time_ns:.1f} ns): {self.message}"


def quiet_pcie_loggers(level=logging.WARNING):
    """Set the cocotbext-pcie loggers (``cocotb.pcie.*``) to ``level``."""
    logging.getLogger("cocotb.pcie").setLevel(level)


def _layout(dw0, dw2, dw3):
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
    return _layout(dws[0], dws[2], dws[3])[1]


def _be_word(tlp, s, ndw):
    """Return ``rx_st_be`` bits for the whole stream (4 bits per DW position)."""
    be = ((1 << 4 * ndw) - 1) << 4 * s
    if tlp.fmt_type in _MEM_REQ or tlp.fmt_type in _IO_REQ:
        be &= ~(0xF << 4 * s)
        be |= (tlp.first_be & 0xF) << 4 * s
        if ndw > 1:
            last = s + ndw - 1
            be = (be & ~(0xF << 4 * last)) | ((tlp.last_be & 0xF) << 4 * last)
    return be


def tlp_to_beats(tlp, bardec=0, rng=None):
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
    list of Beat
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
        s = _layout(hdr_dws[0], hdr_dws[2], hdr_dws[3])[1]
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
        beats.append(Beat((word >> 128 * k) & M128, k == 0, last, e,
                          bardec if k == 0 else 0, (be >> 16 * k) & 0xFFFF))
    return beats


def _unpack(word, nbeats, empty):
    """Check beat count / ``empty`` of a whole packet (``word``: beats concatenated) and unpack."""
    dw0, dw2, dw3 = word & M32, (word >> 64) & M32, (word >> 96) & M32
    h, s, n, length = _layout(dw0, dw2, dw3)
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


def beats_to_tlp(beats):
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
    return _unpack(word, len(beats), beats[-1].empty)


class HardIPFunction(Endpoint):
    """Endpoint function of the model: type-0 config space, PM, PCIe and (optional) MSI."""
    def __init__(self, *args, msi=True, **kwargs):
        super().__init__(*args, **kwargs)
        if msi:
            self.msi_cap = MsiCapability()
            self.msi_cap.msi_64bit_address_capable = 1
            self.register_capability(self.msi_cap)


class _Out:
    """An output pin that is written only when its value changes (GPI writes are the cost)."""
    __slots__ = ("sig", "val")

    def __init__(self, sig, val=0):
        self.sig, self.val = sig, val
        if sig is not None:
            sig.setimmediatevalue(val)

    def set(self, val):
        if val != self.val and self.sig is not None:
            self.sig.value = val
        self.val = val


def _bit(sig):
    try:
        return int(sig.value)
    except ValueError:  # X/Z before the DUT is reset
        return 0

