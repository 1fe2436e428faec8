"""cocotb tests of one PEACH2 chip: registers, PIO, routing against the reference model, bad input,
all four ports at once.

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
from collections import Counter, defaultdict

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.pcie.core.tlp import CplStatus, Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.chip import CSR_BAR, PORTS, TCA_BAR, Chip
from peach2.sim.driver import Driver
from peach2.sim.hardip import damage, tlp_to_beats
from peach2.sim.router_model import RouteEntry, RouterState, route, translate

PARAMS = json.loads(os.environ.get("PEACH2_PARAMS", "{}"))
SEED = int(os.environ.get("PEACH2_SEED", "0"))
REASONS = ("UNROUTABLE", "WINDOW_CLOSED", "UNSUPPORTED", "READ_REJECTED", "MALFORMED",
           "POISONED", "RX_ERR", "UNEXPECTED_CPL")
HOST_ID = PcieId(0, 0, 0)
#: Every node's region in the TCA window (node d at window base + d * NODE_SIZE).
NODE_SIZE = 1 << 32
MASK64 = (1 << 64) - 1


async def setup(dut, *, pauses=True, seed=SEED, **chip_options):
    """Clock, reset, a :class:`Chip` (``chip_options`` go to it), enumeration; return
    ``(chip, driver, bars)``.  With ``pauses``, seeded idles and backpressure on every port."""
    Clock(dut.clk, 4, unit="ns", impl="gpi").start()
    chip = Chip(dut, seed=seed, **chip_options)
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


def seq_of(tlp):
    """Return the sequence number a test wrote into the first payload DW of ``tlp``."""
    return int.from_bytes(bytes(tlp.get_data())[:4], "little")


def requests_sent(chip, port):
    """Return the requests the chip sent on ``port``, in order (completions left out)."""
    return [t for t in chip.sent[port] if not t.is_completion()]


def check_delivered(chip, expected, decisions=None):
    """Assert each port sent exactly ``expected[port]``, a list of ``(source, seq, Tlp)``.

    Nothing lost, nothing extra, every TLP byte-exact (header included) and the TLPs of one
    source in the order it sent them.  ``decisions`` (seq -> anything) explains extras.
    """
    for out in PORTS:
        got = requests_sent(chip, out)
        want = expected.get(out, [])
        got_seqs = [seq_of(t) for t in got]
        want_seqs = {s for _, s, _ in want}
        extra = sorted(set(got_seqs) - want_seqs)
        missing = sorted(want_seqs - set(got_seqs))
        why = [decisions.get(s) for s in extra[:5]] if decisions else ""
        assert not extra and not missing and len(got) == len(want), (
            f"port {out}: {len(got)} TLPs, expected {len(want)}; unexpected seqs {extra[:5]} "
            f"{why}, missing {missing[:5]}; first unexpected: "
            f"{[t for t, s in zip(got, got_seqs) if s in extra][:2]}")
        by_seq = {s: (src, t) for src, s, t in want}
        last = {}
        for t, s in zip(got, got_seqs):
            src, w = by_seq.pop(s)
            assert bytes(t.pack()) == bytes(w.pack()), f"port {out}: got {t!r}, expected {w!r}"
            assert s > last.get(src, -1), f"port {out}: flow from {src} reordered at seq {s}"
            last[src] = s


async def wait_until(chip, done, what, timeout=40000, step=50):
    """Wait until ``done()`` is true, checking every ``step`` cycles; fail after ``timeout``."""
    for _ in range(0, timeout, step):
        if done():
            return
        await ClockCycles(chip.dut.clk, step)
    raise AssertionError(f"timeout after {timeout} cycles waiting for {what}")


async def program_nodes(drv, base, phys, nodes="NEWS", *, pio=True, route_=True):
    """Route node ``d``'s region (``base + d * NODE_SIZE``) to port ``nodes[d]``; set the
    offset so node 0's region leaves N at ``phys``; return the matching reference state."""
    mask = ~(NODE_SIZE - 1) & MASK64
    entries = []
    for d, port in enumerate(nodes):
        lower = base + d * NODE_SIZE
        await drv.set_route(d, mask, lower, lower, port)
        entries.append(RouteEntry(mask, lower, lower, port))
    offset = (base - phys) & MASK64
    await drv.set_offset(offset)
    await drv.enable(pio=pio, route=route_)
    return RouterState(routes=entries, offset=offset, pio_enable=pio, route_enable=route_)


