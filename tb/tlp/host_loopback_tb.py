"""The simulation platform end to end: a RootComplex host, the hard-IP model, the adapters.

::

    Host (cocotbext-pcie RootComplex, host memory)
      |  Gen2 x8 link (SimPort, wire timing)
    HardIP model (config space, BARs) <-> Loopback top: AvalonST128RX -> AvalonST128TX
      ^ inject(): TLPs "from the link" straight into the model's RX side

- ``enumerate_and_bar_access``: the host enumerates the device; a host write into BAR 0 arrives
  on the internal stream with ``bar`` = BAR 0 and leaves TX unchanged; a host read of BAR 0 is
  answered by a completion that the testbench injects, which crosses RX, TX and the link back
  to the host.
- ``write_stream``: 256-byte writes addressed to host memory are injected at the model's RX
  side, looped out through TX and the timed link into host memory, checked byte for byte, and
  the link throughput is reported beside the wire bound for the same TLPs.
- ``cut_through_timing``: writes of 4 to 256 bytes, alone and back to back, reach the host's
  port ``tx_pipeline_ns`` + wire time + link delay after their SOP beat on ``tx_st`` (the
  model's transmitter is cut-through), and a TLP behind another after that one's wire time.
- ``cut_through_nullified``: on a top whose TX adapter starts a packet before its last beat
  (``tx_start_level``), writes that reach it with ``err`` on their last beat leave ``tx_st``
  nullified: the model counts them and sends none of their bytes; the good writes around them,
  one right behind a nullified one, reach host memory exact and on the cut-through timing.
"""

import json
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_steps, get_sim_time
from cocotbext.pcie.core.tlp import Tlp, TlpType

from peach2.sim.hardip import HardIPModel, damage, tlp_to_avalon_beats
from peach2.sim.pcie import Host, ThroughputMeter, ThroughputReport, writes_only
from peach2.sim.reference import StreamMonitor
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
MON_FIELDS = ("valid", "ready", "hdr", "data", "dw_en", "first", "last", "err", "bar")


async def setup(dut, *, mps=256, dirty=True, tx_pipeline_ns=0.0):
    model = HardIPModel(dut, bars=[(1 << 20, False, False)], max_payload_size=mps, dirty=dirty,
                        seed=SEED, tx_pipeline_ns=tx_pipeline_ns)
    host = Host(model, max_payload_size=mps, read_completion_boundary=64)
    Clock(dut.clk, 4, unit="ns", impl="gpi").start()
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    return model, host


@cocotb.test()
async def enumerate_and_bar_access(dut):
    """Enumeration, then a BAR 0 write and a BAR 0 read through both adapters."""
    rng = random.Random(SEED)
    model, host = await setup(dut)
    monitor = StreamMonitor(dut.clk, {f: getattr(dut, f"mon_{f}") for f in MON_FIELDS})
    cocotb.start_soon(monitor.run())

    bars = await host.enumerate()
    bar0 = host.dev.bar_addr[0]
    dut._log.info("enumerated: %s, BAR0 at %#x, MPS %d", model.pcie_id, bar0, model.mps)
    assert bar0 and model.mps == 256

    # Looped-back requests must not reach the link (the host would route them to the BAR
    # again): the testbench takes them; completions go on to the host.
    captured = []

    def take_requests(tlp):
        if tlp.is_completion():
            return True
        captured.append(tlp)
        return False

    model.on_tx = take_requests

    data = rng.randbytes(13)
    await bars[0].write(0x104, data)
    for _ in range(200):
        if captured:
            break
        await ClockCycles(dut.clk, 10)
    assert len(captured) == 1, captured
    mwr = captured.pop()
    assert mwr.fmt_type == TlpType.MEM_WRITE and mwr.address == bar0 + 0x104
    # 13 bytes from offset 0x104: four DWs, the last with only byte 0 enabled.
    assert (mwr.length, mwr.first_be, mwr.last_be) == (4, 0xF, 0x1), mwr
    assert bytes(mwr.get_data())[:len(data)] == data
    assert monitor.packets[-1][0].bar == 0b1, "BAR 0 hit not carried on the internal stream"

    reply = rng.randbytes(32)

    async def answer():
        while not captured:
            await ClockCycles(dut.clk, 10)
        mrd = captured.pop()
        assert mrd.fmt_type == TlpType.MEM_READ and mrd.address == bar0 + 0x200
        cpl = Tlp.create_completion_for_tlp(mrd, model.pcie_id, has_data=True)
        cpl.byte_count = 32
        cpl.lower_address = mrd.address & 0x7F
        cpl.set_data(reply)
        model.inject(cpl)           # RX -> loopback -> TX -> link -> host

    cocotb.start_soon(answer())
    got = await bars[0].read(0x200, 32, timeout=20, timeout_unit="us")
    assert bytes(got) == reply
    assert monitor.packets[-1][0].bar == 0, "a completion carries no BAR hit"
    model.check()
    host.check()


