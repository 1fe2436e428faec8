"""One DMA benchmark point as a timeline (``tb/dma/dma_timeline.py`` runs it).

Sets the two chips up as ``dma_perf_tb.figures`` does (host reads answered after 500 ns, no
idles or backpressure), measures ``PARAMS["point"]`` with the benchmark's own
:class:`dma_perf_tb.Measure`, and writes to ``PARAMS["result_file"]`` the point's result, the
kick's time and every TLP the meters saw on chip 0 (``N tx``: read requests and writes; ``N rx``:
completions with data; the data's port when it is E), each ``[start, end, payload, wire]`` in ns
from the kick, and the bytes of each read request on N in order.  With ``PARAMS["probe"]`` (Icarus, the chips compiled into the top) it also
timestamps every beat of chip 0's DMA streams (``o_rd``, ``i_cpl``, ``o_wr``) and of N's
Avalon-ST hand-overs with the hard IP (``rx_st``, ``tx_st``).
"""

import json

import cocotb
from cocotb.utils import get_sim_time
from dma_perf_tb import Measure, measure_point

from peach2.sim.harness.dma import DmaHarness
from peach2.sim.run import run_inputs
from peach2.sim.run.probe import HandshakeProbe

PARAMS, SEED = run_inputs()


def _probe(dut):
    probe = HandshakeProbe(dut.clk)
    dma = dut.c0.dma
    for name in ("o_rd", "i_cpl", "o_wr"):
        probe.add_stream(f"dma {name}", dma, name)
    probe.add("N rx_st", dut.c0_n_rx_st_valid, dut.c0_n_rx_st_ready)
    probe.add("N tx_st", dut.c0_n_tx_st_valid, dut.c0_n_tx_st_ready)
    return probe


@cocotb.test()
async def timeline(dut):
    """Measure ``PARAMS["point"]`` and write its timeline."""
    harness = DmaHarness(dut, 2, host_size=1 << 22, src_size=1 << 22)
    await harness.start(pauses=False)
    for node in range(2):
        harness.host(node).configure_reads(latency_ns=PARAMS.get("read_latency_ns", 500))
    measure = Measure(harness)
    drv = harness.drivers[0]
    kicks = []
    for name in ("dma_start", "dma_reg_start"):         # the kick: the timed call's start
        call = getattr(drv, name)

        async def timed(*args, _call=call, **kwargs):
            kicks.append(get_sim_time("ns"))
            return await _call(*args, **kwargs)
        setattr(drv, name, timed)
    probe = _probe(dut) if PARAMS.get("probe") else None
    if probe:
        probe.start()
    result = await measure_point(harness, measure, PARAMS["point"])
    if probe:
        probe.stop()
    t0 = kicks[-1]

    def rel(meter):
        return [[a * 1e9 - t0, b * 1e9 - t0, payload, wire]
                for a, b, payload, wire in sorted(meter.records)]
    tlps = {"N tx": rel(measure.meters["N"]), "N rx": rel(measure.rx)}
    if result["port"] == "E":
        tlps["E tx"] = rel(measure.meters["E"])
    beats = {k: [t - t0 for t in v] for k, v in probe.times.items()} if probe else {}
    with open(PARAMS["result_file"], "w") as f:
        json.dump({"point": PARAMS["point"], "result": result, "kick_ns": t0, "tlps": tlps,
                   "read_bytes": list(measure.reads), "beats": beats}, f)
