"""cocotb tests of the write protection windows (``docs/errors.md``) on one chip.

::

    Host --N model--+  peach2 (DUT)  +-- E, W, S models: inject() stamped writes from "nodes"
                    |  WIN[w], PROT  |   captured on N when passed, never when refused
                    +----------------+-- E captures the chip's own PIO and DMA writes (stamp)

A remote node's write arrives on E, W or S with its node number in requester ID bits [15:8]
(what the sending chip's ``PROT_CONTROL.stamp`` puts there; ``stamp_sources`` checks that side);
the windows decide whether it reaches the host.  Every port runs with seeded random idles and
backpressure.
"""
import random

import cocotb
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.driver import memcpy
from peach2.sim.harness import (
    MASK64,
    NODE_SIZE,
    TCA_BAR,
    check_delivered,
    mwr,
    program_nodes,
    requests_sent,
    seq_of,
    setup,
    wait_quiet,
    wait_until,
)
from peach2.sim.reference import RouteEntry, translate
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
LINKS = ("e", "w", "s")
PHYS = 0x1_0000_0000
#: A second region of this node below 4 GiB (3-DW headers), route entry 4.
LOW_REGION, LOW_SIZE = 0x8000_0000, 1 << 20


async def _program(dut, **setup_args):
    chip, drv, bars = await setup(dut, **setup_args)
    base = chip.host.dev.bar_addr[TCA_BAR]
    state = await program_nodes(drv, base, PHYS)
    low_mask = ~(LOW_SIZE - 1) & MASK64
    await drv.set_route(4, low_mask, LOW_REGION, LOW_REGION, "N")
    state.routes.append(RouteEntry(low_mask, LOW_REGION, LOW_REGION, "N"))
    return chip, drv, bars, base, state


def _write(seq, address, dws, source, rng):
    payload = seq.to_bytes(4, "little") + rng.randbytes(4 * dws - 4)
    return mwr(address, payload, requester=PcieId(source, 3, 1))


