"""cocotb test of the scoreboard soak (``peach2.sim.harness.soak``, docs/errors.md).

A ring of 4 in the HDL top (``ClusterTop``, as ``cluster_tb``): every host stores into every
node, every DMA channel of every chip runs random chains and register-mode jobs to random
nodes, seeded pauses on every host interface; the scoreboard checks every memory write as it
arrives and every window byte at the end; no counter of a dropped TLP may move.

Parameters (``PEACH2_PARAMS``): ``topology``, ``routes``, ``pipeline_ns`` (as ``cluster_tb``),
``tlps`` (checked writes to run for), ``idle``/``backpressure`` (host pauses), ``max_pio``,
``max_dma``, ``pio_window`` (bytes), ``dma_timeout`` (cycles), ``host_size`` (bytes of each
window), ``result_file`` (JSON figures), ``coverage`` (a file for the functional coverage of
the writes the hosts received, ``peach2.sim.harness.coverage``), ``profile`` (a file for a
cProfile of the run, read with ``pstats``).
"""

import cProfile
import json
import random
import time

import cocotb

from peach2.routes import Topology, default_address_map
from peach2.sim.harness import Cluster, Soak
from peach2.sim.harness.coverage import Coverage
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()


@cocotb.test()
async def soak(dut):
    """Everything busy at once with random traffic; zero lost, duplicated, corrupted or
    reordered bytes; zero drops."""
    text = PARAMS.get("topology", "ring:4")
    topology = Topology(1, {}) if text == "single" else Topology.parse(text)
    amap = default_address_map(topology.n_nodes, host_size=PARAMS.get("host_size", 1 << 20))
    cluster = Cluster(dut, topology, amap, seed=SEED, hdl_cables=True,
                      routes=PARAMS.get("routes", "safe"),
                      hardip_pipeline_ns=PARAMS.get("pipeline_ns", 0.0), record_arrivals=False)
    await cluster.reset_and_start()
    cluster.set_pauses(random.Random(SEED + 1), idle=PARAMS.get("idle", 0.1),
                       backpressure=PARAMS.get("backpressure", 0.1))
    if PARAMS.get("coverage"):      # the hosts' backpressure logged for the coverage
        rng, share = random.Random(SEED + 3), PARAMS.get("backpressure", 0.1)
        for chip in cluster.chips:
            chip.set_backpressure("n", iter(lambda: int(rng.random() < share), 2)
                                  if share else None)
    soak = Soak(cluster, random.Random(SEED + 2), max_pio=PARAMS.get("max_pio", 512),
                max_dma=PARAMS.get("max_dma", 8192), dma_timeout=PARAMS.get("dma_timeout"),
                pio_window=PARAMS.get("pio_window", 2048),
                log=dut._log.info)
    dut._log.info("seed %d, %s: %d ordering domains of %d bytes, %d writes to check", SEED,
                  topology.label, len(soak.scoreboard.domains), soak.slot, PARAMS["tlps"])
    profile = None
    if PARAMS.get("profile"):       # the Python side's CPU time, main thread only
        profile = cProfile.Profile(time.thread_time)
        profile.enable()
    try:
        r = await soak.run(PARAMS["tlps"])
    finally:
        if profile:
            profile.disable()
            profile.dump_stats(PARAMS["profile"])
    dut._log.info("%d writes and %d bytes checked in order (%d stores, %d PIO bytes; %d DMA "
                  "jobs, %d descriptors, %d DMA bytes), %d TLPs carried by the chips' ports, "
                  "%d window bytes compared; %.0f us simulated in %.1f s wall: %.0f writes/s",
                  r["tlps"], r["bytes"], r["stores"], r["pio_bytes"], r["dma_jobs"],
                  r["descriptors"], r["dma_bytes"], r["carried_tlps"], r["window_bytes"],
                  r["sim_ns"] / 1000, r["wall_s"], r["tlps"] / r["wall_s"])
    dut._log.info("faults: %s", r["faults"])
    if PARAMS.get("coverage"):
        cov = Coverage()
        soak.sample_coverage(cov)
        cov.save(PARAMS["coverage"])
        dut._log.info("coverage: %d writes sampled in %d bins", sum(cov.hits.values()),
                      len(cov.hits))
    if PARAMS.get("result_file"):
        with open(PARAMS["result_file"], "w") as f:
            json.dump({**r, "drops": {str(k): v for k, v in r["drops"].items()},
                       "seed": SEED, "topology": topology.label}, f, indent=1)
    assert not any(r["faults"].values()), "\n".join([str(r["faults"])] + r["reports"])
    assert not r["drops"], f"TLPs dropped: {r['drops']}"
    assert r["tlps"] >= PARAMS["tlps"]
    # Every write a host received was checked (one byte run each), and left its chip by N.
    assert sum(r["received"]) == r["tlps"], (r["received"], r["tlps"])
    assert all(tx >= got for tx, got in zip(r["n_tx_tlps"], r["received"])), \
        (r["n_tx_tlps"], r["received"])
    cluster.check()
