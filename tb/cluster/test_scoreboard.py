"""The soak's scoreboard (``peach2.sim.reference.scoreboard``) without a simulator: a clean run passes,
and every fault class it must catch (lost, duplicated, corrupted, reordered bytes, writes
outside every domain, memory changed behind its back) is injected and named."""

import random

import pytest
from cocotbext.pcie.core.tlp import Tlp, TlpType

from peach2.sim.pcie import store_tlps
from peach2.sim.reference import Scoreboard

SIZE = 0x4000


def board(seed=1):
    """Two nodes, two domains each (a PIO source and a DMA channel), random writes issued
    into each; return the scoreboard and the TLPs in the order a correct fabric delivers
    them: ``[(node, offset, bytes)]`` (each domain's in issue order, domains interleaved)."""
    rng = random.Random(seed)
    initial = [rng.randbytes(SIZE) for _ in range(2)]
    sb = Scoreboard(initial)
    per_domain = []
    for node in range(2):
        for k, name in enumerate(("pio", "dma")):
            lo = k * SIZE // 2
            sb.add_domain((node, name), node, lo, lo + SIZE // 2)
            tlps = []
            for _ in range(12):
                size = rng.randint(1, 700)
                off = lo + rng.randrange(SIZE // 2 - size)      # overlapping writes too
                data = rng.randbytes(size)
                sb.issue((node, name), off, data)
                for a, n in store_tlps(off, size, 128):
                    tlps.append((node, a, data[a - off:a - off + n]))
            per_domain.append(tlps)
    merged = []
    while any(per_domain):      # interleave the domains at random, each in its order
        tlps = rng.choice([t for t in per_domain if t])
        merged.append(tlps.pop(0))
    return sb, initial, merged


def final_memory(initial, delivered):
    mem = [bytearray(m) for m in initial]
    for node, off, data in delivered:
        mem[node][off:off + len(data)] = data
    return mem


def run(sb, initial, delivered):
    for node, off, data in delivered:
        sb.arrive(node, off, data)
    sb.finish()
    for node, mem in enumerate(final_memory(initial, delivered)):
        sb.check_memory(node, mem)
    return sb.faults


def test_clean_run_passes():
    sb, initial, tlps = board()
    faults = run(sb, initial, tlps)
    assert sb.clean, (faults, sb.reports)
    assert sb.tlps == len(tlps)
    assert sb.bytes_checked == sum(len(d) for _, _, d in tlps) > 0
    assert sb.outstanding == 0


def test_split_differently_passes():
    """Arrivals cut at other places than the issue (the sequence is per byte, not per TLP)."""
    sb, initial, tlps = board()
    cut = []
    for node, off, data in tlps:
        h = len(data) // 2
        cut += [(node, off, data[:h]), (node, off + h, data[h:])] if h else [(node, off, data)]
    run(sb, initial, cut)
    assert sb.clean, sb.reports


def test_lost_tlp():
    sb, initial, tlps = board()
    victim = tlps.pop(len(tlps) // 2)
    faults = run(sb, initial, tlps)
    assert faults["lost"] >= len(victim[2]), sb.reports
    assert faults["reordered"] == 0, "a loss is not a reordering"
    assert faults["duplicated"] == 0


def test_lost_last_tlp():
    sb, initial, tlps = board()
    tlps.pop()
    faults = run(sb, initial, tlps)
    assert faults["lost"] > 0 and faults["reordered"] == 0, sb.reports


def test_duplicated_tlp():
    sb, initial, tlps = board()
    i = len(tlps) // 3
    tlps.insert(i + 3, tlps[i])
    faults = run(sb, initial, tlps)
    assert faults["duplicated"] == 1, sb.reports
    assert faults["lost"] == faults["reordered"] == 0


def test_duplicate_at_the_end():
    sb, initial, tlps = board()
    tlps.append(tlps[-1])
    faults = run(sb, initial, tlps)
    assert faults["duplicated"] == 1, sb.reports


def test_corrupted_byte():
    sb, initial, tlps = board()
    node, off, data = tlps[5]
    tlps[5] = (node, off, data[:-1] + bytes([data[-1] ^ 0x40]))
    faults = run(sb, initial, tlps)
    assert faults["corrupted"] >= 1, sb.reports
    assert faults["lost"] == faults["reordered"] == faults["duplicated"] == 0


def test_corrupted_address():
    """A write landing at the wrong address (another domain's range, or outside all)."""
    sb, initial, tlps = board()
    node, off, data = tlps[7]
    tlps[7] = (node, (off + SIZE // 2) % SIZE, data)
    faults = run(sb, initial, tlps)
    assert faults["corrupted"] >= 1 and faults["lost"] == len(data), sb.reports
    sb2 = Scoreboard([bytes(64)])
    sb2.add_domain("a", 0, 0, 32)
    sb2.issue("a", 0, b"xy")
    assert not sb2.arrive(0, 40, b"xy")
    assert sb2.faults["corrupted"] == 1


def test_reordered_within_domain():
    """Two TLPs of one domain swapped: both arrive, one overtook the other."""
    sb, initial, tlps = board()
    same = [i for i, t in enumerate(tlps) if t[0] == 1 and t[1] >= SIZE // 2]
    a, b = same[3], same[4]
    tlps[a], tlps[b] = tlps[b], tlps[a]
    faults = run(sb, initial, tlps)
    assert faults["reordered"] == 1, sb.reports
    assert faults["lost"] == faults["duplicated"] == 0


def test_reordering_across_domains_is_allowed():
    """Different domains have no order between them: any interleaving is clean."""
    for seed in range(5):
        sb, initial, tlps = board(seed)
        rng = random.Random(seed)
        by_domain = {}
        for t in tlps:
            by_domain.setdefault((t[0], t[1] >= SIZE // 2), []).append(t)
        again = []
        while any(by_domain.values()):
            again.append(rng.choice([v for v in by_domain.values() if v]).pop(0))
        run(sb, initial, again)
        assert sb.clean, sb.reports


def test_reordered_overlap_final_value():
    """Sequence-numbered writes to one address: a reordering leaves the older value in memory,
    which the final memory compare catches even without the arrival hook."""
    sb = Scoreboard([bytes(16)])
    sb.add_domain("a", 0, 0, 16)
    for k in range(4):
        sb.issue("a", 4, k.to_bytes(4, "little"))
    memory = bytearray(16)
    memory[4:8] = (2).to_bytes(4, "little")       # the last write overtaken by the third
    assert sb.check_memory(0, memory) == 1
    assert sb.faults["corrupted"] == 1


def test_memory_changed_behind_the_hook():
    sb, initial, tlps = board()
    for node, off, data in tlps:
        sb.arrive(node, off, data)
    sb.finish()
    mem = final_memory(initial, tlps)
    mem[1][SIZE - 1] ^= 1
    assert sb.check_memory(0, mem[0]) == 0
    assert sb.check_memory(1, mem[1]) == 1
    assert sb.faults["corrupted"] == 1


def tlp_of(address, data):
    """A memory write TLP as the root complex receives it (byte enables from the address)."""
    t = Tlp()
    t.fmt_type = TlpType.MEM_WRITE_64
    t.set_addr_be_data(address, data)
    return t


@pytest.mark.parametrize("offset,size", [(0, 1), (1, 1), (2, 2), (3, 1), (1, 2), (0, 4),
                                         (1, 7), (3, 9), (5, 256), (0x10, 100)])
def test_tlp_byte_enables(offset, size):
    sb = Scoreboard([bytes(1024)])
    sb.add_domain("a", 0, 0, 1024)
    data = bytes(random.Random(size).randbytes(size))
    sb.issue("a", offset, data)
    assert sb.arrive_tlp(0, 0x1000_0000, tlp_of(0x1000_0000 + offset, data)), sb.reports
    assert sb.clean and sb.bytes_checked == size


def test_byte_enable_hole_is_caught():
    sb = Scoreboard([bytes(64)])
    sb.add_domain("a", 0, 0, 64)
    sb.issue("a", 0, b"abcd")
    t = tlp_of(0x2000, b"abcd")
    t.first_be = 0b1011           # byte 2 not written
    assert not sb.arrive_tlp(0, 0x2000, t)
    sb.finish()
    assert sb.faults["lost"] == 1, sb.reports     # byte 2 never came


def test_domains_must_not_overlap():
    sb = Scoreboard([bytes(64)])
    sb.add_domain("a", 0, 0, 32)
    with pytest.raises(ValueError):
        sb.add_domain("b", 0, 16, 48)
    with pytest.raises(ValueError):
        sb.issue("a", 30, b"xyz")     # past the domain's end
