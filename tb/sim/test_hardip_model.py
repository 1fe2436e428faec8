"""Pure-Python tests of the Stratix IV 128-bit framing in :mod:`peach2.sim.hardip.avalon`.

No simulator: ``tlp_to_avalon_beats`` / ``avalon_beats_to_tlp`` are checked against the framing
rules of the vendor's user guide (IP Compiler for PCI Express, Avalon-ST 128; summarised in
docs/adapters.md) and against each other, for every TLP kind the chip moves.
"""

import random

import pytest
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.hardip import (
    AvalonBeat,
    FramingError,
    avalon_beats_to_tlp,
    payload_offset,
    tlp_to_avalon_beats,
)

LENGTHS = sorted({1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 255,
                  256, 511, 1023, 1024} | set(random.Random(1).sample(range(1, 1025), 12)))


def mwr(addr, ndw, is64, seed=0):
    tlp = Tlp()
    tlp.fmt_type = TlpType.MEM_WRITE_64 if is64 else TlpType.MEM_WRITE
    tlp.requester_id = PcieId(1, 0, 0)
    tlp.tag = 0x15
    tlp.address = addr
    tlp.set_data(random.Random(seed).randbytes(4 * ndw))
    tlp.first_be = 0xF
    tlp.last_be = 0xF if ndw > 1 else 0
    return tlp


def mrd(addr, ndw, is64):
    tlp = Tlp()
    tlp.fmt_type = TlpType.MEM_READ_64 if is64 else TlpType.MEM_READ
    tlp.requester_id = PcieId(2, 0, 0)
    tlp.tag = 7
    tlp.address = addr
    tlp.length = ndw
    tlp.first_be, tlp.last_be = 0xF, 0xF if ndw > 1 else 0
    return tlp


def cpld(lower_address, ndw, seed=0):
    tlp = Tlp()
    tlp.fmt_type = TlpType.CPL_DATA
    tlp.requester_id = PcieId(1, 0, 0)
    tlp.completer_id = PcieId(0, 0, 0)
    tlp.tag = 3
    tlp.lower_address = lower_address
    tlp.byte_count = 4 * ndw
    tlp.set_data(random.Random(seed).randbytes(4 * ndw))
    return tlp


def expected_beats(hdr_dw, bit2, ndw):
    """Beat count and empty from the framing rule (first payload DW at s = 3/4 or 4/5)."""
    s = (3 if bit2 else 4) if hdr_dw == 3 else (5 if bit2 else 4)
    n = s + ndw if ndw else hdr_dw
    beats = (n + 3) // 4
    return beats, int(n - 4 * (beats - 1) <= 2), s


def lanes(beats):
    """All DW lanes of the beats, in stream order."""
    return [(b.data >> 32 * i) & 0xFFFF_FFFF for b in beats for i in range(4)]


def roundtrip(tlp, **kw):
    beats = tlp_to_avalon_beats(tlp, **kw)
    back = avalon_beats_to_tlp(beats)
    assert bytes(back.pack()) == bytes(tlp.pack())
    assert back == tlp
    return beats


@pytest.mark.parametrize("is64", [False, True])
@pytest.mark.parametrize("bit2", [0, 1])
@pytest.mark.parametrize("ndw", LENGTHS)
def test_mwr(is64, bit2, ndw):
    base = 0x1_2345_0000 if is64 else 0x8000_0000
    addr = base + 4 * bit2
    tlp = mwr(addr, ndw, is64, seed=ndw)
    beats = roundtrip(tlp)
    n_beats, empty, s = expected_beats(4 if is64 else 3, bit2, ndw)
    assert len(beats) == n_beats
    assert beats[-1].empty == empty
    assert [b.sop for b in beats] == [True] + [False] * (n_beats - 1)
    assert [b.eop for b in beats] == [False] * (n_beats - 1) + [True]
    assert payload_offset(tlp) == s
    dws = lanes(beats)
    hdr = tlp.pack_header()
    assert dws[:len(hdr) // 4] == [int.from_bytes(hdr[i:i + 4], "big")
                                   for i in range(0, len(hdr), 4)]
    data = tlp.get_data()
    assert dws[s] == int.from_bytes(data[0:4], "little")
    assert dws[s] & 0xFF == data[0]  # payload byte 0 in bits [7:0]
    assert dws[s + ndw - 1] == int.from_bytes(data[-4:], "little")
    # SOP carries bardec only; be marks payload lanes
    assert beats[0].bardec == 0
    assert all(((b.be >> 4 * i) & 0xF) == (0xF if s <= 4 * k + i < s + ndw else 0)
               for k, b in enumerate(beats) for i in range(4))


