"""Register block (``peach2.csr.CSR``) in the Amaranth simulator.

::

    make_read / make_write (cocotbext-pcie Tlp) ──> i_req ┌─────┐ o_cpl ──> Tlp, compared with
                        [idle gaps]                       │ CSR │           the expected Tlp
    count_inc / port_status / pcie_id ─────────────────> └─────┘ ──> rw ports vs RegModel

Every stream test runs with no pauses, a fixed pause pattern and seeded random pauses on both
``i_req`` (idle gaps) and ``o_cpl`` (backpressure); the seed is in every assertion message.
Expected values come from :class:`peach2.sim.reference.registers.RegModel` (the register description)
and the PCIe rules in :mod:`peach2.sim.harness.csr`, never from the gateware.
"""

import random
from pathlib import Path

import pytest
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.csr import CSR, REGMAP, Access, CountReason, Port, RouteEntry
from peach2.csr.regmap import N_REASONS, VERSION_MAJOR, VERSION_MINOR, peach2_regmap
from peach2.routes import AddressMap, Topology, routes_for
from peach2.sim.driver import Driver
from peach2.sim.harness import (
    CsrHarness,
    SimBar,
    expected_byte_count,
    expected_lower_address,
    make_read,
    make_write,
)
from peach2.sim.reference import Beat, RegModel
from peach2.tlp.layouts import header_from_bytes

PAUSES = ["none", "fixed", "random"]
#: The implemented bits of PORT_STATUS (its fields; the rest read 0).
STATUS_MASK = sum(((1 << f.width) - 1) << f.lsb for f in REGMAP["PORT_STATUS"].fields)
COMPLETER = 0x2a08


def rw_offsets(regmap):
    return [off for reg in regmap if reg.access is Access.RW for _, off in reg.elements()]


def expected_cpl(req, data_dws=None):
    """The completion the PCIe rules ask for ``req`` (``data_dws`` None: CA)."""
    if data_dws is None:
        cpl = Tlp.create_ca_completion_for_tlp(req, PcieId.from_int(COMPLETER))
        cpl.byte_count = 4
    else:
        cpl = Tlp.create_completion_data_for_tlp(req, PcieId.from_int(COMPLETER))
        cpl.length = len(data_dws)
        cpl.byte_count = expected_byte_count(req.length, req.first_be, req.last_be)
        cpl.data = b"".join(d.to_bytes(4, "little") for d in data_dws)
    cpl.lower_address = expected_lower_address(req.address, req.first_be)
    return cpl


def check_cpl(harness, got_index, req, data_dws):
    """Compare completion ``got_index`` with the expected one: header bits and data."""
    exp = expected_cpl(req, data_dws)
    beats = harness.cpl_beats[got_index]
    got = harness.completions[got_index]
    where = f"{req!r} {harness.where()}"
    assert len(beats) == 1, f"{len(beats)} beats {where}"
    assert beats[0].hdr == header_from_bytes(bytes(exp.pack_header())), \
        f"header\n got {got!r}\n exp {exp!r}\n {where}"
    assert beats[0].dw_en == (1 << len(data_dws or [])) - 1, f"dw_en {beats[0].dw_en} {where}"
    assert beats[0].bar == 0 and beats[0].err == 0, where
    assert got == exp, f"\n got {got!r}\n exp {exp!r}\n {where}"


async def read_check(ctx, harness, model, req, counters=None):
    n = len(harness.completions)
    await harness.send(ctx, req)
    await harness.wait_completions(ctx, n + 1)
    base = req.address & 0xfff
    if req.length in (1, 2) and base + 4 * req.length <= 0x1000:
        data = [model.read(base + 4 * k, counters) for k in range(req.length)]
    else:
        data = None
    check_cpl(harness, n, req, data)