def node_write(rng, seq, base, node, *, length=None, requester=PcieId(0x40, 0, 0)):
    """Return a MWr into ``node``'s region, not crossing 4 KiB, ``seq`` in its first DW."""
    length = length or rng.choice([1, 2, 3, 4, 7, 16, 33, 64])
    offset = rng.randrange(NODE_SIZE // 4) * 4
    room = 0x1000 - (offset & 0xFFF)
    if 4 * length > room:
        offset -= 4 * length - room
    payload = seq.to_bytes(4, "little") + rng.randbytes(4 * length - 4)
    return mwr(base + node * NODE_SIZE + offset, payload, requester=requester)


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

    check_delivered(chip, expected, decisions)
    counts = await drv.counters()
    for (p, reason), k in drops.items():
        assert counts[p.upper()][reason] == k, (p, reason, counts[p.upper()], k)
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


# -- bad input ----------------------------------------------------------------------------------

#: Requester IDs of the injected requests: never the host's 00:00.0, so that completions toward N
#: stay in the captures instead of going to the host (see Chip._default_pass).
REQUESTER = PcieId(0x41, 0, 0)
REG_READER = PcieId(0x42, 0, 0)
def decide(state, port, tlp, bardec=0):
    """Return the reference model's decision for ``tlp`` arriving on ``port`` (lower case)."""
    return route(state, port.upper(), tlp, bar=bardec.bit_length() - 1 if bardec else None)


def _request(rng, fmt_type, *, address=0, data=None, tag=None, requester=REQUESTER):
    tlp = Tlp()
    tlp.fmt_type = fmt_type
    tlp.requester_id = requester
    tlp.tag = rng.randrange(1024) if tag is None else tag
    tlp.tc = rng.randrange(8)
    tlp.attr = rng.randrange(8)
    if data is not None:
        tlp.set_addr_be_data(address, data)
    else:
        tlp.set_addr_be(address, 4)
    return tlp


def unforwarded_request(rng, kind):
    """Return a non-posted request of a type the chip never forwards (config, I/O, atomics)."""
    if kind in ("cfg_rd0", "cfg_wr0", "cfg_rd1", "cfg_wr1"):
        ft = {"cfg_rd0": TlpType.CFG_READ_0, "cfg_wr0": TlpType.CFG_WRITE_0,
              "cfg_rd1": TlpType.CFG_READ_1, "cfg_wr1": TlpType.CFG_WRITE_1}[kind]
        data = rng.randbytes(4) if "wr" in kind else None
        tlp = _request(rng, ft, address=4 * rng.randrange(1024), data=data)
        tlp.completer_id = PcieId(rng.randrange(1, 256), rng.randrange(32), rng.randrange(8))
        return tlp
    if kind in ("io_rd", "io_wr"):
        data = rng.randbytes(4) if kind == "io_wr" else None
        ft = TlpType.IO_WRITE if data else TlpType.IO_READ
        return _request(rng, ft, address=4 * rng.randrange(1 << 30), data=data)
    ft, size = {"fetch_add": (TlpType.FETCH_ADD, 4), "swap64": (TlpType.SWAP_64, 8),
                "cas": (TlpType.CAS, 8), "cas64": (TlpType.CAS_64, 16)}[kind]
    high = 1 << 32 if ft in (TlpType.SWAP_64, TlpType.CAS_64) else 0
    return _request(rng, ft, address=high + size * rng.randrange(1 << 20),
                    data=rng.randbytes(size))


def completion(rng, *, data=None, ep=False):
    """Return a completion nobody asked the chip for."""
    tlp = Tlp()
    tlp.fmt_type = TlpType.CPL_DATA if data else TlpType.CPL
    tlp.requester_id = PcieId(rng.randrange(256), 0, 0)
    tlp.completer_id = PcieId(rng.randrange(1, 256), 0, 0)
    tlp.tag = rng.randrange(256)
    tlp.ep = ep
    if data:
        tlp.set_data(data)
        tlp.byte_count = len(data)
        tlp.lower_address = 4 * rng.randrange(32)
    return tlp


def message(rng, *, data=None):
    """Return ``(tlp, beats)`` of a vendor-defined message (cocotbext-pcie cannot pack one)."""
    tlp = Tlp()
    tlp.fmt_type = TlpType.MSG_DATA_LOCAL if data else TlpType.MSG_LOCAL
    tlp.requester_id = REQUESTER
    tlp.tag = rng.randrange(256)
    # Framed like a 4-DW request whose address has bit 2 clear: payload from stream DW 4.
    carrier = mwr(1 << 32, data) if data else mrd(1 << 32, 4)
    beats = tlp_to_beats(carrier, 0, rng)
    length = len(data) // 4 if data else 0
    dw0 = (0b011 if data else 0b001) << 29 | 0x14 << 24 | length
    dw1 = int(tlp.requester_id) << 16 | tlp.tag << 8 | 0x7F        # Vendor_Defined Type 1
    beats[0] = beats[0]._replace(data=dw0 | dw1 << 32, be=0)
    return tlp, beats


class Traffic:
    """What to inject on every port, and what the reference model says must come of it.

    Build it from *units*: callables that add a few TLPs when called.  :meth:`mix` shuffles the
    units of each port and calls them in that order, so sequence numbers follow injection order.

    Members
    -------
    expected : dict
        Out port -> ``[(source port, seq, Tlp as it must leave)]``.
    urs : dict
        Port -> requests it must answer with an Unsupported Request completion, in order.
    counts : dict
        Port -> :class:`collections.Counter` of COUNT reasons (``UR_SENT`` included).
    """

    def __init__(self, state, rng, base):
        self.state, self.rng, self.base = state, rng, base
        self.units = {p: [] for p in PORTS}
        self.items = {p: [] for p in PORTS}
        self.expected = defaultdict(list)
        self.urs = defaultdict(list)
        self.counts = {p: Counter() for p in PORTS}
        self.seq = 0

    def next_seq(self):
        self.seq += 1
        return self.seq

    def add(self, port, tlp, bardec=0, beats=None, reason=None):
        """Queue ``tlp`` (or raw ``beats`` standing for it) on ``port``; return the decision.

        Without ``reason`` the reference model decides.  With it (framing errors, which the
        model never sees) the TLP must be dropped unanswered and counted under ``reason`` only.
        """
        decision = None
        if reason is not None:
            self.counts[port][reason] += 1
        else:
            decision = decide(self.state, port, tlp, bardec)
            if decision.action == "forward":
                out = decision.port.lower()
                want = translate(self.state, tlp) if out == "n" else tlp
                self.expected[out].append((port, seq_of(tlp), want))
            elif decision.action == "drop":
                self.counts[port][decision.reason] += 1
                if decision.ur:
                    self.urs[port].append(tlp)
                    self.counts[port]["UR_SENT"] += 1
        self.items[port].append((tlp, bardec, beats))
        return decision

    def write(self, port, node, **kwargs):
        """Queue a MWr into ``node``'s region (from the host's side of the TCA BAR on N)."""
        tlp = node_write(self.rng, self.next_seq(), self.base, node, **kwargs)
        return self.add(port, tlp, 1 << TCA_BAR if port == "n" else 0)

    def unit(self, port, fn, times=1):
        self.units[port].extend([fn] * times)

    def mix(self, good_nodes, n_good):
        """Shuffle each port's units with ``n_good`` writes to ``good_nodes``; build the items.

        Every port ends with a good write, so no broken packet is left waiting for a successor.
        """
        for p in PORTS:
            units = self.units[p] + [lambda p=p: self.write(p, self.rng.choice(good_nodes))] \
                * n_good
            self.rng.shuffle(units)
            for fn in units:
                fn()
            self.write(p, self.rng.choice(good_nodes))

    def inject(self, chip):
        for p in PORTS:
            for tlp, bardec, beats in self.items[p]:
                if beats is None:
                    chip.models[p].inject(tlp, bardec=bardec)
                else:
                    chip.models[p].inject_beats(beats)


def ur_completions(chip, port):
    return [t for t in chip.sent[port] if t.is_completion() and t.status == CplStatus.UR]


def check_urs(chip, port, requests):
    """Assert ``port`` sent exactly one UR completion per request in ``requests``, in order."""
    got = ur_completions(chip, port)
    assert len(got) == len(requests), (
        f"port {port}: {len(got)} UR completions, expected {len(requests)}: "
        f"{[(c.requester_id, c.tag) for c in got][:8]} vs "
        f"{[(r.fmt_type.name, r.requester_id, r.tag) for r in requests][:8]}")
    completer = chip.models["n"].pcie_id
    for req, cpl in zip(requests, got):
        want = (TlpType.CPL, CplStatus.UR, req.requester_id, req.tag, completer, int(req.tc),
                int(req.attr))
        have = (cpl.fmt_type, cpl.status, cpl.requester_id, cpl.tag, cpl.completer_id,
                int(cpl.tc), int(cpl.attr))
        assert have == want, f"port {port}: UR {cpl!r} answers {req!r}; expected {want}"


async def run_phase(chip, drv, traffic, name, reg_reads=()):
    """Inject ``traffic``, wait for its results, check them and the counters; return counts.

    ``reg_reads`` are ``(tag, value)`` of register reads injected on N by ``REG_READER``.
    """
    await drv.clear_counters()
    for p in PORTS:
        chip.sent[p].clear()
    traffic.inject(chip)
    for model in chip.models.values():
        await model.rx_idle()

    def done():
        return all(len(requests_sent(chip, p)) >= len(traffic.expected[p])
                   and len(ur_completions(chip, p)) >= len(traffic.urs[p]) for p in PORTS)
    await wait_until(chip, done, f"phase {name}: delivery")
    await ClockCycles(chip.dut.clk, 300)        # anything extra would show up by now

    check_delivered(chip, traffic.expected)
    for p in PORTS:
        check_urs(chip, p, traffic.urs[p])
        others = [t for t in chip.sent[p] if t.is_completion() and t.status != CplStatus.UR
                  and not (p == "n" and t.requester_id in (HOST_ID, REG_READER))]
        assert not others, f"port {p}: unexpected completions {others[:3]}"
    reads = [t for t in chip.sent["n"] if t.is_completion() and t.requester_id == REG_READER]
    assert [(t.fmt_type, t.status, t.tag, bytes(t.get_data())) for t in reads] == [
        (TlpType.CPL_DATA, CplStatus.SC, tag, value.to_bytes(4, "little"))
        for tag, value in reg_reads], f"register reads on N: {reads}"

    counts = await drv.counters()
    for p in PORTS:
        want = {r: traffic.counts[p][r] for r in REASONS + ("UR_SENT",)}
        got = {r: counts[p.upper()][r] for r in want}
        assert got == want, f"phase {name}, port {p}: COUNT {got}, expected {want}"
    dut = chip.dut
    dut._log.info("phase %s: %s forwarded, URs %s, drops %s", name,
                  {p: len(traffic.expected[p]) for p in PORTS},
                  {p: len(traffic.urs[p]) for p in PORTS},
                  {p: dict(+traffic.counts[p]) for p in PORTS})
    return counts


def add_framing_errors(t, port, bardec, times=1):
    """Units of TLPs broken in framing or flagged ``rx_st_err``, on ``port``.

    Errors the RX adapter sees on the start-of-packet beat hit any kind of TLP; errors it sees
    later hit routed writes only (their head has left cut-through; the TX adapter drops them).
    """
    rng = t.rng

    def victim(kind):
        if kind == "mrd":
            return mrd(t.base + rng.randrange(4) * NODE_SIZE + 8 * rng.randrange(1 << 20), 4,
                       tag=rng.randrange(256)), bardec
        if kind == "cpl":
            return completion(rng), 0
        if kind == "cfg_rd0":
            return unforwarded_request(rng, "cfg_rd0"), 0
        if kind in ("mwr1", "mwr_2beat"):
            # A 3-DW header (below 4 GiB, no route there): one beat with address bit 2 set, two
            # with it clear.  Its framing error shows on the first beat.
            address = 8 * rng.randrange(1 << 28) + (4 if kind == "mwr1" else 0)
            return mwr(address, t.next_seq().to_bytes(4, "little")), bardec
        if kind == "cfg_wr0_2beat":
            tlp = unforwarded_request(rng, "cfg_wr0")
            tlp.address &= ~4
            return tlp, 0
        node = rng.randrange(4)
        return node_write(rng, t.next_seq(), t.base, node, length=rng.choice([8, 17, 64])), \
            bardec

    def broken(kind, how, reason, then_good=False):
        def fn():
            tlp, bd = victim(kind)
            beats = tlp_to_beats(tlp, bd, rng)
            assert len(beats) == {"mrd": 1, "cpl": 1, "cfg_rd0": 1, "mwr1": 1}.get(kind, 2) \
                or kind == "mwr", (kind, len(beats))
            t.add(port, tlp, bd, damage(rng, beats, how), reason)
            if then_good:               # the next start of packet ends the broken one
                t.write(port, rng.randrange(4))
        t.unit(port, fn, times)

    for kind in ("mrd", "cpl", "cfg_wr0_2beat", "mwr"):
        broken(kind, "err_sop", "RX_ERR")
    for kind in ("mrd", "cpl", "cfg_rd0", "mwr1"):
        broken(kind, "long", "MALFORMED")
        broken(kind, "empty", "MALFORMED")
        broken(kind, "no_eop", "MALFORMED", then_good=True)
    for kind in ("mwr_2beat", "cfg_wr0_2beat"):
        broken(kind, "short", "MALFORMED")
    broken("mwr", "stray", "MALFORMED")
    # Found after the head has left: routed writes only.
    for how in ("short", "long", "empty"):
        broken("mwr", how, "MALFORMED")
    broken("mwr", "no_eop", "MALFORMED", then_good=True)
    broken("mwr", "err_late", "RX_ERR")


@cocotb.test()
async def bad_input(dut):
    """Every kind of bad input on every port: dropped, counted, UR-answered, nothing disturbed.

    Three phases, each with good writes (routed by a 4-node table, to N translated) mixed in on
    every port and random pauses everywhere:

    1. windows open: unroutable writes; config, I/O and atomic requests; messages; reads from
       E/W/S and host reads into the TCA window; host requests hitting no BAR of ours;
       completions; poisoned writes, reads and completions; framing errors and ``rx_st_err``;
    2. CONTROL.PIO_ENABLE=0: host writes into the TCA window (register writes and reads on N go on);
    3. CONTROL.ROUTE_ENABLE=0: writes arriving on E/W/S.
    """
    chip, drv, bars = await setup(dut, pauses=PARAMS.get("pauses", True))
    rng = random.Random(SEED + 3)
    base = chip.host.dev.bar_addr[TCA_BAR]
    csr_base = chip.host.dev.bar_addr[CSR_BAR]
    # Node 0's region maps across 4 GiB in the host, so N sees 3-DW and 4-DW rewrites.
    state = await program_nodes(drv, base, phys=0xC000_0000)
    n_good = PARAMS.get("good", 24)
    times = PARAMS.get("times", 1)

    # -- phase 1: windows open --------------------------------------------------------------
    t = Traffic(state, rng, base)
    for p in PORTS:
        bar = 1 << TCA_BAR if p == "n" else 0

        def unroutable(p=p, bar=bar):
            node = rng.randrange(9, 16)
            t.write(p, node)
            if p != "n":                # E/W/S: anywhere in the 64-bit space
                tlp = mwr(rng.randrange(base) & ~3, t.next_seq().to_bytes(4, "little"))
                assert t.add(p, tlp, bar).reason == "UNROUTABLE"
        t.unit(p, unroutable, 2 * times)
        for kind in ("cfg_rd0", "cfg_wr0", "cfg_rd1", "cfg_wr1", "io_rd", "io_wr", "fetch_add",
                     "swap64", "cas", "cas64"):
            t.unit(p, lambda p=p, kind=kind: t.add(p, unforwarded_request(rng, kind)), times)
        for data in (None, rng.randbytes(8)):
            def msg(p=p, data=data):
                tlp, beats = message(rng, data=data)
                assert t.add(p, tlp, 0, beats).reason == "UNSUPPORTED"
            t.unit(p, msg, times)
        t.unit(p, lambda p=p: t.add(p, completion(rng)), times)
        t.unit(p, lambda p=p: t.add(p, completion(rng, data=rng.randbytes(16))), times)

        def read(p=p, bar=bar):
            node = rng.randrange(4)
            length = rng.choice([4, 64, 256])
            tlp = mrd(base + node * NODE_SIZE + 256 * rng.randrange(1 << 20), length,
                      requester=REQUESTER, tag=rng.randrange(1024))
            assert t.add(p, tlp, bar).reason == "READ_REJECTED"
        t.unit(p, read, 2 * times)

        def poisoned(p=p, bar=bar):
            w = node_write(rng, t.next_seq(), base, rng.randrange(4))
            r = mrd(base + 64 * rng.randrange(1 << 20), 4, tag=rng.randrange(1024))
            c = completion(rng, data=rng.randbytes(4))
            for tlp, bd in ((w, bar), (r, bar), (c, 0)):
                tlp.ep = True
                assert t.add(p, tlp, bd).reason == "POISONED"
        t.unit(p, poisoned, times)
        add_framing_errors(t, p, bar, times)
    # Host requests that hit no BAR of ours (the hard IP would not pass them; the chip must
    # still refuse them) and hit BAR 4 (not implemented).
    for bardec in (0, 1 << 4):
        t.unit("n", lambda bd=bardec: t.add("n", node_write(rng, t.next_seq(), base, 1), bd),
               times)
        t.unit("n", lambda bd=bardec: t.add("n", mrd(base + 64 * rng.randrange(1 << 20), 8,
                                                     tag=rng.randrange(256)), bd), times)
    t.mix(good_nodes=range(4), n_good=n_good)
    await run_phase(chip, drv, t, "open")

    # -- phase 2: PIO window closed ----------------------------------------------------------
    await drv.enable(pio=False, route=True)
    state.pio_enable = False
    t = Traffic(state, rng, base)
    t.unit("n", lambda: t.write("n", rng.randrange(16)), 6 * times)
    t.unit("n", lambda: t.add("n", mrd(base + 64 * rng.randrange(1 << 20), 4,
                                       tag=rng.randrange(256)), 1 << TCA_BAR), times)
    reg_reads = []

    def register_write_read():
        value = rng.randrange(16)
        node_reg = csr_base + drv.offset("NODE")
        assert t.add("n", mwr(node_reg, value.to_bytes(4, "little")), 1 << CSR_BAR).action \
            == "csr"
        tag = len(reg_reads)
        assert t.add("n", mrd(node_reg, 4, requester=REG_READER, tag=tag), 1 << CSR_BAR).action \
            == "csr"
        reg_reads.append((tag, value))
    t.unit("n", register_write_read, 6)
    t.mix(good_nodes=range(4), n_good=n_good // 2)
    await run_phase(chip, drv, t, "pio closed", reg_reads)

    # -- phase 3: routing closed -------------------------------------------------------------
    await drv.enable(pio=True, route=False)
    state.pio_enable, state.route_enable = True, False
    t = Traffic(state, rng, base)
    for p in ("e", "w", "s"):
        t.unit(p, lambda p=p: t.write(p, rng.randrange(16)), 6 * times)
        t.unit(p, lambda p=p: t.add(p, mrd(base + 64 * rng.randrange(1 << 20), 4,
                                           tag=rng.randrange(256))), times)
    t.mix(good_nodes=range(4), n_good=n_good // 2)
    await run_phase(chip, drv, t, "routing closed")
    chip.check()


@cocotb.test()
async def late_errors(dut):
    """Framing errors and ``rx_st_err`` found after a TLP's first beat left the RX adapter.

    The RX adapter passes such a TLP on cut-through and marks its last beat ``err``; it counts
    MALFORMED or RX_ERR.  Nothing else may happen: no second drop reason, no UR completion (the
    TLP is not a request anyone can trust), no TX_TLPS on a port it never leaves from.
    """
    chip, drv, bars = await setup(dut, pauses=False)
    rng = random.Random(SEED + 4)
    base = chip.host.dev.bar_addr[TCA_BAR]
    await program_nodes(drv, base, phys=0x3_0000_0000)
    await drv.clear_counters()

    cfg = unforwarded_request(rng, "cfg_wr0")
    cfg.address &= ~4                                       # two beats
    io = unforwarded_request(rng, "io_wr")
    io.address &= ~4                                        # two beats
    lost = node_write(rng, 1, base, 12, length=16)          # no route
    to_w = node_write(rng, 2, base, 2, length=16)           # routed to W
    poisoned = node_write(rng, 3, base, 3, length=16)       # routed to S, poisoned
    poisoned.ep = True
    cases = [(cfg, "long", "MALFORMED"), (io, "err_late", "RX_ERR"),
             (lost, "err_late", "RX_ERR"), (to_w, "short", "MALFORMED"),
             (poisoned, "long", "MALFORMED")]
    want = Counter()
    for tlp, how, reason in cases:
        assert len(tlp_to_beats(tlp)) >= 2
        chip.models["e"].inject_beats(damage(rng, tlp_to_beats(tlp, 0, rng), how))
        want[reason] += 1
        dut._log.info("E <- %s %s: expect %s only", tlp.fmt_type.name, how, reason)
    good = node_write(rng, 4, base, 3, length=4)
    chip.models["e"].inject(good)
    await wait_quiet(chip)

    problems = []
    counts = await drv.counters()
    got = {r: counts["E"][r] for r in REASONS + ("UR_SENT",)}
    if got != {r: want[r] for r in got}:
        problems.append(f"COUNT[E]: {got}, expected {dict(want)} and 0 elsewhere")
    urs = ur_completions(chip, "e")
    if urs:
        problems.append(f"E answered with {len(urs)} UR completion(s), for requester/tag "
                        f"{[(c.requester_id, c.tag) for c in urs]}")
    if counts["W"]["TX_TLPS"] != 0:
        problems.append(f"COUNT[W][TX_TLPS] = {counts['W']['TX_TLPS']}: W sent nothing")
    if counts["S"]["TX_TLPS"] != 1:
        problems.append(f"COUNT[S][TX_TLPS] = {counts['S']['TX_TLPS']}: S sent one TLP")
    check_delivered(chip, {"s": [("e", 4, good)]})
    chip.check()
    assert not problems, "\n".join(problems)


@cocotb.test()
async def locked_read(dut):
    """Locked memory reads (MRdLk) on every port, N into both BARs: UNSUPPORTED, answered UR.

    The reference model lists MRdLk with neither reads nor writes: unsupported.  A completion for
    a locked read is CplLk (PCIe base specification, completion types), and the requester must get
    one, so a MRdLk into the register BAR must not vanish in the register block.
    """
    chip, drv, bars = await setup(dut, pauses=False)
    rng = random.Random(SEED + 5)
    base = chip.host.dev.bar_addr[TCA_BAR]
    state = await program_nodes(drv, base, phys=0x3_0000_0000)
    await drv.clear_counters()
    want = {p: Counter() for p in PORTS}
    sent = defaultdict(list)
    for p, bardec in (("n", 1 << TCA_BAR), ("n", 1 << CSR_BAR), ("e", 0), ("w", 0), ("s", 0)):
        address = (base if bardec != 1 << CSR_BAR else chip.host.dev.bar_addr[CSR_BAR]) + 0x40
        tlp = _request(rng, TlpType.MEM_READ_LOCKED_64, address=address)
        tlp.tag = rng.randrange(256)
        d = decide(state, p, tlp, bardec)
        dut._log.info("%s <- MRdLk bar %d: model says %s", p.upper(), bardec, d)
        if bardec != 1 << CSR_BAR:
            assert (d.action, d.reason, d.ur) == ("drop", "UNSUPPORTED", True), d
        want[p]["UNSUPPORTED"] += 1
        want[p]["UR_SENT"] += 1
        sent[p].append(tlp)
        chip.models[p].inject(tlp, bardec=bardec)
    await wait_quiet(chip)

    problems = []
    counts = await drv.counters()
    for p in PORTS:
        got = {r: counts[p.upper()][r] for r in REASONS + ("UR_SENT",)}
        if got != {r: want[p][r] for r in got}:
            problems.append(f"COUNT[{p.upper()}]: {+Counter(got)}, expected {dict(want[p])}")
        cpls = [t for t in chip.sent[p] if t.is_completion() and t.requester_id != HOST_ID]
        answered = [(c.fmt_type.name, c.status.name, c.tag) for c in cpls]
        expected = [("CPL_LOCKED", "UR", r.tag) for r in sent[p]]
        if answered != expected:
            problems.append(f"port {p}: completions {answered}, expected {expected}")
    chip.check()
    assert not problems, "\n".join(problems)
