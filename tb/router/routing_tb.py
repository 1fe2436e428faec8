"""cocotb tests of one PEACH2 chip: registers and PIO, routing against the reference model, all
four ports at once.

::

    Host (RootComplex) --Gen2 x8-- N model --+                 +-- E model --> captured
        BAR0: registers                      |    peach2 (DUT)  +-- W model --> captured
        BAR2: TCA window                     |                 +-- S model --> captured
    inject(): TLPs into any port's RX side --+

The chip's decisions are checked against :mod:`peach2.sim.reference.router`; every port runs with
seeded random backpressure on TX and idle cycles between packets on RX (the hard IP streams a
TLP's beats back to back once it has started it, so the chip's TX adapters run cut-through).
The harness (bring-up, builders, checks) is :mod:`peach2.sim.harness.router`.
"""
import random
from collections import Counter, defaultdict
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.pcie.core.tlp import TlpType

from peach2.sim.harness import (
    NODE_SIZE,
    PORTS,
    REASONS,
    TCA_BAR,
    check_delivered,
    decide,
    mwr,
    program_nodes,
    requests_sent,
    sample_outcomes,
    seq_of,
    setup,
    wait_quiet,
    wait_until,
)
from peach2.sim.harness.coverage import Coverage
from peach2.sim.reference import RouteEntry, RouterState, route, translate
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()


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


def save_coverage(chip, injected):
    """Sample the checked ``injected`` TLPs into the ``coverage`` file named by the run's
    parameters (none: nothing), adding to what an earlier test of the run wrote there."""
    if not PARAMS.get("coverage"):
        return
    cov = Coverage()
    sample_outcomes(cov, chip, injected)
    path = Path(PARAMS["coverage"])
    if path.exists():
        cov.merge(Coverage.load(path))
    cov.save(path)


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
    for i, e in enumerate(entries):
        r = await drv.get_route(i)
        assert (r["mask"], r["lower"], r["upper"], r["port"], r["enable"]) == (
            e.mask, e.lower, e.upper, "NEWS".index(e.port), int(e.enable)), (i, e, r)
    offset = rng.getrandbits(40) << 12
    await drv.set_offset(offset)
    await drv.enable(pio=True, route=True)
    state = RouterState(routes=entries, offset=offset, pio_enable=True, route_enable=True)
    await drv.clear_counters()

    expected = defaultdict(list)            # out port -> [(in port, seq, Tlp)]
    decisions = {}
    drops = defaultdict(int)
    injected = []
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
            injected.append((p, tlp, decision))
            chip.models[p].inject(tlp, bardec=1 << TCA_BAR if p == "n" else 0)
            seq += 1
    await wait_quiet(chip, 2000)

    check_delivered(chip, expected, decisions)
    counts = await drv.counters()
    for (p, reason), k in drops.items():
        assert counts[p.upper()][reason] == k, (p, reason, counts[p.upper()], k)
    save_coverage(chip, injected)
    dut._log.info("%d TLPs forwarded exactly, drops %s", sum(map(len, expected.values())),
                  dict(drops))
    chip.check()


# -- all four ports at once ---------------------------------------------------------------------

def shares_while_contended(order, sources):
    """Return each source's share of ``order`` (sources of an output's TLPs, in sending order)
    up to the TLP with which the first source ran out: the period all of them had backlog."""
    end = min(max(i for i, s in enumerate(order) if s == src) for src in sources)
    window = order[:end + 1]
    return {src: window.count(src) / len(window) for src in sources}, len(window)


