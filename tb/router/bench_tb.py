"""Router benchmarks on one chip: latency through the chip, throughput with all ports busy.

- ``latency``: cycles at 250 MHz from a TLP's start of packet on one port's ``rx_st`` to its
  start of packet on another port's ``tx_st``, on an idle chip, for several TLP kinds.
- ``all_ports_busy``: flows N->E, E->W, W->S, S->N of 256-byte writes at once; each port's TX link
  is metered (wire timing of the link model) and reported beside the wire bound.

Results go to ``PARAMS["result_file"]`` as JSON when given (``tb/bench/benchmarks.py`` collects them).
"""

import json

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, Timer

from peach2.sim.harness import TCA_BAR, mwr, setup
from peach2.sim.pcie import ThroughputMeter, ThroughputReport, writes_only
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
NODE = 1 << 32                  # region size per destination in these benchmarks
MASK = ~(NODE - 1) & (2**64 - 1)
REGION = {"N": 0x10, "E": 0x11, "W": 0x12, "S": 0x13}    # region number -> output port


async def start(dut, **chip_options):
    chip, drv, _ = await setup(dut, pauses=False, **chip_options)
    for i, (port, region) in enumerate(REGION.items()):
        await drv.set_route(i, MASK, region * NODE, region * NODE, port)
    return chip, drv


async def sop_cycle(dut, prefix, limit=2000):
    """Return the cycle count until ``<prefix>_st_valid & <prefix>_st_sop`` is seen."""
    valid, sop = getattr(dut, f"{prefix}_st_valid"), getattr(dut, f"{prefix}_st_sop")
    for cycle in range(limit):
        await RisingEdge(dut.clk)
        if valid.value == 1 and sop.value == 1:
            return cycle
    raise AssertionError(f"no start of packet on {prefix} within {limit} cycles")


@cocotb.test()
async def latency(dut):
    chip, drv = await start(dut, dirty=False)
    phys = 1 << 33
    await drv.set_offset(REGION["N"] * NODE - phys)
    await drv.enable(pio=True, route=True)
    cases = [("e", "W", 4), ("e", "W", 256), ("w", "S", 64), ("e", "N", 4), ("e", "N", 256),
             ("n", "E", 4)]
    results = []
    for src, dst, size in cases:
        await ClockCycles(dut.clk, 50)
        tlp = mwr(REGION[dst] * NODE + 0x1000, bytes(size))
        rx = cocotb.start_soon(sop_cycle(dut, f"{src}_rx"))
        tx = cocotb.start_soon(sop_cycle(dut, f"{dst.lower()}_tx"))
        chip.models[src].inject(tlp, bardec=1 << TCA_BAR if src == "n" else 0)
        t_rx, t_tx = await rx, await tx
        results.append({"from": src.upper(), "to": dst, "bytes": size, "cycles": t_tx - t_rx})
        dut._log.info("%s -> %s, %d-byte MWr: %d cycles RX sop -> TX sop", src.upper(), dst,
                      size, t_tx - t_rx)
    if PARAMS.get("result_file"):
        with open(PARAMS["result_file"], "w") as f:
            json.dump(results, f)
    chip.check()


@cocotb.test()
async def all_ports_busy(dut):
    count = PARAMS.get("count", 300)
    chip, drv = await start(dut, dirty=False, pass_to_link=lambda port, tlp: True)
    addr, region = chip.host.alloc(count * 256, above_4g=True)
    await drv.set_offset(REGION["N"] * NODE - addr)
    await drv.enable(pio=True, route=True)
    flows = {"n": "E", "e": "W", "w": "S", "s": "N"}
    meters = {p: ThroughputMeter.tx_of(chip.models[p], name=f"{src.upper()} -> {p.upper()}",
                                       select=writes_only)
              for src, p in ((s, d.lower()) for s, d in flows.items())}
    for k in range(count):
        for src, dst in flows.items():
            tlp = mwr(REGION[dst] * NODE + 256 * k, bytes([k & 0xFF]) * 256)
            chip.models[src].inject(tlp, bardec=1 << TCA_BAR if src == "n" else 0)
    for model in chip.models.values():
        await model.rx_idle()
        await model.tx_idle()
    await Timer(2, "us")
    assert bytes(region[0:count * 256]) == b"".join(bytes([k & 0xFF]) * 256
                                                     for k in range(count))
    results = []
    dut._log.info("\n%s", ThroughputReport.header())
    for port, meter in meters.items():
        r = meter.report()
        dut._log.info("%s", r)
        assert r.tlps == count, (port, r.tlps)
        results.append({"name": r.name, "tlps": r.tlps, "gbps": r.gbps,
                        "bound_gbps": r.bound_gbps, "fraction": r.fraction})
    if PARAMS.get("result_file"):
        with open(PARAMS["result_file"], "w") as f:
            json.dump(results, f)
    chip.check()
