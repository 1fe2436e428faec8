"""The chip's one internal TLP stream format.

Every block inside the chip (hard-IP adapters, router, DMA, registers) passes TLPs as a
:class:`amaranth.lib.stream` of :data:`TLPBeat`.  ``docs/stream.md`` has the beat diagrams.

Contract
--------
- A packet is one or more beats; ``first`` marks the first, ``last`` the last (a header-only TLP
  is one beat with both set).
- ``hdr`` is the whole TLP header (:class:`~peach2.tlp.layouts.TLPHeader`), valid on the first
  beat.  Producers in this design hold it for the whole packet; consumers must not rely on that.
- ``data`` carries payload DWs **packed from lane 0**: payload DW ``4*k + j`` is in lane ``j``
  (bits ``[32*j+31 : 32*j]``) of beat ``k``; the first beat carries payload DWs 0-3 beside the
  header.  Payload bytes are little-endian within a DW (byte 0 of the DW in bits ``[7:0]``).
  No alignment padding ever appears here: the hard IP's quad-word alignment lives only in the
  adapters.
- ``dw_en`` marks the valid lanes; it is ``0b1111`` on every beat but the last, contiguous from
  lane 0 on the last, and ``0`` for a TLP without payload.  The number of beats and ``dw_en`` of
  the last beat always agree with ``hdr.common.length`` (0 meaning 1024 DWs), except for a packet
  ended with ``err`` (below).
- ``err`` may be set on the last beat only: the packet was found bad after it started to flow
  (cut-through) and must be discarded by whoever terminates it; an Avalon-ST TX adapter drops
  it unsent when it holds it whole, and nullifies it on the link only when it had already
  started it.  A packet ending with ``err`` may have fewer beats than its length.
- ``bar`` is the one-hot BAR hit of a memory request received from the link (hard-IP
  ``rx_st_bardec``), valid on the first beat; zero for every other TLP and for TLPs made
  inside the chip.
- ``hdr`` never announces a digest (``td`` = 0) and DW 3 of a 3-DW header is zero.
- Stream rules of :mod:`amaranth.lib.stream` hold: a beat moves when ``valid & ready``;
  ``valid`` never waits for ``ready``; one beat can move every cycle.
"""

from amaranth.lib import data, stream

from .layouts import TLPHeader

__all__ = ["DATA_DWS", "TLPBeat", "TLPStream", "payload_beats", "last_dw_en"]


#: Payload DWs per beat.
DATA_DWS = 4


class TLPBeat(data.Struct):
    """One beat of the internal TLP stream (see the module docstring for the contract)."""
    data:  128
    dw_en: 4
    hdr:   TLPHeader
    bar:   8
    first: 1
    last:  1
    err:   1


def TLPStream():
    """Return the stream signature of the internal TLP stream (source direction)."""
    return stream.Signature(TLPBeat)


def payload_beats(length_dw):
    """Return how many beats carry ``length_dw`` payload DWs (at least one beat per TLP)."""
    return max(1, (length_dw + DATA_DWS - 1) // DATA_DWS)


def last_dw_en(length_dw):
    """Return ``dw_en`` of the last beat of a TLP with ``length_dw`` payload DWs."""
    if length_dw == 0:
        return 0
    return (1 << (((length_dw - 1) % DATA_DWS) + 1)) - 1