@cocotb.test()
async def window_rules(dut):
    """Every rule on every link port: source mask, read-only carve-out, closed window, a write
    straddling a window's end or crossing 4 KiB, outside every window, 3- and 4-DW headers,
    transit traffic unchecked; the counters and PROT_STATUS/PROT_SOURCES agree."""
    chip, drv, bars, base, state = await _program(dut)
    rng = random.Random(SEED + 7)
    own, node1 = base, base + NODE_SIZE
    await drv.set_window(0, own + 0x10000, own + 0x1FFFF, sources=0b0110)      # nodes 1, 2
    await drv.set_window(1, own + 0x20000, own + 0x20FFF, writable=False)      # read-only
    await drv.set_window(2, own + 0x18000, own + 0x18FFF, writable=False, sources=0b0100)
    await drv.set_window(3, own + 0x30000, own + 0x30FFF)
    await drv.set_window(3, open=False)                                         # closed
    await drv.set_window(4, own + 0x40000, own + 0x4FFFF)                      # all nodes
    await drv.set_window(7, LOW_REGION + 0x1000, LOW_REGION + 0x1FFF, sources=0b0010)
    # (name, address, DWs, source node, passes)
    cases = [
        ("admitted", own + 0x10100, 8, 1, True),
        ("admitted, other node", own + 0x1F000, 16, 2, True),
        ("source not in the mask", own + 0x10200, 4, 3, False),
        ("source 16 or more", own + 0x10300, 4, 0x21, False),
        ("read-only window", own + 0x20010, 2, 1, False),
        ("read-only carve-out, its node", own + 0x18040, 4, 2, False),
        ("read-only carve-out, other node", own + 0x18080, 4, 1, True),
        ("closed window", own + 0x30000, 1, 1, False),
        ("outside every window", own + 0x50000, 4, 1, False),
        ("straddles the window's end", own + 0x4FFF8, 4, 1, False),
        ("crosses 4 KiB inside a window", own + 0x40FF8, 4, 1, False),
        ("last DWs of a window", own + 0x4FFF0, 4, 1, True),
        ("3-DW header, admitted", LOW_REGION + 0x1800, 8, 1, True),
        ("3-DW header, not admitted", LOW_REGION + 0x1800, 8, 2, False),
        ("3-DW header, outside", LOW_REGION + 0x2000, 8, 1, False),
    ]
    # Nothing is checked before PROT_CONTROL.enable: one refused-to-be case passes.
    expected, decisions, seq = {"n": [], "e": []}, {}, 0
    tlp = _write(seq, own + 0x50000, 4, 9, rng)
    chip.models["e"].inject(tlp)
    expected["n"].append(("e", seq, translate(state, tlp)))
    seq += 1
    await wait_quiet(chip)
    await drv.write_reg("PROT_CONTROL", enable=1)
    await drv.read_reg("PROT_CONTROL")

    refused = {p: 0 for p in LINKS}
    sources, last = set(), None
    for p in LINKS:
        for name, address, dws, source, passes in rng.sample(cases, len(cases)):
            tlp = _write(seq, address, dws, source, rng)
            decisions[seq] = (p, name)
            if passes:
                expected["n"].append((p, seq, translate(state, tlp)))
            else:
                refused[p] += 1
                sources.add(source)
                last = (p, source)
            chip.models[p].inject(tlp)
            seq += 1
        # Transit: toward node 1 (out on E), from a node no window admits: never checked.
        if p != "e":
            tlp = _write(seq, node1 + 0x100 * seq, 4, 3, rng)
            expected["e"].append((p, seq, tlp))
            decisions[seq] = (p, "transit")
            chip.models[p].inject(tlp)
            seq += 1
        await wait_quiet(chip)
    check_delivered(chip, expected, decisions)

    counts = await drv.counters()
    for p in LINKS:
        assert counts[p.upper()]["PROTECTED"] == refused[p], (p, counts[p.upper()])
    assert counts["N"]["PROTECTED"] == 0
    status = await drv.read_fields("PROT_STATUS")
    assert status == {"valid": 1, "port": "NEWS".index(last[0].upper()), "source": last[1]}, \
        status
    seen = await drv.read_fields("PROT_SOURCES")
    assert seen == {"nodes": sum(1 << s for s in sources if s < 16),
                    "other": int(any(s >= 16 for s in sources))}, (seen, sources)
    await drv.write_reg("PROT_CLEAR", clear=1)
    assert await drv.read_reg("PROT_STATUS") == 0
    assert await drv.read_reg("PROT_SOURCES") == 0
    dut._log.info("refused per port %s, %d passed", refused, len(expected["n"]))
    chip.check()


