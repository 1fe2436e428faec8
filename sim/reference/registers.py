"""Reference model of the register BAR, from the register description only.

:class:`RegModel` says what every DW of BAR 0 reads and what writes do; :class:`ModelBar` is a
BAR window (async ``read``/``write`` as cocotbext-pcie's) backed by it, for driver tests that
need no gateware.
"""

from peach2.csr.regmap import REGMAP, Access

__all__ = ["RegModel", "ModelBar"]


class RegModel:
    """What every DW of BAR 0 reads, and what writes do, from the register description.

    Counters are not modelled here (the counter test checks bounds instead).
    """

    def __init__(self, regmap):
        self.regmap = regmap
        self.store = {}
        self.hw = {}            # (name, flat) -> value of RO inputs
        for reg in regmap:
            if reg.access is Access.RW:
                for flat, _ in reg.elements():
                    self.store[(reg.name, flat)] = reg.value

    def read(self, offset, counters=None):
        hit = self.regmap.at(offset)
        if hit is None:
            return 0
        reg, flat = hit
        if flat in reg.reserved:
            return 0
        if reg.access is Access.CONST:
            return reg.value
        if reg.access is Access.RO:
            return self.hw.get((reg.name, flat), 0) & reg.mask
        if reg.access is Access.RW:
            return self.store[(reg.name, flat)]
        if reg.access is Access.COUNTER:
            return (counters or {}).get(flat, 0)
        return 0

    def write(self, offset, value, be):
        if offset >= self.regmap.size:
            return
        hit = self.regmap.at(offset)
        if hit is None or hit[0].access is not Access.RW:
            return
        reg, flat = hit
        mask = sum(0xff << (8 * i) for i in range(4) if be >> i & 1)
        old = self.store[(reg.name, flat)]
        self.store[(reg.name, flat)] = ((old & ~mask) | (value & mask)) & reg.mask

    def apply_write_tlp(self, tlp):
        """Apply an MWr as the block does: DW by DW, first/last byte enables, stop at the end."""
        n = tlp.length
        for k in range(n):
            be = tlp.first_be if k == 0 else (tlp.last_be if k == n - 1 else 0xf)
            value = int.from_bytes(tlp.data[4 * k:4 * k + 4], "little")
            self.write((tlp.address & 0xfff) + 4 * k, value, be)


class ModelBar:
    """BAR 0 backed by :class:`RegModel` instead of a simulator; records every access in ``log``.

    ``counters`` (name -> value) is what the COUNT registers read.  For driver tests without
    gateware (``tb/csr/test_driver.py``, ``tb/routes/test_routes.py``).
    """

    def __init__(self, regmap=REGMAP):
        self.model = RegModel(regmap)
        self.log = []
        self.counters = {}

    async def read(self, addr, length):
        assert addr % 4 + length <= 8, "driver reads 1 or 2 DWs"
        self.log.append(("r", addr, length))
        base = addr & ~3
        raw = b"".join(self.model.read(base + 4 * k, self.counters).to_bytes(4, "little")
                       for k in range((addr % 4 + length + 3) // 4))
        return raw[addr % 4:addr % 4 + length]

    async def write(self, addr, data):
        self.log.append(("w", addr, bytes(data)))
        assert addr % 4 == 0 and len(data) % 4 == 0
        for k in range(len(data) // 4):
            self.model.write(addr + 4 * k, int.from_bytes(data[4 * k:4 * k + 4], "little"),
                             0xf)
