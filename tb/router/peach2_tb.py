"""cocotb tests of one PEACH2 chip: registers, PIO, routing against the reference model, bad input.

::

    Host (RootComplex) --Gen2 x8-- N model --+                 +-- E model --> captured
        BAR0: registers                      |    peach2 (DUT)  +-- W model --> captured
        BAR2: TCA window                     |                 +-- S model --> captured
    inject(): TLPs into any port's RX side --+

The chip's decisions are checked against :mod:`peach2.sim.router_model`; every port runs with
seeded random backpressure on TX and idle cycles between packets on RX (the hard IP streams a
TLP's beats back to back once it has started it, so the chip's TX adapters run cut-through).
"""

import json
import os
import random
from collections import defaultdict

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Timer
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.chip import PORTS, TCA_BAR, Chip
from peach2.sim.driver import Driver
from peach2.sim.router_model import RouteEntry, RouterState, route, translate

PARAMS = json.loads(os.environ.get("PEACH2_PARAMS", "{}"))
SEED = int(os.environ.get("PEACH2_SEED", "0"))
REASONS = ("UNROUTABLE", "WINDOW_CLOSED", "UNSUPPORTED", "READ_REJECTED", "MALFORMED",
           "POISONED", "RX_ERR", "UNEXPECTED_CPL")


async def setup(dut, *, pauses=True, seed=SEED):
    Clock(dut.clk, 4, unit="ns", impl="gpi").start()
    chip = Chip(dut, seed=seed)
    rng = random.Random(seed)
    dut._log.info("seed %d", seed)
    dut.rst.value = 1
    for p in PORTS:
        getattr(dut, f"{p}_ltssm").value = 0
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    bars = await chip.start()
    if pauses:
        for model in chip.models.values():
            model.idle_inside_packets = False
            model.set_idle_generator(iter(lambda: int(rng.random() < 0.2), 2))
            model.set_backpressure_generator(iter(lambda: int(rng.random() < 0.2), 2))
    return chip, Driver(bars[0], bars[TCA_BAR]), bars


def mwr(address, data, requester=PcieId(0x40, 0, 0), tag=0):
    tlp = Tlp()
    tlp.fmt_type = TlpType.MEM_WRITE if address < 1 << 32 else TlpType.MEM_WRITE_64
    tlp.requester_id = requester
    tlp.tag = tag
    tlp.set_addr_be_data(address, data)
    return tlp


def mrd(address, length, requester=PcieId(0x41, 0, 0), tag=0):
    tlp = Tlp()
    tlp.fmt_type = TlpType.MEM_READ if address < 1 << 32 else TlpType.MEM_READ_64
    tlp.requester_id = requester
    tlp.tag = tag
    tlp.set_addr_be(address, length)
    return tlp


async def wait_quiet(chip, cycles=300):
    for model in chip.models.values():
        await model.rx_idle()
    await ClockCycles(chip.dut.clk, cycles)


@cocotb.test()
async def registers_and_pio(dut):
    """ID/VERSION, a route to E and one to the chip's own host (offset subtraction), counters."""
    chip, drv, bars = await setup(dut, pauses=False)
    await drv.id_check()
    base = chip.host.dev.bar_addr[TCA_BAR]
    node_size = 1 << 32
    # Node 1's region -> E; node 0's (ours) -> N, translated by the offset.
    await drv.set_route(0, mask=~(node_size - 1) & (2**64 - 1), lower=base + node_size,
                        upper=base + node_size, port="E")
    await drv.set_route(1, mask=~(node_size - 1) & (2**64 - 1), lower=base, upper=base,
                        port="N")
    phys = 0x1_2340_0000
    await drv.set_offset(base - phys)
    await drv.enable(pio=True, route=True)

    data = bytes(range(1, 14))
    await bars[TCA_BAR].write(node_size + 0x1004, data)        # to node 1, leaves on E
    await bars[TCA_BAR].write(0x80, b"\xaa\xbb\xcc\xdd")        # to ourselves, leaves on N
    await wait_quiet(chip)
    assert [t.address for t in chip.sent["e"]] == [base + node_size + 0x1004]
    assert bytes(chip.sent["e"][0].get_data())[:13] == data
    n_writes = [t for t in chip.sent["n"] if not t.is_completion()]
    assert len(n_writes) == 1 and n_writes[0].address == phys + 0x80, n_writes
    assert n_writes[0].fmt_type == TlpType.MEM_WRITE_64
    counts = await drv.counters()
    dut._log.info("counters %s", counts)
    assert counts["N"]["RX_TLPS"] >= 2 and counts["E"]["TX_TLPS"] == 1
    chip.check()