@cocotb.test()
async def four_ports_concurrent(dut):
    """All four ports receive and send at once; then several inputs compete for one output.

    256-byte MWr with 64-bit addresses into node regions 0-3, routed to N, E, W, S (N-bound ones
    translated by the node offset).  Phases: the ring N->E->W->S->N, random permutations of the
    ports, then contention: E, W and S into N; N and S into W (with E->S and W->E beside them);
    all four into N.  Every phase checks no loss, byte-exact TLPs and order within each flow;
    contention phases check that each input's share of the output over the busy period is
    within 10% of 1/k (the crossbar serves packets in round robin).
    """
    chip, drv, bars = await setup(dut, pauses=PARAMS.get("pauses", True))
    rng = random.Random(SEED + 6)
    base = chip.host.dev.bar_addr[TCA_BAR]
    assert base >= 1 << 32, f"TCA BAR at {base:#x}: the test wants 64-bit addresses"
    state = await program_nodes(drv, base, phys=0x3_4000_0000)
    per_flow = PARAMS.get("per_flow", 10)
    backlog = PARAMS.get("backlog", 24)
    ring = [(p, PORTS[(i + 1) % 4]) for i, p in enumerate(PORTS)]
    phases = [("ring", ring, per_flow)]
    for k in range(PARAMS.get("permutations", 2)):
        dst = list(PORTS)
        rng.shuffle(dst)
        phases.append((f"permutation {k}", list(zip(PORTS, dst)), per_flow))
    phases += [("E,W,S->N", [("e", "n"), ("w", "n"), ("s", "n")], backlog),
               ("N,S->W", [("n", "w"), ("s", "w"), ("e", "s"), ("w", "e")], backlog),
               ("all->N", [(p, "n") for p in PORTS], backlog)]

    await drv.clear_counters()
    injected, delivered = Counter(), Counter()
    seq = 0
    for name, flows, n in phases:
        for p in PORTS:
            chip.sent[p].clear()
        expected = defaultdict(list)
        source = {}
        for k in range(n):
            for src, dst in flows:
                seq += 1
                node = PORTS.index(dst)
                payload = (seq.to_bytes(4, "little") + bytes([PORTS.index(src), node, k & 0xFF])
                           + rng.randbytes(249))
                tlp = mwr(base + node * NODE_SIZE + (256 * seq) % NODE_SIZE, payload)
                assert tlp.fmt_type == TlpType.MEM_WRITE_64
                d = decide(state, src, tlp, 1 << TCA_BAR if src == "n" else 0)
                assert (d.action, d.port) == ("forward", dst.upper()), d
                expected[dst].append((src, seq, translate(state, tlp) if dst == "n" else tlp))
                source[seq] = src
                chip.models[src].inject(tlp, bardec=1 << TCA_BAR if src == "n" else 0)
                injected[src] += 1
                delivered[dst] += 1
        for model in chip.models.values():
            await model.rx_idle()
        await wait_until(chip, lambda: all(len(requests_sent(chip, p)) >= len(expected[p])
                                           for p in PORTS), f"phase {name}")
        await ClockCycles(dut.clk, 100)
        check_delivered(chip, expected)
        dut._log.info("phase %s: %s", name,
                      ", ".join(f"{s.upper()}->{d.upper()}" for s, d in flows))
        into = defaultdict(set)
        for src, dst in flows:
            into[dst].add(src)
        for out, sources in into.items():
            if len(sources) < 2:
                continue
            order = [source[seq_of(t)] for t in requests_sent(chip, out)]
            shares, window = shares_while_contended(order, sources)
            k = len(sources)
            dut._log.info("  %s shares of %s over %d TLPs while contended: %s (ideal %.3f)",
                          "/".join(s.upper() for s in sorted(sources)), out.upper(), window,
                          {s.upper(): round(v, 3) for s, v in shares.items()}, 1 / k)
            assert all(abs(v - 1 / k) <= 0.1 / k for v in shares.values()), (
                f"phase {name}: unfair shares of {out.upper()}: {shares}; order {order}")

    counts = await drv.counters()
    for p in PORTS:
        P = p.upper()
        assert all(counts[P][r] == 0 for r in REASONS + ("UR_SENT",)), (P, counts[P])
        if p != "n":        # N also carries the host's register traffic
            assert counts[P]["RX_TLPS"] == injected[p], (P, counts[P], injected[p])
            assert counts[P]["TX_TLPS"] == delivered[p], (P, counts[P], delivered[p])
    dut._log.info("%d TLPs of 256 bytes, in %s, out %s", sum(injected.values()),
                  dict(injected), dict(delivered))
    chip.check()