@cocotb.test()
async def stamp_sources(dut):
    """PROT_CONTROL.stamp puts NODE into the requester ID of the host's PIO writes and of the
    DMA's writes (bus = node, device/function = the chip's own); without it PIO keeps the
    host's."""
    # N passes everything to the host: the DMA reads its source there.
    chip, drv, bars, base, state = await _program(dut, pauses=False,
                                                  pass_to_link=lambda port, tlp: port == "n")
    node1 = base + NODE_SIZE
    pcie = await drv.read_fields("PCIE_ID")
    devfn = pcie["device"] << 3 | pcie["function"]
    await drv.write_reg("NODE", node_id=5)
    await drv.write_reg("PROT_CONTROL", stamp=1)
    await drv.read_reg("PROT_CONTROL")

    await bars[TCA_BAR].write(NODE_SIZE + 0x100, b"\x11" * 32)                 # PIO
    drv.memory = chip.host.rc.mem_address_space
    src, region = chip.host.alloc(4096)
    region[0:4096] = bytes(range(256)) * 16
    await drv.dma_config(mps=256, mrrs=512)
    slots = await drv.dma_reg_set(0, [memcpy(src, node1 + 0x4000, 1024)])     # DMA: 4 writes
    await drv.dma_reg_start(0, slots)
    await wait_until(chip, lambda: len(requests_sent(chip, "e")) >= 5, "PIO and DMA writes on E")
    await drv.dma_wait(0)                       # raises DmaFault on an error
    await drv.write_reg("PROT_CONTROL", stamp=0)
    await drv.read_reg("PROT_CONTROL")
    await bars[TCA_BAR].write(NODE_SIZE + 0x200, b"\x22" * 8)
    await wait_quiet(chip)

    sent = requests_sent(chip, "e")
    assert len(sent) == 6, sent
    stamped = PcieId(5, devfn >> 3, devfn & 7)
    assert sent[0].address == node1 + 0x100 and sent[0].requester_id == stamped, sent[0]
    dma = sorted(sent[1:5], key=lambda t: t.address)
    assert [t.address for t in dma] == [node1 + 0x4000 + 256 * k for k in range(4)]
    assert all(t.requester_id == stamped for t in dma), [t.requester_id for t in dma]
    assert b"".join(bytes(t.get_data()) for t in dma) == bytes(region[0:1024])
    assert sent[5].address == node1 + 0x200 and sent[5].requester_id != stamped, sent[5]
    chip.check()


@cocotb.test()
async def open_close_during_traffic(dut):
    """A window opened and closed while E, W and S stream writes into it: every write arrives
    whole or is refused whole (none torn, none lost), and both happen."""
    chip, drv, bars, base, state = await _program(dut)
    rng = random.Random(SEED + 8)
    lo, hi = base + 0x100000, base + 0x10FFFF
    await drv.set_window(0, lo, hi, sources=0b10)
    await drv.write_reg("PROT_CONTROL", enable=1)
    per_port = PARAMS.get("per_port", 120)
    tlps = {}
    seq = 0
    for p in LINKS:
        for _ in range(per_port):
            dws = rng.choice([1, 4, 16, 32, 64])
            address = lo + rng.randrange(0x10) * 0x1000 + rng.randrange(0, 0x1000 - 4 * dws + 1,
                                                                        4)
            tlp = _write(seq, address, dws, 1, rng)
            tlps[seq] = (p, tlp)
            chip.models[p].inject(tlp)
            seq += 1
    toggles = 0
    while any(m.rx_tlps < per_port for m in (chip.models[p] for p in LINKS)) or toggles < 4:
        await drv.write_reg("WIN_CTRL", index=0, open=toggles % 2, writable=1)
        await drv.read_reg("WIN_CTRL", 0)
        toggles += 1
    await wait_quiet(chip)
    # The three ports' writes all leave through N, with backpressure: wait until every write
    # has left or been refused (a lost one fails here).
    for _ in range(40):
        counts = await drv.counters()
        refused = sum(counts[p.upper()]["PROTECTED"] for p in LINKS)
        if refused + len(requests_sent(chip, "n")) >= len(tlps):
            break
        await wait_quiet(chip, 500)

    got = requests_sent(chip, "n")
    delivered = {seq_of(t): t for t in got}
    assert len(delivered) == len(got), "a write arrived twice"
    for s, t in delivered.items():
        p, sent_tlp = tlps[s]
        assert bytes(t.pack()) == bytes(translate(state, sent_tlp).pack()), (s, t)
    counts = await drv.counters()
    for p in LINKS:
        passed = sum(1 for s in delivered if tlps[s][0] == p)
        assert passed + counts[p.upper()]["PROTECTED"] == per_port, (p, passed, counts[p.upper()])
    refused = sum(counts[p.upper()]["PROTECTED"] for p in LINKS)
    assert delivered and refused, (len(delivered), refused)
    dut._log.info("%d toggles: %d writes passed whole, %d refused whole", toggles,
                  len(delivered), refused)
    chip.check()