def random_table(rng, n):
    entries = []
    for _ in range(n):
        bits = rng.randrange(12, 44)
        mask = ~((1 << bits) - 1) & (2**64 - 1)
        a = rng.randrange(1 << 48) & mask
        b = (a + (rng.randrange(1, 6) << bits)) & mask
        if rng.random() < 0.15:
            a, b = b, a                     # an empty range
        entries.append(RouteEntry(mask, a, b, rng.choice("NEWS"), rng.random() < 0.9))
    return entries


def random_address(rng, entries):
    if rng.random() < 0.8:
        e = rng.choice(entries)
        lo, hi = sorted((e.lower, e.upper))
        v = rng.randrange(lo, hi + 1) & e.mask
        address = v | (rng.getrandbits(64) & ~e.mask & (2**64 - 1))
    else:
        address = rng.getrandbits(rng.choice([32, 48, 64]))
    return address & ~0x3 & (2**64 - 1)


@cocotb.test()
async def routing_against_model(dut):
    """Random tables (overlaps, empty ranges, disabled entries), random addresses, all ports."""
    chip, drv, bars = await setup(dut)
    rng = random.Random(SEED + 1)
    n = await drv.n_routes()
    entries = random_table(rng, n)
    for i, e in enumerate(entries):
        await drv.set_route(i, e.mask, e.lower, e.upper, e.port, enable=e.enable)
    readback = await drv.routes()
    for i, (e, r) in enumerate(zip(entries, readback)):
        assert r[:4] == (e.mask, e.lower, e.upper, "NEWS".index(e.port)), (i, e, r)
    offset = rng.getrandbits(40) << 12
    await drv.set_offset(offset)
    await drv.enable(pio=True, route=True)
    state = RouterState(routes=entries, offset=offset, pio_enable=True, route_enable=True)
    await drv.clear_counters()

    expected = defaultdict(list)            # out port -> [(in port, seq, Tlp)]
    decisions = {}
    drops = defaultdict(int)
    per_port = PARAMS.get("per_port", 250)
    seq = 0
    for _ in range(per_port):
        for p in PORTS:
            address = random_address(rng, entries)
            length = rng.choice([1, 2, 4, 8, 16])
            address -= min(address & 0xFFF, (address & 0xFFF) + 4 * length - 0x1000) \
                if (address & 0xFFF) + 4 * length > 0x1000 else 0
            payload = seq.to_bytes(4, "little") + rng.randbytes(4 * length - 4)
            tlp = mwr(address, payload)
            decision = route(state, p.upper(), tlp, bar=TCA_BAR if p == "n" else None)
            decisions[seq] = (p, decision, tlp.address)
            if decision.action == "forward":
                out = decision.port.lower()
                want = translate(state, tlp) if out == "n" else tlp
                expected[out].append((p, seq, want))
            else:
                drops[(p, decision.reason)] += 1
            chip.models[p].inject(tlp, bardec=1 << TCA_BAR if p == "n" else 0)
            seq += 1
    await wait_quiet(chip, 2000)

    injected = {s: (p, t) for p, s, t in sum(expected.values(), [])}
    for out in PORTS:
        got = [t for t in chip.sent[out] if not t.is_completion()]
        want = expected[out]
        got_seqs = [int.from_bytes(bytes(t.get_data())[:4], "little") for t in got]
        extra = sorted(set(got_seqs) - {s for _, s, _ in want})
        missing = sorted({s for _, s, _ in want} - set(got_seqs))
        assert not extra and not missing and len(got) == len(want), (
            f"port {out}: {len(got)} TLPs, expected {len(want)}; unexpected seqs {extra[:5]} "
            f"(decided {[decisions[s] for s in extra[:5]]}), missing "
            f"{missing[:5]}; first unexpected: "
            f"{[t for t, s in zip(got, got_seqs) if s in extra][:2]}")
        by_seq = {s: (src, t) for src, s, t in want}
        last = {}
        for t in got:
            s = int.from_bytes(bytes(t.get_data())[:4], "little")
            assert s in by_seq, f"port {out}: unexpected TLP {t!r}"
            src, w = by_seq.pop(s)
            assert bytes(t.pack()) == bytes(w.pack()), f"port {out}: got {t!r}, expected {w!r}"
            assert s > last.get(src, -1), f"port {out}: flow from {src} reordered"
            last[src] = s
    counts = await drv.counters()
    for (p, reason), k in drops.items():
        assert counts[p.upper()][reason] == k, (p, reason, counts[p.upper()], k)
    dut._log.info("%d TLPs forwarded exactly, drops %s", sum(map(len, expected.values())),
                  dict(drops))
    chip.check()