@cocotb.test()
async def write_stream(dut):
    """256-byte writes into host memory through RX, TX and the timed link; throughput."""
    rng = random.Random(SEED)
    count = PARAMS.get("count", 1000)
    payload = PARAMS.get("payload", 256)
    above_4g = PARAMS.get("above_4g", True)
    model, host = await setup(dut, mps=max(256, payload), dirty=False)
    await host.enumerate()
    addr, region = host.alloc(count * payload, above_4g=above_4g)
    expected = rng.randbytes(count * payload)

    meter = ThroughputMeter.tx_of(model, name=f"MWr {payload} B, "
                                  f"{'4' if above_4g else '3'}-DW header", select=writes_only)
    for k in range(count):
        tlp = Tlp()
        tlp.fmt_type = TlpType.MEM_WRITE_64 if above_4g else TlpType.MEM_WRITE
        tlp.requester_id = model.pcie_id
        tlp.set_addr_be_data(addr + k * payload, expected[k * payload:(k + 1) * payload])
        model.inject(tlp)
    await model.rx_idle()
    await model.tx_idle()
    for _ in range(1000):
        if bytes(region[0:count * payload]) == expected:
            break
        await Timer(1, "us")
    assert bytes(region[0:count * payload]) == expected, "host memory differs from what was sent"

    report = meter.report()
    dut._log.info("\n%s\n%s", ThroughputReport.header(), report)
    result = {"name": report.name, "tlps": report.tlps, "bytes": report.bytes,
              "seconds": report.seconds, "gbps": report.gbps, "bound_gbps": report.bound_gbps,
              "fraction": report.fraction}
    out = PARAMS.get("result_file")
    if out:
        with open(out, "w") as f:
            json.dump(result, f)
    assert report.tlps == count
    assert report.fraction <= 1.0 + 1e-9, f"above the wire bound: {report}"
    assert report.fraction >= PARAMS.get("min_fraction", 0.99), f"below goal: {report}"
    model.check()
    host.check()


class WireTiming:
    """What the cut-through tests compare: every packet's SOP and EOP beat on ``tx_st`` (the
    step the model takes each, and whether it was nullified) and every TLP's arrival at the
    host's port (step, wire size)."""

    def __init__(self, dut, model, pipeline):
        self.dut, self.port = dut, model.upstream_port
        self.pipe = get_sim_steps(pipeline, "ns", round_mode="round")
        self.link = self.port.link_delay_steps
        self.beat = 16 * self.port.symbol_period * self.port.time_scale
        self.packets, self.arrivals = [], []
        receive = self.port.other.ext_recv

        async def arrive(pkt):
            if isinstance(pkt, Tlp):
                self.arrivals.append((get_sim_time("step"), pkt.get_wire_size()))
            await receive(pkt)
        self.port.other.ext_recv = arrive
        cocotb.start_soon(self._watch(get_sim_steps(4, "ns")))

    async def _watch(self, clock_steps):
        dut, start = self.dut, None
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()         # the beat the model takes at the next edge
            if int(dut.tx_st_valid.value):
                edge = get_sim_time("step") + clock_steps
                if int(dut.tx_st_sop.value):
                    start = edge
                if int(dut.tx_st_eop.value):
                    self.packets.append((start, edge, bool(int(dut.tx_st_err.value))))

    def wire(self, size):
        return max(int(size * self.port.symbol_period * self.port.time_scale), 1)

    def arrival(self, sop, eop, size, wire_free=0):
        """Step a TLP of wire ``size`` reaches the host: on the wire from SOP + pipeline (or when
        the wire fell free), its end not before the EOP beat's 16 bytes can follow."""
        return max(wire_free + self.wire(size), sop + self.pipe + self.wire(size),
                   eop + self.pipe + self.beat) + self.link


def host_write(model, rng, addr, size):
    tlp = Tlp()
    tlp.fmt_type = TlpType.MEM_WRITE_64
    tlp.requester_id = model.pcie_id
    tlp.set_addr_be_data(addr, rng.randbytes(size))
    return tlp


