"""cocotb tests of the Stratix IV hard-IP adapters, looped back RX -> TX (``peach2.sim.hdl.loopback_top``).

::

    HardIP model                 DUT: Loopback                          HardIP model
    inject()/inject_beats() --> AvalonST128RX --(mon_*)--> AvalonST128TX --> TX checker --> on_tx
                                                  |
                                            StreamMonitor  (checked against sim.tlpstream)

Every TLP is checked twice: the internal stream between the adapters against the stream
reference model (:func:`peach2.sim.reference.stream.tlp_to_beats`), and the TLP leaving TX against the
TLP that went in.  The model checks every Avalon-ST framing rule on TX (strict: the first
violation fails the test).  Parameters come from ``PEACH2_PARAMS``; the seed is logged.
"""

import itertools
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Timer
from cocotbext.pcie.core.tlp import Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.hardip import HardIPModel, damage, tlp_to_avalon_beats
from peach2.sim.pcie import terminate
from peach2.sim.reference import StreamMonitor, compare_packet, tlp_to_beats
from peach2.sim.run import HandshakeProbe, run_inputs

PARAMS, SEED = run_inputs()
MON_FIELDS = ("valid", "ready", "hdr", "data", "dw_en", "first", "last", "err", "bar")


def pause_generators(mode, rng):
    """Return (rx idle generator, tx backpressure generator) for a pause mode."""
    if mode == "none":
        return None, None
    if mode == "fixed":
        return itertools.cycle([0, 0, 0, 1]), itertools.cycle([0, 1, 1, 0, 0, 0, 0])
    if mode == "random":
        return (iter(lambda: int(rng.random() < 0.25), 2),
                iter(lambda: int(rng.random() < 0.3), 2))
    raise ValueError(f"unknown pause mode {mode!r}")


class TB:
    """Clock, reset, the hard-IP model on both sides of the loopback, and the stream monitor."""

    def __init__(self, dut, *, pauses="none", seed=SEED, strict=True, idle_inside=True):
        self.dut = dut
        self.rng = random.Random(seed)
        dut._log.info("seed %d, pauses %s", seed, pauses)
        self.model = HardIPModel(dut, bars=[(1 << 20, False, False)], max_payload_size=4096,
                            accept_all=True, dirty=True, seed=seed, strict=strict,
                            idle_inside_packets=idle_inside)
        self.partner = terminate(self.model, max_payload_size=4096,
                                 max_read_request_size=4096)
        self.model.set_link_config(max_payload_size=4096, max_read_request_size=4096)
        idle, backpressure = pause_generators(pauses, self.rng)
        self.model.set_idle_generator(idle)
        self.model.set_backpressure_generator(backpressure)
        self.monitor = StreamMonitor(dut.clk, {f: getattr(dut, f"mon_{f}") for f in MON_FIELDS})
        self.sent = []
        self.model.on_tx = self.sent.append

    async def start(self):
        Clock(self.dut.clk, 4, unit="ns", impl="gpi").start()
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        cocotb.start_soon(self.monitor.run())
        await ClockCycles(self.dut.clk, 2)

    async def drain(self, expected_tx, timeout_us=2000):
        """Wait until ``expected_tx`` TLPs have left TX and the pipeline is quiet."""
        await self.model.rx_idle()
        for _ in range(timeout_us):
            if len(self.sent) >= expected_tx:
                break
            await Timer(1, "us")
        await ClockCycles(self.dut.clk, 50)
        assert len(self.sent) == expected_tx, f"{len(self.sent)} TLPs left TX, " \
                                              f"expected {expected_tx}"

    def counters(self):
        return {name: int(getattr(self.dut, name).value) for name in (
            "rx_err_count", "rx_malformed_count", "tx_underrun_count", "tx_malformed_count",
            "tx_dropped_count")}


# -- stimulus: legal TLPs of every kind the adapters carry ----------------------------------------

