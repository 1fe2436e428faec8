"""The machine speed benchmark's figures: goals as ratios, the equality check, the section."""

from peach2.sim.bench.machine import doc, speed


def _run(cycles, chips, ranks, digests="d"):
    return {"chips": chips, "ranks": ranks, "cycles_per_s": cycles,
            "chip_cycles_per_s": cycles * chips, "idle_cycles_per_s": 2 * cycles,
            "idle_chip_cycles_per_s": 2 * cycles * chips, "edge_fraction": 0.25,
            "load_before": 0.1, "load_after": 0.2, "start_ps": 1, "end_ps": 2, "windows": 3,
            "bytes_checked": 4, "digests": digests}


def test_projection_adds_one_exchange_to_the_sub_clusters_window():
    sub = _run(1000.0, 16, 1)
    # 28 cycles take 28 ms at 1000 cycles/s; one exchange of 2 ms more: 28 / 0.030 s
    assert round(speed.projection(sub, 0.002)) == 933


def test_equal_runs_and_differences_are_named():
    runs = {"two/1": _run(100.0, 32, 1), "two/2": _run(170.0, 32, 2, digests="other")}
    assert speed.differences(runs, "two/1", "two/2") == ["digests"]
    assert speed.differences(runs, "four/2", "four/4") is None


def test_section_renders_every_run_and_says_whether_each_goal_is_met(tmp_path):
    runs = {"sub": _run(1000.0, 16, 1), "two/1": _run(100.0, 32, 1),
            "two/2": _run(170.0, 32, 2), "four/4": _run(200.0, 64, 4)}
    saved = {"traffic": speed.TRAFFIC, "idle_windows": 10, "window_ps": 112_000, "cores": 2,
             "runs": runs, "equal": {"2 x 2x8": [], "4 x 2x8": None},
             "goals": [{"what": w, "ratio": runs[a][speed.MEASURES[k][0]] /
                        runs[b][speed.MEASURES[k][1]], "goal": g, "met": None}
                       for w, a, b, k, g in speed.GOALS if a in runs],
             "bare_exchange_us": 50.0, "projected_cycles_per_s_one_rank_per_core": 998}
    for g in saved["goals"]:
        g["met"] = g["ratio"] >= g["goal"]
    title, body = doc.section(saved, tmp_path, draw=True)
    assert (tmp_path / doc.PLOT).stat().st_size > 0
    assert "64 nodes" in title
    for name in runs:
        assert f"| {name} |" in body
    assert "2 ranks over 1 process, cycles/s: 1.70 (goal 1.7: met)" in body
    assert "4 ranks over one 16-chip sub-cluster, chip-cycles/s: 0.80 (goal 0.85: not met)" in body
    assert "under traffic over one 16-chip sub-cluster idle, chip-cycles/s: 0.40" in body
    assert "the same bytes and times" in body