def set_hw_inputs(ctx, dut, model, rng):
    for p in range(4):
        v = rng.getrandbits(32)
        ctx.set(dut.port_status[p], v)
        model.hw[("PORT_STATUS", p)] = v
    v = rng.getrandbits(16)
    ctx.set(dut.pcie_id, v)
    model.hw[("PCIE_ID", 0)] = v
    ctx.set(dut.completer_id, COMPLETER)


def check_ports(ctx, dut, model, where):
    """The rw ports and the typed views equal the model."""
    rm = dut.regmap
    for reg in rm:
        if reg.access is Access.RW:
            for flat, _ in reg.elements():
                got = ctx.get(dut.port(reg, flat))
                assert got == model.store[(reg.name, flat)], \
                    f"{reg.element_name(flat)} port {got:#x} {where}"

    def wide(name, i=0):
        return model.store[(f"{name}_LO", i)] | model.store[(f"{name}_HI", i)] << 32
    assert ctx.get(dut.node_offset) == wide("OFFSET"), where
    control = model.store[("CONTROL", 0)]
    assert ctx.get(dut.pio_enable) == control & 1, where
    assert ctx.get(dut.route_enable) == control >> 1 & 1, where
    for i in range(rm.params["n_routes"]):
        target = model.store[("ROUTE_TARGET", i)]
        entry = ctx.get(dut.route[i])
        assert (entry.mask, entry.lower, entry.upper, entry.port, entry.enable) == (
            wide("ROUTE_MASK", i), wide("ROUTE_LOWER", i), wide("ROUTE_UPPER", i),
            target & 3, target >> 31), f"route[{i}] {where}"


def random_be(rng, length):
    if length == 1:
        return rng.randrange(16), 0
    return rng.randrange(1, 16), rng.randrange(1, 16)


# -- tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("pauses", PAUSES)
def test_registers_random(pauses):
    """Random 1-/2-DW reads and writes with byte enables, 3- and 4-DW headers, vs the model."""
    seed = 100 + PAUSES.index(pauses)
    harness = CsrHarness.reused(CSR, seed=seed, idle=pauses, backpressure=pauses)
    dut = harness.dut
    model = RegModel(dut.regmap)
    rng = harness.rng
    rw = rw_offsets(dut.regmap)
    others = [0x000, 0x004, 0x008, 0x020, 0x02c, 0x030, 0x038, 0x0fc, 0x200, 0x7fc, 0x840,
              0xffc, 0xff8]

    async def tb(ctx, harness):
        set_hw_inputs(ctx, dut, model, rng)
        for _ in range(160):
            off = rng.choice(rw) if rng.random() < 0.75 else rng.choice(others)
            length = rng.choice([1, 2])
            first_be, last_be = random_be(rng, length)
            high = rng.choice([0, 0x1_2345_6000, 0xfff0_0000, 0xffff_ffff_ffff_f000])
            force_64 = rng.random() < 0.3
            if off + 4 * length > 0x1000:
                length, last_be = 1, 0
            if rng.random() < 0.6:
                dws = [rng.getrandbits(32) for _ in range(length)]
                req = make_write(high | off, dws, first_be, last_be, force_64=force_64)
                await harness.send(ctx, req)
                model.apply_write_tlp(req)
            else:
                req = make_read(high | off, length, first_be, last_be, force_64=force_64,
                                requester_id=rng.getrandbits(16), tag=rng.randrange(256),
                                tc=rng.randrange(8), attr=rng.randrange(4))
                await read_check(ctx, harness, model, req)
        await harness.settle(ctx)
        check_ports(ctx, dut, model, harness.where())
        for off in rw:
            await read_check(ctx, harness, model, make_read(off))
        assert harness.bad_count == 0, harness.where()

    harness.run(tb)


