"""Host driver model against a Python BAR backed by the register reference model.

The same Driver runs on the gateware in ``test_csr.py::test_driver_on_gateware``; here it runs
without a simulator, so argument checks and the programming sequence are quick to test.
"""

import asyncio

import pytest

from peach2.csr.regmap import COUNT_REASONS, REGS, VERSION_MAJOR, VERSION_MINOR
from peach2.routes import AddressMap, RouteSet, RouteTableFull, Topology, routes_for
from peach2.sim.driver import Driver, DriverError
from peach2.sim.reference import ModelBar

AMAP = AddressMap(tca_base=0x40_0000_0000, node_size=1 << 32, host_size=1 << 30,
                  gpu_size=1 << 28, n_gpus=4)


class RecordingBar:
    def __init__(self):
        self.writes = []

    async def write(self, addr, data):
        self.writes.append((addr, bytes(data)))


def run(coro):
    return asyncio.run(coro)


def test_program_2x4():
    bar = ModelBar()
    drv = Driver(bar)
    topo = Topology.double_ring(4)

    async def go():
        assert await drv.id_check() == (VERSION_MAJOR, VERSION_MINOR)
        # The default is the deadlock-free route set; "shortest" gives routes_for's tables.
        entries = await drv.program(topo, AMAP, node=6, phys_base=0x2_0000_0000,
                                    routes="shortest")
        assert entries == routes_for(topo, AMAP, 6)
        entries = await drv.program(topo, AMAP, node=6, phys_base=0x2_0000_0000)
        assert entries == RouteSet.build(topo, AMAP, "safe").entries(6)
        assert await drv.routes() == entries
        offset = await drv.get_offset()
        base, size = AMAP.region(6)
        for a in (base, base + 0x1000, base + size - 1):
            assert (a - offset) % (1 << 64) == 0x2_0000_0000 + (a - base)
        assert await drv.read_fields("CONTROL") == {"pio_enable": 1, "route_enable": 1}
        assert await drv.read_fields("NODE") == {"node_id": 6}
        # The windows were closed before the table changed and opened at the end.
        control = REGS["CONTROL"].offset
        writes = [(a, d) for op, a, d in bar.log if op == "w" and a == control]
        assert writes[0][1] == bytes(4) and writes[-1][1] == (3).to_bytes(4, "little")
        # Re-programming as another node leaves no stale entry enabled.
        entries = await drv.program(topo, AMAP, node=0, phys_base=0)
        assert await drv.routes() == entries
    run(go())


def test_set_route_order_and_checks():
    bar = ModelBar()
    drv = Driver(bar)

    async def go():
        await drv.set_route(2, 0xffff_ffff_0000_0000, 0x1_0000_0000, 0x3_0000_0000, "S")
        t = REGS["ROUTE_TARGET"].offset_of(2)
        writes = [(a, d) for op, a, d in bar.log if op == "w"]
        assert writes[0] == (t, bytes(4))                           # disabled first
        assert writes[-1] == (t, (0x8000_0003).to_bytes(4, "little"))   # enabled last
        assert await drv.get_route(2) == {"mask": 0xffff_ffff_0000_0000,
                                          "lower": 0x1_0000_0000, "upper": 0x3_0000_0000,
                                          "port": 3, "enable": 1}
        with pytest.raises(IndexError, match="0..7"):
            await drv.set_route(8, 0, 0, 0, "E")
        with pytest.raises(ValueError, match="64 bits"):
            await drv.set_route(0, 1 << 64, 0, 0, "E")
        with pytest.raises(ValueError, match="port must be"):
            await drv.set_route(0, 0, 0, 0, "X")
        with pytest.raises(ValueError, match="port must be"):
            await drv.set_route(0, 0, 0, 0, 4)
        with pytest.raises(ValueError, match="5 bit"):
            await drv.msi(32)
        with pytest.raises(ValueError, match="32 bits"):
            await drv.write_reg("NODE", 1 << 32)
        with pytest.raises(ValueError, match="cannot write"):
            await drv.write_reg("ID", 0)
        with pytest.raises(TypeError):
            await drv.write_reg("NODE")
        await drv.clear_routes()
        assert await drv.routes() == []
        assert await drv.get_route(2) == {"mask": 0, "lower": 0, "upper": 0, "port": 0,
                                          "enable": 0}
    run(go())


def test_counters_and_clear():
    bar = ModelBar()
    count = REGS["COUNT"]
    bar.counters = {count.flat(("E", "RX_TLPS")): 7, count.flat(("S", "UR_SENT")): 2}
    drv = Driver(bar)

    async def go():
        c = await drv.counters()
        assert set(c) == {"N", "E", "W", "S"}
        assert len(c["N"]) == len(COUNT_REASONS) and c["E"]["RX_TLPS"] == 7 and c["S"]["UR_SENT"] == 2
        assert await drv.counters(1) == c["E"]
        await drv.clear_counters()
        # The clear, then a read behind it that returns once the clear has been done.
        assert bar.log[-2] == ("w", REGS["COUNTER_CLEAR"].offset, (1).to_bytes(4, "little"))
        assert bar.log[-1] == ("r", REGS["ID"].offset, 4)
        await drv.msi(17)
        assert bar.log[-1] == ("w", REGS["MSI"].offset, (17).to_bytes(4, "little"))
        assert await drv.port_status("W") == {"link_up": 0, "ltssm": 0, "dropping": 0}
    run(go())


def test_id_check_fails_clearly():
    class Zeros:
        async def read(self, addr, length):
            return bytes(length)

    with pytest.raises(DriverError, match="ID reads 0x00000000"):
        run(Driver(Zeros()).id_check())

    class FutureChip(ModelBar):
        async def read(self, addr, length):
            if addr == REGS["VERSION"].offset:
                return (2 << 16).to_bytes(4, "little")
            return await super().read(addr, length)

    with pytest.raises(DriverError, match="major version 0"):
        run(Driver(FutureChip()).id_check())


def test_program_checks():
    drv = Driver(ModelBar())
    with pytest.raises(ValueError, match="node_id"):
        run(drv.program(Topology.ring(17), AddressMap(0, 1 << 20, 1 << 12, 1 << 12), 16, 0))
    with pytest.raises(RouteTableFull):
        small = Driver(ModelBar())
        small._n_routes = 2
        run(small.program(Topology.double_ring(4), AMAP, 2, 0))


def test_pio_write():
    tca = RecordingBar()
    drv = Driver(ModelBar(), tca)

    async def go():
        a = await drv.pio_write(AMAP, 5, "host", 0x100, b"hello")
        assert a == AMAP.region(5)[0] + 0x100
        assert tca.writes[-1] == (a - AMAP.tca_base, b"hello")
        a = await drv.pio_write(AMAP, 2, ("gpu", 3), 0, bytes(8))
        assert a == AMAP.window(2, ("gpu", 3))[0]
        with pytest.raises(ValueError, match="do not fit"):
            await drv.pio_write(AMAP, 2, ("gpu", 3), (1 << 28) - 4, bytes(8))
    run(go())
    with pytest.raises(ValueError, match="no tca_bar"):
        run(Driver(ModelBar()).pio_write(AMAP, 0, "host", 0, b"x"))