def make_tlp(rng, kind, length, a2, first_be=0xF, last_be=None):
    """Return a legal TLP of ``kind`` with ``length`` DWs whose payload alignment bit is ``a2``."""
    t = Tlp()
    t.requester_id = PcieId.from_int(rng.randrange(1 << 16))
    t.tag = rng.randrange(256)
    if kind in ("mwr32", "mwr64", "mrd32", "mrd64"):
        t.fmt_type = {"mwr32": TlpType.MEM_WRITE, "mwr64": TlpType.MEM_WRITE_64,
                      "mrd32": TlpType.MEM_READ, "mrd64": TlpType.MEM_READ_64}[kind]
        base = rng.randrange(1 << 19) << 12
        if kind.endswith("64"):
            base |= rng.randrange(1, 1 << 20) << 32
        room = 4096 - 4 * length - 4 * a2           # offsets that keep the request in its page
        offset = rng.randrange(room // 8 + 1) * 8 + 4 * a2
        t.address = base + offset
        t.length = length
        t.first_be = first_be
        t.last_be = (0 if length == 1 else 0xF) if last_be is None else last_be
        if kind.startswith("mwr"):
            t.data = rng.randbytes(4 * length)
    else:
        t.fmt_type = TlpType.CPL_DATA if kind == "cpld" else TlpType.CPL
        t.completer_id = PcieId.from_int(rng.randrange(1 << 16))
        t.lower_address = (rng.randrange(16) * 8 + 4 * a2) & 0x7F
        if kind == "cpld":
            t.length = length
            t.byte_count = (4 * length) & 0xFFF
            t.data = rng.randbytes(4 * length)
        else:
            t.status = rng.choice([0, 1, 4])
            t.byte_count = rng.randrange(1, 4096)
    return t


def sweep(rng, lengths):
    """Every header kind x both alignments x ``lengths``, plus every byte-enable pattern."""
    tlps = []
    for kind in ("mrd32", "mrd64", "mwr32", "mwr64", "cpld"):
        for length in lengths:
            for a2 in (0, 1):
                if 4 * length + 4 * a2 > 4096:
                    continue  # cannot start at an odd DW and stay inside a 4 KiB page
                tlps.append(make_tlp(rng, kind, length, a2))
    tlps += [make_tlp(rng, "cpl", 0, a2) for a2 in (0, 1) for _ in range(4)]
    for kind in ("mwr32", "mwr64"):
        for first_be in range(16):
            tlps.append(make_tlp(rng, kind, 1, rng.randrange(2), first_be=first_be))
        for first_be in range(1, 16):
            for last_be in range(1, 16):
                tlps.append(make_tlp(rng, kind, 2, 0, first_be=first_be, last_be=last_be))
    rng.shuffle(tlps)
    return tlps


def same_tlp(a, b):
    """Compare two TLPs as they would be on the wire (``seq`` is the link layer's business)."""
    return bytes(a.pack()) == bytes(b.pack())


def bar_of(tlp):
    """The BAR hit the model presents with ``tlp`` (BAR 0 for memory requests, else none)."""
    return 0b1 if tlp.fmt_type in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64,
                                   TlpType.MEM_READ, TlpType.MEM_READ_64) else 0


def check_round_trip(tb, tlps):
    """Assert the internal stream and the TX output match ``tlps`` exactly, in order."""
    assert not tb.monitor.errors, tb.monitor.errors[:5]
    assert len(tb.monitor.packets) == len(tlps), (len(tb.monitor.packets), len(tlps))
    for n, (tlp, got) in enumerate(zip(tlps, tb.monitor.packets)):
        diffs = compare_packet(got, tlp_to_beats(tlp, bar_of(tlp)))
        assert not diffs, f"internal stream, TLP {n} {tlp!r}: {diffs[:4]}"
    for n, (tlp, out) in enumerate(zip(tlps, tb.sent)):
        assert same_tlp(out, tlp), f"TX, TLP {n}: sent {out!r}, expected {tlp!r}"


@cocotb.test()
async def round_trip(dut):
    """Every header kind, lengths, both alignments, all byte enables, through RX and TX."""
    tb = TB(dut, pauses=PARAMS.get("pauses", "none"))
    await tb.start()
    # A handshake probe on the internal stream and on the TX side, checked against the stream
    # monitor and the TLPs the hard-IP model received.
    probe = HandshakeProbe(dut.clk)
    probe.add("rx.sop", dut.rx_st_sop, dut.rx_st_valid)
    probe.add("mon", dut.mon_valid, dut.mon_ready)
    probe.add("tx.sop", dut.tx_st_sop, dut.tx_st_valid)
    probe.start()
    t0 = probe.now()
    tlps = sweep(tb.rng, PARAMS.get("lengths", [1, 2, 3, 4, 5, 64, 1024]))
    for tlp in tlps:
        tb.model.inject(tlp, bardec=bar_of(tlp))
    await tb.drain(len(tlps))
    probe.stop()
    check_round_trip(tb, tlps)
    dut._log.info("handshakes from the first injection:\n%s", probe.report(origin=t0))
    s = probe.summary(origin=t0)
    assert s["mon"]["count"] == sum(len(p) for p in tb.monitor.packets), s["mon"]["count"]
    assert s["rx.sop"]["count"] == s["tx.sop"]["count"] == len(tlps), \
        (s["rx.sop"]["count"], s["tx.sop"]["count"])
    assert s["rx.sop"]["first"] <= s["mon"]["first"] <= s["tx.sop"]["first"], s
    assert tb.counters() == dict.fromkeys(tb.counters(), 0), tb.counters()
    tb.model.check()
    dut._log.info("%d TLPs round trip exact", len(tlps))