@pytest.mark.parametrize("n_routes,buffer_beats,s_is_rc", [
    (8, 512, True), (16, 1234, False), (1, 0, True),
])
def test_constants_and_inputs(n_routes, buffer_beats, s_is_rc):
    """ID, VERSION, CONFIG from the build parameters; PORT_STATUS/PCIE_ID from the inputs."""
    dut = CSR(n_routes=n_routes, buffer_beats=buffer_beats, s_is_rc=s_is_rc)
    harness = CsrHarness(dut, seed=7)
    model = RegModel(dut.regmap)
    rm = dut.regmap

    async def tb(ctx, harness):
        set_hw_inputs(ctx, dut, model, harness.rng)
        bar = SimBar(harness, ctx)

        async def rd(name, index=None):
            return int.from_bytes(await bar.read(rm[name].offset_of(index), 4), "little")
        assert await rd("ID") == 0x50434832
        assert await rd("VERSION") == 0x0000_0002
        cfg = rm["CONFIG"].decode(await rd("CONFIG"))
        assert cfg == {"n_routes": n_routes, "s_is_rc": int(s_is_rc), "n_ports": 4,
                       "buffer_beats": buffer_beats}
        for p in range(4):
            got = await rd("PORT_STATUS", p)
            assert got == model.hw[("PORT_STATUS", p)] & STATUS_MASK, f"PORT_STATUS[{p}] {got:#x}"
        assert await rd("PCIE_ID") == model.hw[("PCIE_ID", 0)]
        # Inputs are read live.
        ctx.set(dut.port_status[2], 0xffff_ffc1)
        assert await rd("PORT_STATUS", 2) == 0xffff_ffc1 & STATUS_MASK
        # The last route entry exists; the one after it reads 0 and ignores writes.
        last = rm["ROUTE_TARGET"].offset_of(n_routes - 1)
        await bar.write(last, (0x8000_0003).to_bytes(4, "little"))
        assert int.from_bytes(await bar.read(last, 4), "little") == 0x8000_0003
        beyond = last + 0x20 - 0x18
        if rm.at(beyond) is None:           # 16 entries end where the DMA registers begin
            await bar.write(beyond, b"\xff" * 4)
            assert await bar.read(beyond, 4) == bytes(4)
        assert ctx.get(dut.route[n_routes - 1]).port == 3
        assert ctx.get(dut.route[n_routes - 1]).enable == 1

    harness.run(tb)