@pytest.mark.parametrize("is64,bit2,n_beats", [(False, 0, 17), (False, 1, 17),
                                               (True, 0, 17), (True, 1, 18)])
def test_256_byte_mwr_beats(is64, bit2, n_beats):
    addr = (0x2_0000_0000 if is64 else 0x1000) + 4 * bit2
    beats = tlp_to_avalon_beats(mwr(addr, 64, is64))
    assert len(beats) == n_beats


@pytest.mark.parametrize("is64", [False, True])
@pytest.mark.parametrize("ndw", [1, 2, 64, 128, 1024])
def test_mrd_single_beat(is64, ndw):
    tlp = mrd((0x3_0000_0000 if is64 else 0x4000) + 4, ndw, is64)
    beats = roundtrip(tlp, bardec=0b100)
    assert len(beats) == 1 and beats[0].sop and beats[0].eop
    assert beats[0].empty == 0  # 3 or 4 header lanes used
    assert beats[0].bardec == 0b100
    assert beats[0].be == 0


def test_cpl_without_data():
    tlp = Tlp.create_ur_completion_for_tlp(mrd(0x100, 1, False), PcieId(0, 0, 0))
    tlp.byte_count = 4  # 0 would unpack as 4096
    beats = roundtrip(tlp)
    assert len(beats) == 1 and beats[0].empty == 0


@pytest.mark.parametrize("lower_address", [0x00, 0x04, 0x08, 0x0C, 0x40, 0x7C])
@pytest.mark.parametrize("ndw", [1, 2, 3, 16, 32, 64])
def test_cpld(lower_address, ndw):
    tlp = cpld(lower_address, ndw, seed=ndw)
    beats = roundtrip(tlp)
    n_beats, empty, s = expected_beats(3, (lower_address >> 2) & 1, ndw)
    assert (len(beats), beats[-1].empty, payload_offset(tlp)) == (n_beats, empty, s)
    assert lanes(beats)[s] == int.from_bytes(tlp.get_data()[:4], "little")


def test_partial_byte_enables():
    tlp = Tlp()
    tlp.fmt_type = TlpType.MEM_WRITE
    tlp.set_addr_be_data(0x1001, bytes(range(10)))  # first_be 0xe, last_be 0x7
    beats = roundtrip(tlp)
    s = payload_offset(tlp)
    be = sum(b.be << 16 * k for k, b in enumerate(beats))
    assert (be >> 4 * s) & 0xF == 0xE
    assert (be >> 4 * (s + tlp.length - 1)) & 0xF == 0x7


@pytest.mark.parametrize("is64,bit2", [(False, 0), (False, 1), (True, 0), (True, 1)])
def test_dirty_pad_roundtrip(is64, bit2):
    tlp = mwr((0x5_0000_0000 if is64 else 0x2000) + 4 * bit2, 6, is64)
    clean = tlp_to_avalon_beats(tlp)
    dirty = roundtrip(tlp, rng=random.Random(7))
    assert len(dirty) == len(clean)
    assert any(c.data != d.data for c, d in zip(clean, dirty))  # pad or tail filled


def test_framing_errors():
    beats = tlp_to_avalon_beats(mwr(0x1000, 8, False))
    with pytest.raises(FramingError) as e:
        avalon_beats_to_tlp(beats[:-1])
    assert e.value.rule == "eop"
    cut = beats[:-2] + [beats[-2]._replace(eop=True)]
    with pytest.raises(FramingError) as e:
        avalon_beats_to_tlp(cut)
    assert e.value.rule == "length"
    bad_empty = beats[:-1] + [beats[-1]._replace(empty=1 - beats[-1].empty)]
    with pytest.raises(FramingError) as e:
        avalon_beats_to_tlp(bad_empty)
    assert e.value.rule == "empty"
    with pytest.raises(FramingError) as e:
        avalon_beats_to_tlp([beats[0]._replace(sop=False)] + beats[1:])
    assert e.value.rule == "sop"
    extra = beats[:-1] + [beats[-1]._replace(eop=False), AvalonBeat(0, False, True, 1)]
    with pytest.raises(FramingError) as e:
        avalon_beats_to_tlp(extra)
    assert e.value.rule == "length"