async def timed_setup(dut, pipeline):
    """The cut-through tests' start: the model with ``tx_pipeline_ns`` = ``pipeline``,
    enumerated, 64 KiB of host memory above 4 GiB and the :class:`WireTiming` watching."""
    model, host = await setup(dut, dirty=False, tx_pipeline_ns=pipeline)
    await host.enumerate()
    addr, region = host.alloc(1 << 16, above_4g=True)
    return model, host, random.Random(SEED), addr, region, WireTiming(dut, model, pipeline)


@cocotb.test()
async def cut_through_timing(dut):
    """Each write reaches the host's port ``tx_pipeline_ns`` + its wire time + the link delay
    after its SOP beat was accepted on ``tx_st`` (not after its EOP beat), unless the wire is
    busy with the write before it: then right after that one's wire time."""
    model, host, rng, addr, _, timing = await timed_setup(
        dut, PARAMS.get("tx_pipeline_ns", 0.0))
    lone = (4, 64, 128, 256)
    for k, size in enumerate(lone):          # one at a time, far apart
        model.inject(host_write(model, rng, addr + k * 256, size))
        await Timer(2, "us")
    model.inject(host_write(model, rng, addr + 4096, 256))          # two back to back
    model.inject(host_write(model, rng, addr + 4096 + 256, 256))
    await Timer(2, "us")
    await model.tx_idle()
    beats, arrivals = timing.packets, timing.arrivals
    assert len(beats) == len(arrivals) == len(lone) + 2, (beats, arrivals)
    for (sop, eop, _), (at, size) in zip(beats, arrivals):
        dut._log.info("SOP %d ps, EOP %d ps, at the host %d ps (wire %d B)", sop, eop, at, size)
    for (sop, eop, _), (at, size) in zip(beats[:len(lone)], arrivals):
        assert at == timing.arrival(sop, eop, size), (sop, eop, at, size)
        if size == 256:              # 17 beats: store-and-forward would be 64 ns later
            assert at + (eop - sop) == eop + timing.pipe + timing.wire(size) + timing.link
    (_, _, _), (sop2, eop2, _) = beats[len(lone):]
    (at1, _), (at2, size2) = arrivals[len(lone):]
    assert at2 == timing.arrival(sop2, eop2, size2, at1 - timing.link), (at1, sop2, at2)
    model.check()
    host.check()


@cocotb.test()
async def cut_through_nullified(dut):
    """Writes the TX adapter has started when their ``err`` beat comes are nullified on
    ``tx_st``: the model counts them and nothing of them reaches the host; the good writes
    around them, one right behind a nullified one, land exact and on the cut-through timing
    (a nullified TLP takes no wire time in the model: see its docstring)."""
    model, host, rng, addr, region, timing = await timed_setup(
        dut, PARAMS.get("tx_pipeline_ns", 156.0))
    good, victims = [], []
    for k in range(4):
        victim = host_write(model, rng, addr + 0x8000 + k * 256, 256)
        victims.append(victim)
        model.inject_beats(damage(rng, tlp_to_avalon_beats(victim, 0), "err_late"))
        if k % 2:                        # right behind the nullified one, or 2 us later
            await Timer(2, "us")
        tlp = host_write(model, rng, addr + k * 256, rng.choice([4, 64, 256]))
        good.append(tlp)
        model.inject(tlp)
        await Timer(2, "us")
    await model.tx_idle()
    assert model.nullified == len(victims), model.nullified
    dut._log.info("on tx_st (SOP, EOP, nullified): %s", timing.packets)
    behind = [b[0] - a[1] for a, b in zip(timing.packets, timing.packets[1:]) if a[2]]
    assert min(behind) <= 4 * get_sim_steps(4, "ns"), behind   # some good one right behind
    sent = [(sop, eop) for sop, eop, err in timing.packets if not err]
    assert len(timing.packets) == len(good) + len(victims), timing.packets
    assert len(sent) == len(timing.arrivals) == len(good), (timing.packets, timing.arrivals)
    for tlp in good:
        off = tlp.address - addr
        assert bytes(region[off:off + len(tlp.get_data())]) == bytes(tlp.get_data()), hex(off)
    assert bytes(region[0x8000:0x8000 + 4 * 256]) == bytes(4 * 256), "a nullified write landed"
    for (sop, eop), (at, size) in zip(sent, timing.arrivals):
        dut._log.info("SOP %d ps, EOP %d ps, at the host %d ps (wire %d B)", sop, eop, at, size)
        assert at == timing.arrival(sop, eop, size), (sop, eop, at, size)
    model.check()
    host.check()
