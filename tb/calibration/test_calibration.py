"""The calibration section's pieces on a small case (``peach2 bench calibration`` runs them in
full): the PEACH2 ping-pongs on the HDL sub-cluster, the crossover, the table and the section.

The simulation is the benchmark's (``line:2``, default cable credits, calibrated pipeline, so
the same Verilator build): PIO and DMA 8-byte ping-pongs and the GPU-to-GPU ping-pong at 8 B,
4 KiB and 16 KiB for both GPU read rates (the benchmark goes on to 1 MiB), every byte received
checked by ``pingpong_tb``.
"""

import pytest
from bench_calibration import simulate

from peach2.sim.bench import calibration_doc as doc
from peach2.sim.run import pick_simulator

SMALL = [8, 4096, 16384]


def test_crossover():
    tca = {8: 5.0, 16: 9.0, 32: 10.0, 64: 20.0}
    assert doc.crossover(tca, {8: 1.0, 16: 2.0, 32: 30.0, 64: 10.0}) == (16, 32)
    assert doc.crossover(tca, {8: 1.0, 16: 2.0, 32: 3.0, 64: 4.0}) == (64, None)
    assert doc.crossover(tca, {8: 9.0, 16: 2.0}) == (None, 8)


def test_pingpong_small_and_the_section(tmp_path):
    if pick_simulator("verilator") == "icarus":
        pytest.skip("two or more chips are too slow on Icarus; the ping-pongs run on Verilator")
    tca = simulate("calibration-small", [(n, rate, SMALL) for n, rate in doc.GPU_READS],
                   path_sizes=[8, 512], path_rounds=1)
    assert tca["complete"]
    # half a round trip: the round trips were measured, the one-way time is their half
    for key in ("pio", "dma_host", "dma_gpu"):
        assert tca[key]["one_way_ns"] == tca[key]["round_trips_ns"][0] / 2
    # PIO is faster than a DMA, which reads its descriptor and its data first
    assert tca["pio"]["one_way_ns"] < tca["dma_host"]["one_way_ns"] < tca["dma_gpu"]["one_way_ns"]
    fast, slow = (tca["curves"][name] for name, _ in doc.GPU_READS)
    assert [r["size"] for r in fast] == SMALL
    for rows in (fast, slow):
        rates = [r["mb_s"] for r in rows]
        assert rates == sorted(rates), rates
    # the GPU read path is the source's ceiling: 002's rate is never passed, the faster one
    # pulls ahead once a transfer is long enough for it to matter
    assert all(r["mb_s"] < doc.GPU_READS[1][1] / 1e6 for r in slow)
    assert fast[-1]["mb_s"] > 1.5 * slow[-1]["mb_s"]
    # an inline put (docs/put.md) skips both host reads: under the DMA's time, within the goal
    assert tca["put"]["kick_to_flag_ns"] <= doc.PUT_GOAL_NS
    assert tca["put"]["one_way_ns"] < tca["dma_host"]["one_way_ns"] / 2
    assert tca["put_stream"]["per_us"] >= doc.PUT_RATE_GOAL
    # a DMA queue's appends (docs/dma.md, "Queue mode"): every descriptor ran (the stream
    # checks every byte); at most four slots in flight, each wait for one a CH_STATUS read, so
    # under the four slots a read allows, and under the puts (no host read at all)
    for row in tca["queue_stream"]:
        assert row["count"] == 64 and 0 < row["first_ns"] < row["last_ns"], row
        assert row["per_us"] < min(tca["put_stream"]["per_us"],
                                   4 * 1000 / row["status_read_ns"]), row
    # the paths by size (002 section 4.2): one store beats a put, which beats register mode
    # (no host read at all), which saves the chain's descriptor fetch; "auto" picks the fastest
    best = doc.best_paths(tca["paths"])
    assert set(best[8][2]) == {"pio", "inline", "register", "dma"}
    assert set(best[512][2]) == {"inline", "register", "dma"}
    t8, t512 = best[8][2], best[512][2]
    assert t8["pio"] < t8["inline"] < t8["register"] < t8["dma"], t8
    assert t512["inline"] < t512["register"] < t512["dma"], t512
    assert [doc.auto_path(n) for n in (8, 512)] == [best[8][0], best[512][0]] == ["pio", "inline"]
    data = {"tca": tca, "mpi": doc.mpi_side(SMALL), "sizes": SMALL}
    rows = doc.table_rows(data)
    assert len(rows) == 5
    for r in rows:      # every row of the table within the 15% asked
        assert abs(r["error"]) <= doc.TOLERANCE, r
    title, body = doc.section(data, tmp_path)
    assert (tmp_path / doc.PLOT).stat().st_size > 10_000
    assert title.startswith("Calibration")
    assert "| PEACH2 DMA, GPU memory to remote GPU memory, 8 B |" in body
    assert "| 16 KiB |" in body and "TCA ahead of MV2GDR up to 512 KB" in body
    assert "### Inline puts" in body and "goal <= 900 ns: met" in body
    assert "### Paths by size" in body and "| 512 B | - |" in body
