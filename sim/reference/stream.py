"""Reference model of the internal TLP stream, and a cocotb monitor for it.

:func:`tlp_to_beats` says, for a cocotbext-pcie ``Tlp``, exactly which beats the chip's internal
stream must carry (``rtl/tlp/stream.py`` states the contract); :func:`beats_to_tlp` turns observed
beats back into a ``Tlp``.  Written from the contract, not from the gateware, so a test can
compare what an adapter produced with what it should produce.
"""

from dataclasses import dataclass

from cocotb.triggers import RisingEdge
from cocotbext.pcie.core.tlp import Tlp

from peach2.sim.run.signals import resolve_unknown
from peach2.tlp.layouts import header_dws, header_from_bytes, header_to_bytes

__all__ = ["Beat", "tlp_to_beats", "beats_to_tlp", "compare_packet", "StreamMonitor"]


@dataclass(frozen=True)
class Beat:
    """One internal-stream beat, as plain integers."""
    hdr: int
    data: int
    dw_en: int
    first: int
    last: int
    err: int = 0
    bar: int = 0


def _payload_dws(tlp):
    raw = bytes(tlp.data) if tlp.has_data() else b""
    return [int.from_bytes(raw[i:i+4], "little") for i in range(0, len(raw), 4)]


def tlp_to_beats(tlp, bar=0):
    """Return the beats that carry ``tlp`` on the internal stream.

    The header goes beside payload DWs 0-3 in the first beat; payload DW ``k`` sits in lane
    ``k % 4`` of beat ``k // 4``.  ``hdr`` and ``bar`` are repeated on every beat here, but only
    the first beat's are part of the contract (see :func:`compare_packet`).
    """
    raw = bytes(tlp.pack_header())
    hdr = header_from_bytes(raw)
    dws = _payload_dws(tlp)
    if not dws:
        return [Beat(hdr, 0, 0, 1, 1, 0, bar)]
    beats = []
    for start in range(0, len(dws), 4):
        chunk = dws[start:start+4]
        data = sum(dw << (32 * lane) for lane, dw in enumerate(chunk))
        beats.append(Beat(hdr, data, (1 << len(chunk)) - 1, int(start == 0),
                          int(start + 4 >= len(dws)), 0, bar))
    return beats


def beats_to_tlp(beats):
    """Rebuild a ``Tlp`` from the beats of one packet (first to last)."""
    if not beats or not beats[0].first or not beats[-1].last:
        raise ValueError("beats must run from a first beat to a last beat")
    hdr = beats[0].hdr
    fmt = (hdr >> 29) & 0x7
    raw = header_to_bytes(hdr, header_dws(fmt))
    for beat in beats:
        for lane in range(4):
            if beat.dw_en >> lane & 1:
                raw += ((beat.data >> (32 * lane)) & 0xffffffff).to_bytes(4, "little")
    return Tlp.unpack(raw)


def _lanes(data, dw_en):
    return [(data >> (32 * lane)) & 0xffffffff if dw_en >> lane & 1 else None
            for lane in range(4)]


def compare_packet(got, expected):
    """Return a list of differences between two packets of beats (empty when they agree).

    Compared: the number of beats, ``first``/``last``/``dw_en``/``err`` of every beat, the
    enabled data lanes, and ``hdr``/``bar`` of the first beat (the contract leaves them
    undefined on later beats).
    """
    diffs = []
    if len(got) != len(expected):
        diffs.append(f"{len(got)} beats, expected {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected)):
        for field in ("first", "last", "dw_en", "err"):
            if getattr(g, field) != getattr(e, field):
                diffs.append(f"beat {i}: {field}={getattr(g, field)}, expected {getattr(e, field)}")
        if _lanes(g.data, g.dw_en) != _lanes(e.data, e.dw_en):
            diffs.append(f"beat {i}: data {g.data:032x}, expected {e.data:032x}")
    if got and expected:
        if got[0].hdr != expected[0].hdr:
            diffs.append(f"hdr {got[0].hdr:032x}, expected {expected[0].hdr:032x}")
        if got[0].bar != expected[0].bar:
            diffs.append(f"bar {got[0].bar:#x}, expected {expected[0].bar:#x}")
    return diffs


class StreamMonitor:
    """Collect packets from an internal TLP stream exposed as flat signals.

    Parameters
    ----------
    clk : cocotb handle
    signals : dict
        Handles for ``valid``, ``ready``, ``hdr``, ``data``, ``dw_en``, ``first``, ``last``,
        ``err``, ``bar``.

    Each completed packet is appended to :attr:`packets` as a list of :class:`Beat`.  Beats
    outside a packet (no ``first``) are recorded in :attr:`errors`.
    """

    def __init__(self, clk, signals):
        self.clk = clk
        self.sig = signals
        self.packets = []
        self.errors = []
        self._cur = []

    async def run(self):
        edge = RisingEdge(self.clk)
        s = self.sig
        while True:
            await edge
            if not (s["valid"].value and s["ready"].value):
                continue
            dw_en = int(s["dw_en"].value)
            first = int(s["first"].value)
            hdr, hdr_x = resolve_unknown(s["hdr"].value)
            data, data_x = resolve_unknown(s["data"].value)
            enabled = sum(0xFFFFFFFF << (32 * lane) for lane in range(4) if dw_en >> lane & 1)
            if data_x & enabled or (first and hdr_x):
                self.errors.append(f"X/Z in an enabled lane or the header: "
                                   f"data {s['data'].value}, hdr {s['hdr'].value}")
            beat = Beat(hdr=hdr, data=data, dw_en=dw_en, first=first,
                        last=int(s["last"].value), err=int(s["err"].value),
                        bar=int(s["bar"].value))
            if beat.first and self._cur:
                self.errors.append(f"first beat inside a packet: {beat}")
                self._cur = []
            if not beat.first and not self._cur:
                self.errors.append(f"beat outside a packet: {beat}")
                continue
            self._cur.append(beat)
            if beat.last:
                self.packets.append(self._cur)
                self._cur = []