def corrupt(rng, tlp, how):
    """Return the Avalon beats of ``tlp`` damaged in one of the ways the RX adapter must catch."""
    return damage(rng, tlp_to_avalon_beats(tlp, 0b1), how)


BAD_KINDS = {
    # how: (counter the RX adapter must move, TLPs it spoils)
    "err_sop":  "rx_err_count",
    "err_late": "rx_err_count",
    "short":    "rx_malformed_count",
    "long":     "rx_malformed_count",
    "empty":    "rx_malformed_count",
    "stray":    "rx_malformed_count",
    "no_eop":   "rx_malformed_count",
}


@cocotb.test()
async def bad_input_dropped_and_counted(dut):
    """rx_st_err and malformed framing: dropped, counted once, good TLPs around them intact."""
    tb = TB(dut, pauses=PARAMS.get("pauses", "none"))
    await tb.start()
    good = []
    expected = dict.fromkeys(tb.counters(), 0)
    for round_ in range(6):
        for how, counter in BAD_KINDS.items():
            length = tb.rng.choice([3, 8, 17, 64])
            victim = make_tlp(tb.rng, tb.rng.choice(["mwr32", "mwr64"]), length,
                              tb.rng.randrange(2))
            tb.model.inject_beats(corrupt(tb.rng, victim, how))
            expected[counter] += 1
            if how == "no_eop":
                # The next start of packet ends the broken one; that TLP itself is good.
                pass
            tlp = make_tlp(tb.rng, "mwr64", tb.rng.choice([1, 4, 16]), tb.rng.randrange(2))
            tb.model.inject(tlp, bardec=0b1)
            good.append(tlp)
    await tb.drain(len(good))
    counts = tb.counters()
    dut._log.info("counters %s", counts)
    assert counts["rx_err_count"] == expected["rx_err_count"], counts
    assert counts["rx_malformed_count"] == expected["rx_malformed_count"], counts
    assert counts["tx_malformed_count"] == 0 and counts["tx_underrun_count"] == 0, counts
    for n, (tlp, out) in enumerate(zip(good, tb.sent)):
        assert same_tlp(out, tlp), f"good TLP {n}: sent {out!r}, expected {tlp!r}"
    # Everything the RX adapter let through with `err` was dropped by TX, none sent.
    errs = sum(1 for pkt in tb.monitor.packets if pkt[-1].err)
    assert counts["tx_dropped_count"] == errs, (counts, errs)
    assert tb.model.nullified == 0
    tb.model.check()


@cocotb.test()
async def cut_through(dut):
    """TX with ``start_level``: exact when the source has no gaps inside packets; else underruns.

    With gaps only between packets the TX adapter must never underrun and the output must be
    exact.  With gaps inside packets (``gaps_inside``) it underruns: the adapter counts the
    cycles, and the hard-IP model must see the ``tx_st_valid`` gaps (recorded, not raised).
    """
    gaps_inside = PARAMS.get("gaps_inside", False)
    tb = TB(dut, pauses="fixed", strict=not gaps_inside, idle_inside=gaps_inside)
    tb.model.set_backpressure_generator(None)
    await tb.start()
    tlps = [make_tlp(tb.rng, "mwr64", tb.rng.choice([16, 32, 64]), tb.rng.randrange(2))
            for _ in range(40)]
    for tlp in tlps:
        tb.model.inject(tlp, bardec=0b1)
    await tb.drain(len(tlps))
    counts = tb.counters()
    rules = {v.rule for v in tb.model.violations}
    dut._log.info("counters %s, model violations %s", counts, rules)
    if gaps_inside:
        assert counts["tx_underrun_count"] > 0, counts
        assert rules == {"tx-valid-gap"}, rules
    else:
        assert counts["tx_underrun_count"] == 0, counts
        check_round_trip(tb, tlps)
        tb.model.check()
