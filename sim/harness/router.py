"""Harness for one PEACH2 chip under cocotb: bring-up, TLP builders, delivery checks.

The chip (top ``peach2``) sits among four hard-IP models and a host on N
(:class:`peach2.sim.harness.chip.ChipHarness`); :func:`setup` clocks, resets and enumerates it and returns
``(chip, driver, bars)``.  :func:`mwr`/:func:`mrd` build requests, :func:`node_write` a write
into one node's region with a sequence number in its first DW, :func:`program_nodes` routes node
regions to ports and returns the matching :class:`~peach2.sim.reference.router.RouterState`;
:func:`check_delivered` asserts what each port sent (nothing lost, nothing extra, byte-exact, in
order per source); :func:`wait_until` / :func:`wait_quiet` wait without wall-clock timing.

Used by ``tb/router`` (routing, bad input, benchmarks).
"""

import random

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.params import REASON_TABLE
from peach2.sim.driver import Driver
from peach2.sim.reference import RouteEntry, RouterState, route
from peach2.sim.run import run_inputs

from .chip import PORTS, PUT_BAR, TCA_BAR, ChipHarness

__all__ = ["REASONS", "HOST_ID", "NODE_SIZE", "MASK64", "setup", "mwr", "mrd", "wait_quiet",
           "seq_of", "requests_sent", "check_delivered", "wait_until", "program_nodes",
           "node_write", "decide", "sample_outcomes"]

#: Every drop reason of a port's COUNT (``docs/registers.md``), in register order: every
#: reason of ``REASON_TABLE`` but the traffic counts and UR_SENT, so a new one is checked too.
REASONS = tuple(n for n, _, _ in REASON_TABLE if n not in ("RX_TLPS", "TX_TLPS", "UR_SENT"))
HOST_ID = PcieId(0, 0, 0)
#: Every node's region in the TCA window (node d at window base + d * NODE_SIZE).
NODE_SIZE = 1 << 32
MASK64 = (1 << 64) - 1


async def setup(dut, *, pauses=True, seed=None, **chip_options):
    """Clock, reset, a :class:`ChipHarness` (``chip_options`` go to it), enumeration; return
    ``(chip, driver, bars)``.  With ``pauses``, seeded idles and backpressure on every port.
    ``seed`` defaults to the run's seed (:func:`peach2.sim.run.env.run_inputs`)."""
    if seed is None:
        seed = run_inputs()[1]
    Clock(dut.clk, 4, unit="ns", impl="gpi").start()
    chip = ChipHarness(dut, seed=seed, **chip_options)
    rng = random.Random(seed)
    dut._log.info("seed %d", seed)
    dut.rst.value = 1
    for p in PORTS:
        getattr(dut, f"{p}_ltssm").value = 0
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    bars = await chip.start()
    if pauses:
        for p, model in chip.models.items():
            model.idle_inside_packets = False
            model.set_idle_generator(iter(lambda: int(rng.random() < 0.2), 2))
            chip.set_backpressure(p, iter(lambda: int(rng.random() < 0.2), 2))
    return chip, Driver(bars[0], bars[TCA_BAR], put_bar=bars[PUT_BAR]), bars


def _memory_request(address, read_or_write, requester, tag):
    """Return a memory request with a 3-DW header below 4 GiB and a 4-DW one above."""
    tlp = Tlp()
    tlp.fmt_type = read_or_write[address >= 1 << 32]
    tlp.requester_id = requester
    tlp.tag = tag
    return tlp


def mwr(address, data, requester=PcieId(0x40, 0, 0), tag=0):
    """Return a memory write of ``data`` (bytes) to ``address``."""
    tlp = _memory_request(address, (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64), requester, tag)
    tlp.set_addr_be_data(address, data)
    return tlp


def mrd(address, length, requester=PcieId(0x41, 0, 0), tag=0):
    """Return a memory read of ``length`` bytes at ``address``."""
    tlp = _memory_request(address, (TlpType.MEM_READ, TlpType.MEM_READ_64), requester, tag)
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


def decide(state, port, tlp, bardec=0):
    """Return the reference model's decision for ``tlp`` arriving on ``port`` (lower case)."""
    return route(state, port.upper(), tlp, bar=bardec.bit_length() - 1 if bardec else None)


def sample_outcomes(cov, chip, injected):
    """Sample into ``cov`` (a :class:`~peach2.sim.harness.coverage.Coverage`) every
    ``(port, tlp, decision)`` of ``injected`` once its outcome has been checked: a forwarded
    TLP is found on its output by its sequence number (:func:`seq_of`) for its backpressure
    bin.  ``decision`` is a reference Decision or ``(dest, error)``."""
    from .coverage import classify, outcome  # not at the top: ``python -m`` runs it
    sent = {}
    for p in PORTS:
        for t in chip.sent[p]:
            if not t.is_completion():
                sent[(p, seq_of(t))] = t
    for port, tlp, decision in injected:
        dest, error = decision if isinstance(decision, tuple) else outcome(decision)
        pressure = "n/a"
        if dest in ("N", "E", "W", "S"):
            out = sent[(dest.lower(), seq_of(tlp))]
            pressure = "stalled" if chip.stalled(dest.lower(), out) else "ready"
        cov.sample(*classify(tlp, port, dest, error, pressure))
