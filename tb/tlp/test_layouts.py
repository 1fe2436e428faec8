"""TLP header layouts against cocotbext-pcie's ``Tlp.pack()``/``Tlp.unpack()``.

For random field values, in both directions: a ``Tlp`` packed by cocotbext-pcie and read through
our layout gives the same fields, and a header built from our layout unpacks to the same ``Tlp``.
"""

import random

import pytest
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.tlp.layouts import (
    DW0,
    Completion,
    CplStatus,
    Fmt,
    FmtType,
    MemRequest32,
    MemRequest64,
    TLPHeader,
    Type,
    header_from_bytes,
    header_to_bytes,
)

SEED = 20261121
N = 300

_KINDS = {
    "mrd32": (TlpType.MEM_READ, MemRequest32, 3),
    "mwr32": (TlpType.MEM_WRITE, MemRequest32, 3),
    "mrd64": (TlpType.MEM_READ_64, MemRequest64, 4),
    "mwr64": (TlpType.MEM_WRITE_64, MemRequest64, 4),
    "cpl":   (TlpType.CPL, Completion, 3),
    "cpld":  (TlpType.CPL_DATA, Completion, 3),
}


def _code(fmt_type):
    """cocotbext-pcie's ``TlpType`` value ``(fmt, type)`` as the 8-bit ``fmt << 5 | type``."""
    fmt, type_ = fmt_type.value
    return int(fmt) << 5 | int(type_)


def _random_common(rng):
    return {
        "length": rng.randrange(1, 1024), "at": rng.randrange(3), "attr": rng.randrange(8),
        "ep": rng.randrange(2), "td": rng.randrange(2), "th": rng.randrange(2),
        "ln": rng.randrange(2), "tc": rng.randrange(8), "tag": rng.randrange(1024),
    }


def _random_tlp(rng, kind):
    fmt_type, _, _ = _KINDS[kind]
    tlp = Tlp()
    tlp.fmt_type = fmt_type
    f = _random_common(rng)
    tlp.length, tlp.at, tlp.attr = f["length"], f["at"], f["attr"]
    tlp.ep, tlp.td, tlp.th, tlp.ln = f["ep"], f["td"], f["th"], f["ln"]
    tlp.tc, tlp.tag = f["tc"], f["tag"]
    tlp.requester_id = PcieId.from_int(rng.randrange(1 << 16))
    if kind.startswith("cpl"):
        tlp.completer_id = PcieId.from_int(rng.randrange(1 << 16))
        tlp.status = rng.choice([0, 1, 2, 4])
        tlp.bcm = rng.randrange(2)
        tlp.byte_count = rng.randrange(1 << 12)
        tlp.lower_address = rng.randrange(1 << 7)
    else:
        tlp.first_be = rng.randrange(16)
        tlp.last_be = rng.randrange(16)
        tlp.ph = rng.randrange(4)
        bits = 64 if kind.endswith("64") else 32
        tlp.address = rng.randrange(1 << bits) & ~3
    if tlp.has_data():
        tlp.data = bytes(4 * tlp.length)
    return tlp


def _common_fields(view):
    tag = view.tag | (view.t8 << 8) | (view.t9 << 9)
    attr = view.attr | (view.attr2 << 2)
    return tag, attr


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_layout_reads_packed_tlp(kind):
    """Fields read through the layout equal the fields cocotbext-pcie packed."""
    fmt_type, layout, dws = _KINDS[kind]
    rng = random.Random(f"{SEED}-{kind}")
    for _ in range(N):
        tlp = _random_tlp(rng, kind)
        raw = bytes(tlp.pack())
        value = header_from_bytes(raw[:4 * dws])
        view = layout.from_bits(value)
        assert (view.fmt.value << 5 | view.type.value) == _code(fmt_type)
        assert FmtType(_code(fmt_type)).value == _code(fmt_type)
        assert view.length == tlp.length % 1024
        assert (view.at, view.ep, view.td, view.th, view.ln, view.tc) == (
            tlp.at, tlp.ep, tlp.td, tlp.th, tlp.ln, tlp.tc)
        assert _common_fields(view) == (tlp.tag, tlp.attr)
        if layout is Completion:
            assert view.requester_id == int(tlp.requester_id)
            assert view.completer_id == int(tlp.completer_id)
            assert view.status.value == tlp.status
            assert (view.bcm, view.byte_count, view.lower_address) == (
                tlp.bcm, tlp.byte_count, tlp.lower_address)
        else:
            assert view.requester_id == int(tlp.requester_id)
            assert (view.first_be, view.last_be, view.ph) == (tlp.first_be, tlp.last_be, tlp.ph)
            if layout is MemRequest64:
                address = (view.address_hi << 32) | (view.address_lo << 2)
            else:
                address = view.address << 2
            assert address == tlp.address
        # The union reads the same DW 0 through `common`.
        union = TLPHeader.from_bits(value)
        assert union.common.fmt == view.fmt
        assert union.common.length == view.length


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_layout_builds_unpackable_header(kind):
    """A header built from the layout unpacks, with cocotbext-pcie, to the same fields."""
    fmt_type, layout, dws = _KINDS[kind]
    rng = random.Random(f"{SEED}-build-{kind}")
    for _ in range(N):
        ref = _random_tlp(rng, kind)
        fields = {
            "fmt": Fmt(_code(fmt_type) >> 5), "type": Type(_code(fmt_type) & 0x1f),
            "length": ref.length % 1024, "at": ref.at, "attr": ref.attr & 3,
            "attr2": ref.attr >> 2, "ep": ref.ep, "td": ref.td, "th": ref.th, "ln": ref.ln,
            "tc": ref.tc, "tag": ref.tag & 0xff, "t8": (ref.tag >> 8) & 1,
            "t9": (ref.tag >> 9) & 1, "requester_id": int(ref.requester_id),
        }
        if layout is Completion:
            fields.update(completer_id=int(ref.completer_id), status=CplStatus(ref.status),
                          bcm=ref.bcm, byte_count=ref.byte_count,
                          lower_address=ref.lower_address)
        else:
            fields.update(first_be=ref.first_be, last_be=ref.last_be, ph=ref.ph)
            if layout is MemRequest64:
                fields.update(address_hi=ref.address >> 32,
                              address_lo=(ref.address & 0xffffffff) >> 2)
            else:
                fields.update(address=ref.address >> 2)
        value = layout.const(fields).as_value().value
        raw = header_to_bytes(value, dws) + (bytes(4 * ref.length) if ref.has_data() else b"")
        got = Tlp.unpack(raw)
        assert got == ref, f"{got!r} != {ref!r}"


def test_dw0_is_one_dw():
    assert DW0.size == 32
    for layout in (MemRequest32, MemRequest64, Completion):
        assert layout.size == 128


def test_fmt_type_matches_cocotbext():
    codes = {_code(t) for t in TlpType}
    for member in FmtType:
        assert member.value in codes, member
