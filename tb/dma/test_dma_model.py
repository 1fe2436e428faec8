"""DMA reference model, descriptor chains, halo shapes and the driver's DMA calls (no simulator).

The driver runs against :class:`FakeChip`: a BAR whose register block is the reference model
of the register map for the DMA registers, with an "engine" that runs the reference model
(``peach2.sim.reference.dma``) when a channel is started.  That checks the driver's register
sequences and its error reporting; the gateware is checked by ``test_dma.py``.
"""

import asyncio
import random

import pytest

from peach2.csr.regmap import REGMAP, DmaError
from peach2.dma import descriptor
from peach2.sim.driver import (
    PLANES,
    Chain,
    DmaFault,
    Driver,
    DriverError,
    contiguous,
    halo_plane,
    halo_transfer,
    memcpy,
)
from peach2.sim.reference import dma as dma_model


class SparseMemory:
    """Byte-addressed memory, zero where never written; sync and async access."""

    def __init__(self):
        self.bytes = {}

    def get(self, address, n):
        return bytes(self.bytes.get(address + i, 0) for i in range(n))

    def put(self, address, data):
        for i, b in enumerate(data):
            self.bytes[address + i] = b

    async def read(self, address, n):
        return self.get(address, n)

    async def write(self, address, data):
        self.put(address, data)


