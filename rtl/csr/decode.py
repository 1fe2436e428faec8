"""The register block's request decode: the header of a BAR 0 request, and its completion's.

Byte count and lower address follow the PCIe rules for ``first_be``/``last_be`` (a zero-length
read returns 1 DW, byte count 1); a read of more than 2 DWs, or of 2 DWs at the last DW of the
BAR, is answered with a completer abort (``docs/registers.md``, access rules).
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Mux, Signal

from ..tlp.align import payload_dws
from ..tlp.layouts import Completion, CplStatus, Fmt, FmtType, Type

__all__ = ["decode_request"]


def _low_zeros(be):
    """Offset of the first enabled byte of ``be`` (0000 -> 0)."""
    return Mux(be[0], 0, Mux(be[1], 1, Mux(be[2], 2, Mux(be[3], 3, 0))))


def _high_zeros(be):
    """Disabled bytes of ``be`` after the last enabled one (0000 -> 0)."""
    return Mux(be[3], 0, Mux(be[2], 1, Mux(be[1], 2, Mux(be[0], 3, 0))))


def decode_request(m, beat, completer_id):
    """Add the decode of the request header in ``beat`` (a ``TLPBeat`` signal) to ``m``.

    Return a namespace of registered values, valid from the second cycle after the beat was
    taken: ``good_wr`` (a memory write, not poisoned, no ``err``), ``good_rd`` (a memory read
    whose only beat has no ``err``), ``read_ok`` (1 DW, or 2 DWs not at the last DW of the BAR),
    ``two_dws``, ``req_addr`` (DW address in the BAR), ``req_len`` (DWs), ``cpl_hdr`` (the
    completion's header: CplD SC or, for a read not ``read_ok``, Cpl CA with byte count 4,
    completer ``completer_id``); and ``first_be``/``last_be`` of the header (not registered).
    """
    hdr = beat.hdr
    fmt_type = hdr.dw[0][24:32]
    is_mwr = (fmt_type == FmtType.MWR32.value) | (fmt_type == FmtType.MWR64.value)
    is_mrd = (fmt_type == FmtType.MRD32.value) | (fmt_type == FmtType.MRD64.value)
    four_dw = hdr.common.fmt.as_value()[0]
    addr_dw = Mux(four_dw, hdr.mem64.address_lo[0:10], hdr.mem32.address[0:10])
    length = Signal(11)
    m.d.comb += length.eq(payload_dws(hdr))
    req_first_be = hdr.mem32.first_be
    req_last_be = hdr.mem32.last_be

    rd_ok = (length == 1) | ((length == 2) & (addr_dw != 0x3ff))
    byte_count = Signal(12)
    with m.If(~rd_ok):
        m.d.comb += byte_count.eq(4)
    with m.Elif(length == 1):
        m.d.comb += byte_count.eq(Mux(req_first_be == 0, 1,
                                      4 - _low_zeros(req_first_be) - _high_zeros(req_first_be)))
    with m.Else():
        m.d.comb += byte_count.eq(8 - _low_zeros(req_first_be) - _high_zeros(req_last_be))

    # The decisions and the completion header are registered, recomputed every cycle from
    # ``beat`` (which holds from one FETCH to the next): they are valid from the second
    # cycle after the beat was taken, which the state HEAD waits for.  Deciding from
    # ``beat`` directly would take 7 LUT levels to the state and the header.
    good_wr = Signal()
    good_rd = Signal()
    read_ok = Signal()
    two_dws = Signal()
    req_addr = Signal(10)
    req_len  = Signal(11)
    cpl_hdr = Signal(Completion)
    m.d.sync += [
        good_wr.eq(is_mwr & ~beat.err & ~hdr.common.ep),
        good_rd.eq(is_mrd & ~beat.err & beat.last),
        read_ok.eq(rd_ok),
        two_dws.eq(length == 2),
        req_addr.eq(addr_dw),
        req_len.eq(length),
        cpl_hdr.fmt.eq(Mux(rd_ok, Fmt.DW3_DATA, Fmt.DW3_NO_DATA)),
        cpl_hdr.type.eq(Type.CPL),
        cpl_hdr.length.eq(Mux(rd_ok, length, 0)),
        cpl_hdr.tc.eq(hdr.common.tc),
        cpl_hdr.attr.eq(hdr.common.attr),
        cpl_hdr.attr2.eq(hdr.common.attr2),
        cpl_hdr.t8.eq(hdr.common.t8),
        cpl_hdr.t9.eq(hdr.common.t9),
        cpl_hdr.status.eq(Mux(rd_ok, CplStatus.SC, CplStatus.CA)),
        cpl_hdr.byte_count.eq(byte_count),
        cpl_hdr.completer_id.eq(completer_id),
        cpl_hdr.requester_id.eq(hdr.mem32.requester_id),
        cpl_hdr.tag.eq(hdr.mem32.tag),
        cpl_hdr.lower_address.eq(Cat(_low_zeros(req_first_be)[0:2], addr_dw[0:5])),
    ]
    return SimpleNamespace(good_wr=good_wr, good_rd=good_rd, read_ok=read_ok, two_dws=two_dws,
                           req_addr=req_addr, req_len=req_len, cpl_hdr=cpl_hdr,
                           first_be=req_first_be, last_be=req_last_be)