def test_whole_bar():
    """Fill every rw register with long writes (walking, multi-beat), then read all 4 KiB."""
    harness = CsrHarness.reused(CSR, seed=17)
    dut = harness.dut
    model = RegModel(dut.regmap)
    rng = harness.rng

    async def tb(ctx, harness):
        set_hw_inputs(ctx, dut, model, rng)
        # One 1024-DW write (length field 0) covers the BAR, actions included.
        dws = [rng.getrandbits(32) for _ in range(1024)]
        dws[REGMAP["COUNTER_CLEAR"].offset // 4] = 0
        dws[REGMAP["MSI"].offset // 4] = 0x1d
        req = make_write(0, dws)
        await harness.send(ctx, req)
        model.apply_write_tlp(req)
        await harness.settle(ctx)
        assert harness.msi == [0x1d], harness.where()
        check_ports(ctx, dut, model, harness.where())
        for start, n in ((0x00c, 4), (0x100, 64), (0x200, 64)):
            req = make_write(start, [rng.getrandbits(32) for _ in range(n)])
            await harness.send(ctx, req)
            model.apply_write_tlp(req)
        for off in range(0, 0x1000, 8):
            await read_check(ctx, harness, model, make_read(off, 2, 0xf, 0xf))
        await harness.settle(ctx)
        check_ports(ctx, dut, model, harness.where())
        assert harness.bad_count == 0, harness.where()

    harness.run(tb)


@pytest.mark.parametrize("pauses", PAUSES)
def test_long_writes(pauses):
    """Writes of 3..40 DWs walk the addresses with first/last byte enables; the tail past the
    end of the BAR is dropped and raises bad_req once."""
    seed = 200 + PAUSES.index(pauses)
    harness = CsrHarness.reused(CSR, seed=seed, idle=pauses, backpressure=pauses)
    dut = harness.dut
    model = RegModel(dut.regmap)
    rng = harness.rng

    async def tb(ctx, harness):
        set_hw_inputs(ctx, dut, model, rng)
        bad = 0
        for _ in range(14):
            n = rng.randrange(3, 41)
            if rng.random() < 0.25:
                start = 0x1000 - 4 * rng.randrange(1, n)          # crosses the end
                bad += 1
            else:
                start = rng.choice([0x00c, 0x100, 0x104, 0x1f0, 0x2c0])
            first_be, last_be = rng.randrange(1, 16), rng.randrange(1, 16)
            req = make_write(start, [rng.getrandbits(32) for _ in range(n)], first_be, last_be)
            await harness.send(ctx, req)
            model.apply_write_tlp(req)
        await harness.settle(ctx)
        check_ports(ctx, dut, model, harness.where())
        assert harness.bad_count == bad, f"bad_req {harness.bad_count}, expected {bad} " \
                                       f"{harness.where()}"
        for off in (0x00c, 0x010, 0x014, 0x018):
            await read_check(ctx, harness, model, make_read(off))

    harness.run(tb)


@pytest.mark.parametrize("pauses", PAUSES)
def test_odd_reads(pauses):
    """Reads longer than 2 DWs or crossing the BAR end: CA, byte count 4; zero-length reads:
    1 DW, byte count 1; every byte-enable pattern: PCIe byte count and lower address."""
    seed = 300 + PAUSES.index(pauses)
    harness = CsrHarness.reused(CSR, seed=seed, idle=pauses, backpressure=pauses)
    dut = harness.dut
    model = RegModel(dut.regmap)
    rng = harness.rng

    async def tb(ctx, harness):
        set_hw_inputs(ctx, dut, model, rng)
        cas = [(0x000, 3), (0x100, 4), (0x104, 5), (0x800, 16), (0x010, 1023), (0x000, 1024),
               (0xffc, 2)]
        for off, length in cas:
            req = make_read(off, length, rng.randrange(1, 16), rng.randrange(1, 16),
                            tag=rng.randrange(256), requester_id=rng.getrandbits(16))
            await read_check(ctx, harness, model, req)
        assert harness.bad_count == len(cas), harness.where()
        for be in range(16):                          # 1 DW, every first_be (0: zero-length)
            await read_check(ctx, harness, model, make_read(0x004 | rng.choice([0, 0x40]), 1, be))
        for first_be in range(1, 16, 3):              # 2 DWs, also not QW-aligned
            for last_be in (1, 3, 8, 12, 15):
                off = rng.choice([0x000, 0x00c, 0x014, 0x07c])
                await read_check(ctx, harness, model, make_read(off, 2, first_be, last_be))
        # 10-bit tags, traffic class, attributes, 4-DW headers, any bar.
        for _ in range(12):
            req = make_read(rng.getrandbits(52) << 12 | 0x008, 1, 0xf, force_64=True,
                            requester_id=rng.getrandbits(16), tag=rng.randrange(1024),
                            tc=rng.randrange(8), attr=rng.randrange(8))
            n = len(harness.completions)
            await harness.send(ctx, req, bar=1 << rng.randrange(6))
            await harness.wait_completions(ctx, n + 1)
            check_cpl(harness, n, req, [model.read(0x008)])
        assert harness.bad_count == len(cas), harness.where()

    harness.run(tb)


@pytest.mark.parametrize("pauses", PAUSES)
def test_counters_while_running(pauses):
    """Counters count every strobe (several per cycle), read while strobes run, clear while
    running, and ignore reserved reasons."""
    seed = 400 + PAUSES.index(pauses)
    # a new harness, not a reused one: the test adds its own watcher to the simulator
    harness = CsrHarness(CSR(), seed=seed, idle=pauses, backpressure=pauses)
    dut = harness.dut
    rng = random.Random(seed)
    counts = [0] * 64
    state = {"run": True, "cycle": 0}
    reg = REGMAP["COUNT"]
    hw = [flat for flat, _ in reg.elements()]

    async def strobes(ctx):
        srng = random.Random(seed + 1)
        while True:
            v = srng.getrandbits(64) & srng.getrandbits(64) if state["run"] else 0
            ctx.set(dut.count_inc.as_value(), v)
            await ctx.tick()
            state["cycle"] += 1
            for i in range(64):
                counts[i] += v >> i & 1

    harness.sim.add_testbench(strobes, background=True)

    async def tb(ctx, harness):
        set_hw_inputs(ctx, dut, RegModel(REGMAP), rng)
        bar = SimBar(harness, ctx)

        async def rd(flat):
            return int.from_bytes(await bar.read(reg.offset + 4 * flat, 4), "little")

        for _ in range(30):
            flat = rng.randrange(64)
            lo = 0 if flat in reg.reserved else counts[flat]
            got = await rd(flat)
            hi = 0 if flat in reg.reserved else counts[flat]
            assert lo <= got <= hi, f"COUNT flat {flat}: {got} not in [{lo}, {hi}] " \
                                    f"{harness.where()}"
        # Clear while running: afterwards each counter holds the strobes since the clear.
        before = list(counts)
        await bar.write(REGMAP["COUNTER_CLEAR"].offset, (1).to_bytes(4, "little"))
        await rd(0)                                         # the clear has landed
        after = list(counts)
        state["run"] = False
        await ctx.tick().repeat(3)
        values = {}
        for flat in range(64):
            got = values[flat] = await rd(flat)
            if flat in reg.reserved:
                assert got == 0, f"reserved COUNT flat {flat} reads {got} {harness.where()}"
            else:
                assert counts[flat] - after[flat] <= got <= counts[flat] - before[flat], \
                    f"COUNT flat {flat} after clear: {got} {harness.where()}"
                assert ctx.get(dut._counters[flat]) == got
        # Writes of 0, or with byte 0 disabled, do not clear.
        await bar.write(REGMAP["COUNTER_CLEAR"].offset, (0xfffffffe).to_bytes(4, "little"))
        await bar.write(REGMAP["COUNTER_CLEAR"].offset + 1, b"\xff")
        for flat in hw[::7]:
            assert await rd(flat) == values[flat], f"COUNT flat {flat} {harness.where()}"
        assert await bar.read(REGMAP["COUNTER_CLEAR"].offset, 4) == bytes(4)

    harness.run(tb)


def test_counter_saturation():
    """Counters stop at all-ones: narrow counters by strobing, 32-bit ones preloaded."""
    for width, preload in ((3, None), (32, 0xffff_fffc)):
        dut = CSR(counter_width=width)
        harness = CsrHarness(dut, seed=5)
        reg = REGMAP["COUNT"]
        top = (1 << width) - 1

        async def tb(ctx, harness):
            ctx.set(dut.completer_id, COMPLETER)
            if preload is not None:
                for c in dut._counters.values():
                    ctx.set(c, preload)
            for _ in range(12):
                ctx.set(dut.count_inc.as_value(), (1 << 64) - 1)
                await ctx.tick()
            ctx.set(dut.count_inc.as_value(), 0)
            bar = SimBar(harness, ctx)
            for flat in range(0, 64, 3):
                got = int.from_bytes(await bar.read(reg.offset + 4 * flat, 4), "little")
                assert got == (0 if flat in reg.reserved else top), \
                    f"width {width} flat {flat}: {got:#x}"
            await bar.write(REGMAP["COUNTER_CLEAR"].offset, b"\x01\x00\x00\x00")
            for flat in range(0, 64, 5):
                assert await bar.read(reg.offset + 4 * flat, 4) == bytes(4)

        harness.run(tb)


def test_clear_in_event_cycle():
    """An event in the cycle of the clear counts as the first after it (no event is lost)."""
    harness = CsrHarness(CSR(), seed=6)     # a new one: the test adds its own watcher
    dut = harness.dut
    seen = []

    async def watch(ctx):
        async for _, _, value in ctx.tick().sample(dut._counters[0]):
            seen.append(value)

    harness.sim.add_testbench(watch, background=True)

    async def tb(ctx, harness):
        ctx.set(dut.completer_id, COMPLETER)
        ctx.set(dut.count_inc[0], 1)                    # an event every cycle
        bar = SimBar(harness, ctx)
        await bar.write(REGMAP["COUNTER_CLEAR"].offset, b"\x01\x00\x00\x00")
        await harness.settle(ctx)
        drops = [(a, b) for a, b in zip(seen, seen[1:]) if b <= a]
        assert len(drops) == 1 and drops[0][1] == 1, drops
        assert all(b == a + 1 for a, b in zip(seen, seen[1:]) if (a, b) not in drops)

    harness.run(tb)


def test_counter_index():
    """Strobe element p*16 + r counts in COUNT[p][r] and nowhere else."""
    harness = CsrHarness.reused(CSR, seed=9)
    dut = harness.dut

    async def tb(ctx, harness):
        ctx.set(dut.completer_id, COMPLETER)
        drv = Driver(SimBar(harness, ctx))
        for k, (p, r) in enumerate([(Port.E, CountReason.UR_SENT), (Port.S, CountReason.RX_TLPS),
                                    (Port.N, CountReason.POISONED)]):
            for _ in range(k + 1):
                ctx.set(dut.count_inc[p * N_REASONS + r], 1)
                await ctx.tick()
                ctx.set(dut.count_inc[p * N_REASONS + r], 0)
                await ctx.tick()
        got = await drv.counters()
        expect = {p.name: {r.name: 0 for r in CountReason} for p in Port}
        expect["E"]["UR_SENT"], expect["S"]["RX_TLPS"], expect["N"]["POISONED"] = 1, 2, 3
        assert got == expect
        assert await drv.read_reg("COUNT", ("S", "RX_TLPS")) == 2

    harness.run(tb)


@pytest.mark.parametrize("pauses", ["none", "random"])
def test_dropped_requests(pauses):
    """Poisoned writes, err packets, non-memory TLPs and stray beats are dropped (bad_req), get
    no completion, change nothing, and never hang the block."""
    seed = 500 + ["none", "random"].index(pauses)
    harness = CsrHarness.reused(CSR, seed=seed, idle=pauses, backpressure=pauses)
    dut = harness.dut
    model = RegModel(dut.regmap)
    rng = harness.rng
    node = REGMAP["NODE"].offset

    def tlp(fmt_type, **kw):
        t = Tlp()
        t.fmt_type = fmt_type
        t.requester_id = PcieId.from_int(0x0100)
        for k, v in kw.items():
            setattr(t, k, v)
        return t

    async def tb(ctx, harness):
        set_hw_inputs(ctx, dut, model, rng)
        await harness.send(ctx, make_write(node, [0x5]))
        model.apply_write_tlp(make_write(node, [0x5]))
        expect_bad = 0
        # Poisoned write; single-beat write ended with err; read ended with err.
        await harness.send(ctx, make_write(node, [0xa], ep=1))
        await harness.send(ctx, make_write(node, [0xb]), err=True)
        await harness.send(ctx, make_read(node), err=True)
        expect_bad += 3
        # A multi-beat write ended with err: the beats before the err beat are applied
        # (documented); the err beat is not.
        req = make_write(0x100, list(range(1, 9)))
        await harness.send(ctx, req, err=True)
        model.apply_write_tlp(make_write(0x100, list(range(1, 5))))
        expect_bad += 1
        # Non-memory TLPs.
        others = [
            tlp(TlpType.CFG_READ_0, length=1, first_be=0xf),
            tlp(TlpType.IO_WRITE, length=1, first_be=0xf, address=node, data=bytes(4)),
            tlp(TlpType.MEM_READ_LOCKED, length=1, first_be=0xf, address=node),
            tlp(TlpType.CPL_DATA, length=1, byte_count=4, data=bytes(4)),
            tlp(TlpType.MEM_WRITE, length=5, first_be=0xf, last_be=0xf, address=node, ep=1,
                data=bytes(20)),
        ]
        for t in others:
            await harness.send(ctx, t)
        expect_bad += len(others)
        msg = (0b001 << 29 | 0b10000 << 24) << 0                       # Msg, 4-DW, no data
        await harness.send_beats(ctx, [Beat(msg, 0, 0, 1, 1)])
        await harness.send_beats(ctx, [Beat(0, 0x1234, 0b1, 0, 1)])       # stray beat
        expect_bad += 2
        await harness.settle(ctx)
        assert harness.completions == [], f"{harness.completions} {harness.where()}"
        assert harness.bad_count == expect_bad, f"bad_req {harness.bad_count} != {expect_bad} " \
                                              f"{harness.where()}"
        check_ports(ctx, dut, model, harness.where())
        await read_check(ctx, harness, model, make_read(node))
        await read_check(ctx, harness, model, make_read(0x100, 2))

    harness.run(tb)


def test_msi():
    """A write to MSI (byte 0 enabled) makes one msi_req strobe with the vector; reads 0."""
    harness = CsrHarness.reused(CSR, seed=11, idle="random", backpressure="random")
    dut = harness.dut
    off = REGMAP["MSI"].offset

    async def tb(ctx, harness):
        ctx.set(dut.completer_id, COMPLETER)
        bar = SimBar(harness, ctx)
        vectors = [3, 31, 0, 17]
        for v in vectors:
            await bar.write(off, (0xffff_ffe0 | v).to_bytes(4, "little"))
        await bar.write(off + 1, b"\x07")                       # byte 0 disabled: no MSI
        await harness.settle(ctx)
        assert harness.msi == vectors, f"{harness.msi} {harness.where()}"
        assert await bar.read(off, 4) == bytes(4)
        assert ctx.get(dut.msi_num) == vectors[-1]

    harness.run(tb)


def test_signature():
    """Ports are generated from the description, with the documented shapes."""
    dut = CSR(n_routes=5)
    dut._MustUse__silence = True                # inspected, never elaborated
    sig = dut.signature.members
    assert sig["route_mask_lo"].shape.length == 5
    assert sig["route_mask_lo"].shape.elem_shape == 32
    assert sig["port_status"].flow.name == "In" and sig["port_status"].shape.length == 4
    assert sig["pcie_id"].shape == 16
    assert sig["count_inc"].shape.length == 64
    assert sig["route"].shape.elem_shape == RouteEntry
    for name in ("node", "offset_lo", "offset_hi", "control", "msi_req", "msi_num",
                 "node_offset", "pio_enable", "route_enable", "bad_req"):
        assert sig[name].flow.name == "Out", name
    # The router uses the same layout object, not a copy of it.
    from peach2.router.common import RouteEntry as RouterEntry
    assert RouterEntry is RouteEntry
    # The DMA registers are the `dma` interface (DmaControlSignature), not ports of their own.
    from peach2.signatures import DmaControlSignature
    assert sig["dma"].flow.name == "Out"
    assert sig["dma"].signature.members == DmaControlSignature().members
    for name in ("dma_config", "ch_head_lo", "ch_ctrl_stb", "ch_status", "slot_src_lo"):
        assert name not in sig, name
    with pytest.raises(ValueError, match="built for"):
        CSR(n_routes=4, regmap=peach2_regmap(n_routes=5))


def test_slots_at_descriptor_offsets():
    """Each SLOT_* register drives the bits of the descriptor field of the same name in
    ``dma.slots[4c + s]`` (a 64-bit field: _LO its low word, _HI its high word)."""
    from peach2.dma.descriptor import Descriptor
    dut = CSR()
    dut._MustUse__silence = True                # inspected, never elaborated
    slots = [r for r in dut.regmap if r.group == "SLOT"]
    assert len(slots) == 12
    for reg in slots:
        name = reg.name.removeprefix("SLOT_").lower()
        field, half = (name[:-3], name[-2:]) if name.endswith(("_lo", "_hi")) else (name, "")
        for flat in (0, 7, 15):
            bits = dut.port(reg, flat)
            assert repr(bits.value) == repr(dut.dma.slots[flat].as_value())   # slot `flat`
            assert bits.start == Descriptor[field].offset + (32 if half == "hi" else 0), reg.name
            assert bits.stop - bits.start == 32
    with pytest.raises(ValueError, match="n_routes must be 1..16"):
        CSR(n_routes=17)


def test_icarus_outputs_defined(tmp_path):
    """In Icarus every output is defined right after reset, and one read gets one completion;
    the block's Verilog (the file that run compiled) is Verilog-2005 that Icarus accepts."""
    import subprocess

    from peach2.sim.run import SIM_BUILD, emit_verilog, run_cocotb
    run_cocotb(component=CSR(), toplevel="csr", test_module="csr_icarus_tb", name="csr-icarus",
               test_dir=Path(__file__).parent, seed=1)
    verilog = SIM_BUILD / "csr-icarus" / "csr.v"
    if not verilog.exists():            # the run went to another simulator (--sim)
        verilog = emit_verilog(CSR(), "peach2_csr", tmp_path / "csr.v")
    subprocess.run(["iverilog", "-g2005", "-o", "/dev/null", str(verilog)], check=True)


def test_driver_on_gateware():
    """The host driver model programs a 2x4 double ring node through the gateware."""
    harness = CsrHarness.reused(CSR, seed=13, idle="random", backpressure="random")
    dut = harness.dut
    topo = Topology.double_ring(4)
    amap = AddressMap(tca_base=0x40_0000_0000, node_size=1 << 32, host_size=1 << 30,
                      gpu_size=1 << 28, n_gpus=4)

    async def tb(ctx, harness):
        ctx.set(dut.completer_id, COMPLETER)
        drv = Driver(SimBar(harness, ctx))
        assert await drv.id_check() == (VERSION_MAJOR, VERSION_MINOR)
        assert (await drv.config())["n_routes"] == 8
        entries = await drv.program(topo, amap, node=5, phys_base=0x1_0000_0000,
                                    routes="shortest")
        assert entries == routes_for(topo, amap, 5, n_routes=8)
        assert await drv.routes() == entries
        assert await drv.get_offset() == (amap.region(5)[0] - 0x1_0000_0000) % (1 << 64)
        assert await drv.read_fields("NODE") == {"node_id": 5}
        assert await drv.read_fields("CONTROL") == {"pio_enable": 1, "route_enable": 1}
        await harness.settle(ctx)
        assert ctx.get(dut.node_offset) == await drv.get_offset()
        for i in range(8):
            e = ctx.get(dut.route[i])
            got = (e.mask, e.lower, e.upper, e.port) if e.enable else None
            assert got == (entries[i] if i < len(entries) else None), f"route[{i}]"
        await drv.enable(pio=False, route=True)
        await harness.settle(ctx)
        assert (ctx.get(dut.pio_enable), ctx.get(dut.route_enable)) == (0, 1)
        await drv.msi(9)
        await harness.settle(ctx)
        assert harness.msi == [9]
        with pytest.raises(ValueError, match="cannot write"):
            await drv.write_reg("CONFIG", 0)
        with pytest.raises(IndexError):
            await drv.set_route(8, 0, 0, 0, "E")
        assert harness.bad_count == 0

    harness.run(tb)