class FakeChip:
    """BAR 0 of a chip whose DMA is the reference model; writes land in ``dest`` at once."""

    def __init__(self, memory, routable=None):
        self.regs = {}
        self.memory = memory
        self.dest = SparseMemory()
        self.routable = routable
        self.log = []
        self.status = {c: dict(busy=0, error=0, done=0, bytes=0, addr=0) for c in range(4)}
        self.polls_busy = 2     # CH_STATUS reads busy this many times after a start
        self.appends = []       # (channel, slots) of every CH_CTRL.append

    def _reg(self, name, index=None):
        return REGMAP[name].offset_of(index)

    def _slot(self, c, s):
        get = lambda n: self.regs.get(self._reg(f"SLOT_{n}", (c, s)), 0)   # noqa: E731
        return {"src": get("SRC_LO") | get("SRC_HI") << 32,
                "dst": get("DST_LO") | get("DST_HI") << 32,
                "length": get("LENGTH"), "control": get("CONTROL"), "count": get("COUNT"),
                "src_gap": get("SRC_GAP"), "dst_gap": get("DST_GAP"),
                "seq_value": get("SEQ_VALUE"),
                "seq_addr": get("SEQ_ADDR_LO") | get("SEQ_ADDR_HI") << 32, "next": 0,
                "reserved": 0}

    def _finish(self, c, outcome):
        for address, data in outcome.writes:
            self.dest.put(address, data)
        self.status[c] = dict(busy=self.polls_busy, error=int(outcome.error),
                              done=outcome.desc_done, bytes=outcome.bytes,
                              addr=outcome.desc_addr or 0)

    async def write(self, addr, data):
        self.log.append(("w", addr, bytes(data)))
        for k in range(len(data) // 4):
            a = addr + 4 * k
            v = int.from_bytes(data[4 * k:4 * k + 4], "little")
            self.regs[a] = v
            for c in range(4):
                if a == self._reg("CH_CTRL", c):
                    f = REGMAP["CH_CTRL"].decode(v)
                    if f["start"]:
                        head = self.regs.get(self._reg("CH_HEAD_LO", c), 0) | \
                            self.regs.get(self._reg("CH_HEAD_HI", c), 0) << 32
                        self._finish(c, dma_model.run_chain(head, self.memory.get,
                                                            announced=f["adj"],
                                                            routable=self.routable))
                    elif f["reg_start"] and f["queue"]:      # a queue whose slots never close
                        self.status[c] = dict(busy=1 << 30, error=0, done=0, bytes=0, addr=0,
                                              held=f["slots"])
                    elif f["append"]:
                        self.appends.append((c, f["slots"]))
                        self.status[c]["held"] = self.status[c].get("held", 0) + f["slots"]
                    elif f["reg_start"]:
                        slots = [self._slot(c, s) for s in range(f["slots"])]
                        for d in slots:
                            for name, lsb, width, _ in descriptor.CONTROL_BITS:
                                d[name] = (d["control"] >> lsb) & ((1 << width) - 1)
                        self._finish(c, dma_model.run_slots(slots, self.memory.get,
                                                            routable=self.routable))
                    elif f["abort"]:
                        self.status[c].update(busy=0, error=int(DmaError.ABORTED))

    async def read(self, addr, length):
        self.log.append(("r", addr, length))
        out = b""
        for k in range(length // 4):
            a = addr + 4 * k
            v = self.regs.get(a, 0)
            for c in range(4):
                st = self.status[c]
                if a == self._reg("CH_STATUS", c):
                    v = REGMAP["CH_STATUS"].encode(busy=int(st["busy"] > 0), error=st["error"],
                                                   held=st.get("held", 0))
                    st["busy"] = max(0, st["busy"] - 1)
                elif a == self._reg("CH_DESC_DONE", c):
                    v = st["done"]
                elif a in (self._reg("CH_BYTES_LO", c), self._reg("CH_BYTES_HI", c)):
                    v = (st["bytes"] >> (32 if a == self._reg("CH_BYTES_HI", c) else 0)) \
                        & 0xFFFFFFFF
                elif a in (self._reg("CH_DESC_ADDR_LO", c), self._reg("CH_DESC_ADDR_HI", c)):
                    v = (st["addr"] >> (32 if a == self._reg("CH_DESC_ADDR_HI", c) else 0)) \
                        & 0xFFFFFFFF
            if a == REGMAP["DMA_CONFIG"].offset:
                v = self.regs.get(a, REGMAP["DMA_CONFIG"].value)
            out += v.to_bytes(4, "little")
        return out


def run(coro):
    return asyncio.run(coro)


def noise_reader(seed):
    """Deterministic 'source memory': byte at address a is a hash of a."""
    def read(address, n):
        return bytes(((a * 2654435761 + seed) >> 7) & 0xFF for a in range(address, address + n))
    return read


# -- descriptors and chains ------------------------------------------------------------------

def test_chain_links_and_end():
    """Pointers carry bit 0 for 64-byte descriptors; the last has end and next 0."""
    chain = Chain(channel=1, base=0x1000)
    chain.memcpy(0x10, 0x20, 100)
    chain.memcpy(0x30, 0x40, 8, count=3, src_gap=8, dst_gap=0)
    chain.memcpy(0x50, 0x60, 4, seq=(0x100, 7), irq=True)
    chain.memcpy(0x70, 0x80, 1)
    img = chain.image()
    # A 64-byte descriptor is 64-byte aligned: a hole of 32 bytes before the second.
    assert [a for a, _ in img] == [0x1000, 0x1040, 0x1080, 0x10C0]
    assert [len(b) for _, b in img] == [32, 64, 64, 32]
    assert chain.head == 0x1000
    ds = [descriptor.unpack(b) for _, b in img]
    assert [d["next"] for d in ds] == [0x1041, 0x1081, 0x10C0, 0]
    assert [d["end"] for d in ds] == [0, 0, 0, 1]
    # Announced runs: only the two 64-byte descriptors follow each other with one size.
    assert [d["adj"] for d in ds] == [0, 1, 0, 0]
    assert [descriptor.unpack(b)["adj"] for _, b in chain.image(adjacent=False)] == [0] * 4
    assert ds[2]["seq"] == 1 and ds[2]["irq"] == 1 and ds[2]["seq_value"] == 7
    assert ds[1]["count"] == 3 and ds[1]["src_gap"] == 8
    for d in ds:
        assert dma_model.check_descriptor(d) is None


def test_chain_placement_and_checks():
    chain = Chain(0, 0x2000)
    for i in range(5):
        chain.memcpy(i, 0x100 + i, 1 + i, count=None if i % 2 else 2)
    addrs = [0x9000, 0x2000, 0x5040, 0x3000, 0x7000]
    chain.place(addrs)
    mem = SparseMemory()
    for a, raw in chain.image():
        mem.put(a, raw)
    walked = dma_model.walk_chain(chain.head, mem.get)
    assert [a for a, _ in walked] == addrs
    with pytest.raises(ValueError, match="aligned"):
        chain.place([0x9000, 0x2010, 0x5040, 0x3000, 0x7000])
    with pytest.raises(ValueError, match="overlap"):
        chain.place([0x9000, 0x9020, 0x5040, 0x3000, 0x7000])   # 0x9000 is 64 bytes
    with pytest.raises(ValueError):
        memcpy(0, 0, 0)
    with pytest.raises(ValueError):
        memcpy(0, 0, 4, seq=(0x102, 1))
    with pytest.raises(ValueError):
        Chain(0, 0x1010)


@pytest.mark.parametrize("how", ["magic", "reserved_ctl", "reserved", "length", "count",
                                 "ext_ptr", "ext_ptr_short", "next_bits", "seq_no_ext",
                                 "seq_align", "next_ext_align", "adj_next"])
def test_malformed_checks(how):
    """Every check of docs/dma.md stops the walk at the bad descriptor, earlier ones kept."""
    good = memcpy(0x100, 0x200, 16)
    mem = SparseMemory()
    mem.put(0x1000, good.pack(next=0x1040))
    ext = how in ("reserved", "count", "ext_ptr", "seq_align")
    kw = dict(src=0x300, dst=0x400, length=8, end=True)
    if how == "magic":
        raw = descriptor.pack(**kw, control=descriptor._control(end=True, magic=0xD4))
    elif how == "reserved_ctl":
        raw = descriptor.pack(**kw, control=descriptor._control(end=True) | 1 << 20)
    elif how == "reserved":
        raw = bytearray(descriptor.pack(**kw, count=1))
        raw[0x38] = 1
    elif how == "length":
        raw = descriptor.pack(**{**kw, "length": 0})
    elif how == "count":
        raw = descriptor.pack(**kw, count=0)
    elif how == "ext_ptr":          # 64-byte descriptor behind a 32-byte pointer
        raw = descriptor.pack(**kw, count=2)
    elif how == "ext_ptr_short":    # 32-byte descriptor behind a 64-byte pointer
        raw = descriptor.pack(**kw)
    elif how == "next_bits":
        raw = descriptor.pack(**{**kw, "end": False}, next=0x1088)
    elif how == "next_ext_align":   # next: a 64-byte descriptor at a 32-byte boundary
        raw = descriptor.pack(**{**kw, "end": False}, next=0x1021)
    elif how == "adj_next":         # announces a run, but next is elsewhere
        raw = descriptor.pack(**{**kw, "end": False}, next=0x2000, adj=1)
    elif how == "seq_no_ext":
        raw = descriptor.pack(**kw, control=descriptor._control(end=True, seq=1))
    elif how == "seq_align":
        raw = descriptor.pack(**kw, seq_addr=0x502, seq_value=1)
    mem.put(0x1040, raw)
    if how in ("ext_ptr", "ext_ptr_short"):
        ext = how == "ext_ptr_short"
    mem.put(0x1000, good.pack(next=descriptor.pointer(0x1040, ext)))
    o = dma_model.run_chain(0x1000, mem.get, read_src=noise_reader(1))
    assert o.error == DmaError.DESC_MALFORMED and o.desc_addr == 0x1040
    assert o.desc_done == 1 and o.bytes == 16
    assert o.writes == [(0x200, noise_reader(1)(0x100, 16))]


def test_adjacent_runs_walk():
    """A long contiguous chain announces runs of at most 255; a wrong next inside a run, or a
    64-byte head off its alignment, is malformed; end inside a run ends the chain."""
    chain = Chain(0, 0x10000)
    for i in range(300):
        chain.memcpy(i, 0x100000 + i, 1)
    assert chain.adjacency()[:2] == [255, 255] and chain.adjacency()[-3:] == [2, 1, 0]
    mem = SparseMemory()
    for a, raw in chain.image():
        mem.put(a, raw)
    assert [a for a, _ in dma_model.walk_chain(chain.head, mem.get)] == chain.addresses
    # Descriptor 10 (inside descriptor 0's run) points elsewhere: malformed there.
    bad = descriptor.pack(src=0, dst=0, length=1, next=0x50000)
    mem.put(chain.addresses[10], bad)
    o = dma_model.run_chain(chain.head, mem.get)
    assert (o.error, o.desc_addr, o.desc_done) == (DmaError.DESC_MALFORMED,
                                                   chain.addresses[10], 10)
    # The same descriptor with end: the chain ends there.
    mem.put(chain.addresses[10], descriptor.pack(src=0, dst=0, length=1, end=True))
    o = dma_model.run_chain(chain.head, mem.get)
    assert (o.error, o.desc_done) == (DmaError.NONE, 11)
    o = dma_model.run_chain(0x10021, mem.get)
    assert (o.error, o.desc_addr, o.desc_done) == (DmaError.DESC_MALFORMED, 0x10020, 0)


def test_start_announces_run():
    """CH_CTRL.adj announces up to 63 descriptors after the head, the most of it and CH_HEAD
    [4:1]: a wrong next inside what it announces is malformed, past it followed; the
    chain's ``announced`` is its head's run up to 63; out of range is refused."""
    chain = Chain(0, 0x10000)
    for i in range(80):
        chain.memcpy(i, 0x100000 + i, 1)
    assert chain.announced == 63 and chain.head & 0x1E == 15 << 1
    assert Chain(0, 0x10000).memcpy(0, 0, 1).announced == 0
    mem = SparseMemory()
    for a, raw in chain.image(adjacent=False):      # no descriptor announces anything
        mem.put(a, raw)
    # Descriptor k points elsewhere: a fault when it is announced to have one after it.
    for k, announced, in_head in ((40, 41, 0), (40, 40, 0), (40, 0, 0), (12, 5, 13), (12, 5, 12)):
        mem.put(chain.addresses[k], descriptor.pack(src=0, dst=0, length=1, next=0x50000))
        mem.put(0x50000, descriptor.pack(src=0, dst=0, length=1, end=True))
        o = dma_model.run_chain(chain.pointer(0) | in_head << 1, mem.get, announced=announced)
        inside = k < max(announced, in_head)
        if inside:
            assert (o.error, o.desc_addr, o.desc_done) == (DmaError.DESC_MALFORMED,
                                                           chain.addresses[k], k)
        else:
            assert (o.error, o.desc_done) == (DmaError.NONE, k + 2)
        mem.put(chain.addresses[k], dict(chain.image(adjacent=False))[chain.addresses[k]])
    for bad in (-1, 64):
        with pytest.raises(ValueError, match="announced"):
            dma_model.walk_chain(chain.head, mem.get, announced=bad)


def test_register_mode_outcome():
    read = noise_reader(3)
    slots = [memcpy(0x10, 0x1000, 5), memcpy(0x20, 0x2000, 4, count=3, src_gap=1, dst_gap=2,
                                                seq=(0x3000, 0xABCD), irq=True)]
    o = dma_model.run_slots(slots, read)
    assert o.desc_done == 2 and o.bytes == 17 and o.irqs == 1 and o.error == DmaError.NONE
    assert o.writes[1:4] == [(0x2000, read(0x20, 4)), (0x2006, read(0x25, 4)),
                             (0x200C, read(0x2A, 4))]
    assert o.writes[-1] == (0x3000, (0xABCD).to_bytes(4, "little"))
    assert o.seq_writes == [(1, 0x3000, (0xABCD).to_bytes(4, "little"))]
    bad = dict(slots[1].fields(), count=0)
    o = dma_model.run_slots([slots[0], bad], read)
    assert (o.error, o.desc_addr, o.desc_done) == (DmaError.DESC_MALFORMED, 1, 1)
    assert dma_model.run_slots([], read).error == DmaError.DESC_MALFORMED


def test_unroutable_and_unreadable():
    read = noise_reader(0)
    chain = Chain(0, 0x100).memcpy(0, 0x1000, 8).memcpy(8, 0x9000, 8).memcpy(16, 0x1100, 8)
    mem = SparseMemory()
    for a, raw in chain.image():
        mem.put(a, raw)
    o = dma_model.run_chain(chain.head, mem.get, read_src=read,
                            routable=lambda a: a < 0x8000)
    assert (o.error, o.desc_addr, o.desc_done, o.bytes) == (DmaError.DST_UNROUTABLE, 0x120, 1, 8)
    o = dma_model.run_chain(chain.head, mem.get, read_src=read,
                            readable=lambda s, n: DmaError.CPL_UR if s >= 16 else None)
    assert (o.error, o.desc_addr, o.desc_done) == (DmaError.CPL_UR, 0x140, 2)


# -- halo planes -------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 16])
@pytest.mark.parametrize("plane", PLANES)
def test_halo_planes_select_the_plane(n, plane):
    """The bursts of a plane transfer cover exactly the elements with the fixed index."""
    index = n // 2
    s = halo_transfer(n, plane, 0, 1 << 20, index, n - 1 - index)
    src_elems, dst_elems = set(), set()
    for src, dst, length in dma_model.bursts(s):
        assert length % 8 == 0
        src_elems |= {(src + o) // 8 for o in range(0, length, 8)}
        dst_elems |= {(dst - (1 << 20) + o) // 8 for o in range(0, length, 8)}
    axis = {"jk": 0, "ik": 1, "ij": 2}[plane]

    def plane_set(idx):
        out = set()
        for i in range(n):
            for j in range(n):
                for k in range(n):
                    if (i, j, k)[axis] == idx:
                        out.add((i * n + j) * n + k)
        return out
    assert src_elems == plane_set(index)
    assert dst_elems == plane_set(n - 1 - index)
    assert s.bytes == n * n * 8
    # The same bytes, gathered into a packed buffer, in the same order.
    packed = halo_transfer(n, plane, 0, 0, index, packed_dst=True)
    out = [b for _, d in dma_model.transfer_writes(packed, noise_reader(5)) for b in d]
    assert bytes(out) == b"".join(noise_reader(5)(src, ln) for src, _, ln in
                                  dma_model.bursts(s))
    assert contiguous(s).bytes == s.bytes and not contiguous(s).ext


def test_halo_shapes_as_documented():
    n = 10
    assert halo_plane(n, "jk", 3) == (3 * n * n * 8, n * n * 8, 1, 0)
    assert halo_plane(n, "ik", 3) == (3 * n * 8, n * 8, n, n * n * 8 - n * 8)
    assert halo_plane(n, "ij", 3) == (3 * 8, 8, n * n, n * 8 - 8)
    with pytest.raises(ValueError):
        halo_plane(n, "ii", 0)
    with pytest.raises(ValueError):
        halo_plane(n, "ij", n)


# -- write splitting ---------------------------------------------------------------------------

@pytest.mark.parametrize("mps", [128, 256, 512])
def test_write_tlps(mps):
    rng = random.Random(mps)
    for _ in range(300):
        dst, n = rng.randrange(1 << 20), rng.randrange(1, 5000)
        tlps = dma_model.write_tlps(dst, n, mps)
        assert sum(k for _, k in tlps) == n and tlps[0][0] == dst
        for (a, k), (b, _) in zip(tlps, tlps[1:]):
            assert a + k == b and b % mps == 0
        for a, k in tlps:
            assert a // 4096 == (a + k - 1) // 4096 and (a % mps) + k <= mps
        for a, k in tlps:
            assert (a & ~3) + ((a + k - (a & ~3) + 3) // 4) * 4 - (a & ~3) <= mps
        for a, k in dma_model.read_requests(dst, n, mps):
            assert a // 4096 == (a + k - 1) // 4096 and (a % 4) + k <= mps


# -- the driver's DMA calls ----------------------------------------------------------------------

def test_driver_chain_and_wait():
    """tcaDescSet / tcaStartDMADesc / tcaWaitDMADesc: the chain is written, CH_HEAD set, one
    start write, then polls until idle; the fake engine's result matches the model."""
    src = SparseMemory()
    src_read = noise_reader(9)
    for a in range(0, 0x400):
        src.put(a, src_read(a, 1))
    chip = FakeChip(src)
    drv = Driver(chip, memory=src)
    chain = Chain(channel=2, base=0x8000)
    chain.memcpy(0x10, 0x10_0000, 33).memcpy(0x100, 0x20_0003, 16, count=4, src_gap=3,
                                              dst_gap=5, seq=(0x30_0000, 42))

    async def go():
        await drv.dma_config(mps=256, mrrs=512, ext_tags=True, timeout=1000)
        assert REGMAP["DMA_CONFIG"].decode(chip.regs[REGMAP["DMA_CONFIG"].offset]) == \
            {"mps": 1, "mrrs": 2, "ext_tags": 1}
        assert chip.regs[REGMAP["DMA_TIMEOUT"].offset] == 1000
        await drv.dma_desc_set(chain)
        n_writes = len([e for e in chip.log if e[0] == "w"])
        await drv.dma_start(2)
        assert len([e for e in chip.log if e[0] == "w"]) == n_writes + 1   # one write kicks
        # The start announces the chain's run (the two are not adjacent here: none).
        assert REGMAP["CH_CTRL"].decode(chip.regs[REGMAP["CH_CTRL"].offset_of(2)])["adj"] == 0
        st = await drv.dma_wait(2)
        return st
    st = run(go())
    assert st["desc_done"] == 2 and st["bytes"] == 33 + 64 and not st["busy"]
    o = dma_model.run_chain(chain.head, src.get)
    expected = bytearray(0x30_0004)
    assert dma_model.apply(o.writes, expected) == 33 + 64 + 4
    got = bytearray(0x30_0004)
    for a, b in chip.dest.bytes.items():
        got[a] = b
    assert got == expected
    assert chip.dest.get(0x30_0000, 4) == (42).to_bytes(4, "little")
    with pytest.raises(ValueError):
        run(drv.dma_config(mps=1024))
    with pytest.raises(IndexError):
        run(drv.dma_start(4))
    with pytest.raises(ValueError, match="adj"):
        run(drv.dma_start(2, adj=64))


def test_driver_register_mode_and_fault():
    src = SparseMemory()
    chip = FakeChip(src, routable=lambda a: a < 0x8000_0000)
    drv = Driver(chip)
    slots = [memcpy(0, 0x1000, 8), memcpy(8, 0x2000, 8, count=2, src_gap=0, dst_gap=8,
                                          seq=(0x3000, 5))]

    async def go():
        n = await drv.dma_reg_set(1, slots)
        await drv.dma_reg_start(1, n)
        st = await drv.dma_wait(1)
        assert st["desc_done"] == 2 and st["bytes"] == 24
        await drv.dma_reg_set(3, [slots[0], memcpy(0, 0x9000_0000, 4)])
        await drv.dma_reg_start(3, 2)
        with pytest.raises(DmaFault) as info:
            await drv.dma_wait(3)
        assert info.value.error == DmaError.DST_UNROUTABLE and info.value.desc_addr == 1
        assert "DST_UNROUTABLE" in str(info.value) and info.value.desc_done == 1
        chip.polls_busy = 10
        await drv.dma_reg_start(1, 1)
        with pytest.raises(DriverError, match="still busy"):
            await drv.dma_wait(1, max_polls=3)
    run(go())
    slot = REGMAP["SLOT_SEQ_ADDR_LO"].offset_of((1, 1))
    assert chip.regs[slot] == 0x3000
    with pytest.raises(ValueError):
        run(drv.dma_reg_set(0, slots * 3))


def test_driver_append_waits_for_room_within_its_bound():
    """``dma_append`` waits for room in the queue (``CH_STATUS.held``) as ``dma_wait`` waits
    for idle: with a bound.  A queue holding its four slots that never close: an append of one
    more polls ``max_polls`` times, then raises, writing nothing; an abort ends the wait at
    once (the queue has ended); one that fits is written without a poll."""
    chip = FakeChip(SparseMemory())
    drv = Driver(chip)
    four = [memcpy(0, 0x1000 + 8 * i, 8) for i in range(4)]

    async def go():
        await drv.dma_queue_start(2, four[:3])
        await drv.dma_append(2, four[3:])                   # the fourth slot: room, no poll
        assert chip.appends == [(2, 1)]
        reads = sum(1 for op in chip.log if op[0] == "r")
        assert reads == 0
        with pytest.raises(DriverError, match="no room for 1 slots after 3 polls"):
            await drv.dma_append(2, four[:1], max_polls=3)
        assert chip.appends == [(2, 1)]                      # nothing appended
        polled = [op for op in chip.log if op[0] == "r"
                  and op[1] == REGMAP["CH_STATUS"].offset_of(2)]
        assert len(polled) == 4                             # 3 polls and the status read
        with pytest.raises(ValueError, match="an append takes 1..4"):
            await drv.dma_append(2, four + four[:1])
        await drv.dma_abort(2)
        with pytest.raises(DriverError, match="queue has ended"):
            await drv.dma_append(2, four[:2])
        with pytest.raises(DriverError, match="not started as a queue"):
            await drv.dma_append(1, four[:1])
    run(go())
