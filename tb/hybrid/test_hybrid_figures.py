"""The hybrid benchmark section (``peach2.sim.hybrid.figures``) on made-up sweeps: 000's
statements checked point by point, the tables, and the plot (no simulation)."""

import json

import pytest

from peach2.sim.hybrid.figures import (
    PLOTS,
    compare,
    heat_lines,
    machine_entry,
    plot,
    plot_name,
    section,
)

KB = 1024


def rows(ratios, algorithm="MPIR_Bcast_binomial_MV2"):
    """Sweep rows with these MPI / hybrid ratios (hybrid 10 us each)."""
    return [{"size": n, "mpi_ns": 10_000 * r, "hybrid_ns": 10_000, "ratio": r,
             "mpi_algorithm": algorithm} for n, r in ratios]


def test_broadcast_8_nodes_against_000():
    like = rows([(8, 1.2), (2 * KB, 0.9), (8 * KB, 0.95), (512 * KB, 1.05), (1024 * KB, 0.8)])
    got = compare(like, "broadcast", 8)
    assert [h for _, _, h in got] == [True, True, True]
    assert "up to 20% faster (at 8 B)" in got[0][1]
    assert got[1][1] == "slower at 2 KiB, 8 KiB"
    assert got[2][1] == "slower from 1 MiB"
    unlike = rows([(8, 1.76), (2 * KB, 1.3), (8 * KB, 1.1), (512 * KB, 0.9)])
    got = compare(unlike, "broadcast", 8)
    assert got[0][2] is False                   # 76% is not 21%
    assert got[1][2] is False and got[1][1].startswith("faster at 2 KiB (1.30)")
    assert got[2][2] is False                   # slower from 512 KiB, before 000's 1 MiB


def test_crossover_not_reached_and_a_dip_is_not_a_crossover():
    got = compare(rows([(16, 1.4), (1 * KB, 0.9), (16 * KB, 1.2)]), "allgather", 8)
    assert got[2] == ("slower from 64 KiB (past TCA's crossover)",
                      "faster up to the largest size measured (16 KiB)", None)
    got = compare(rows([(16, 1.4), (32 * KB, 0.9), (64 * KB, 0.8)]), "allgather", 8)
    assert got[2][1] == "slower from 32 KiB" and got[2][2] is False
    assert compare(rows([(8, 1.1)]), "broadcast", 64) == []


def test_section_and_plot(tmp_path):
    raw = {"broadcast": {"preset": "MV2GDR-QPI-Tuned", "runs": [{"nodes": 8}]}}
    machine = machine_entry("2x4", 1, 2, {"broadcast": rows([(8, 1.2), (64, 1.1)]),
                                          "allgather": rows([(16, 1.4), (128, 1.3)], None)}, raw)
    assert machine["nodes"] == 8 and "split virtually" in machine["label"]
    assert plot_name(machine) in PLOTS
    title, body = section({"machines": [machine]}, tmp_path, draw=True, notes="Why: X.")
    assert "12-15" in title
    png = tmp_path / plot_name(machine)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| 8 B | 12.0 | 10.0 | 1.20 | Bcast_binomial |" in body
    assert "| 16 B | 14.0 | 10.0 | 1.40 | Allgather_RD |" in body
    assert "| up to 21% faster (Figure 12) | up to 20% faster (at 8 B) | yes |" in body
    assert body.rstrip().endswith("Why: X.")
    before = png.stat().st_mtime_ns
    section({"machines": [machine]}, tmp_path, draw=False)
    assert png.stat().st_mtime_ns == before
    plot(machine, tmp_path / "again.png")
    assert (tmp_path / "again.png").read_bytes() == png.read_bytes()   # no metadata, same bytes


def test_message_by_message_column_only_when_every_row_has_it(tmp_path):
    staged = rows([(16, 1.4), (128, 1.3)], None)
    for r in staged:
        r["mpi_p2p_ns"] = 30_000
    raw = {"allgather": {"preset": "MV2GDR-QPI-Tuned", "runs": [{"nodes": 8}]}}
    machine = machine_entry("2x2", 2, 1, {"allgather": staged}, raw)
    assert "joined only by InfiniBand" in machine["label"]
    _, body = section({"machines": [machine]}, tmp_path, draw=False)
    assert "| 16 B | 14.0 | 10.0 | 1.40 | Allgather_RD | 30.0 | 3.00 |" in body
    del staged[1]["mpi_p2p_ns"]
    _, body = section({"machines": [machine]}, tmp_path, draw=False)
    assert "message by message" not in body


def test_rows_of_a_launch_result():
    """A launch result's runs, paired by size: only sizes run over both networks make rows."""
    from peach2.sim.hybrid.sweep import rows_of

    def run(name, net, size, ns):
        return {"name": name, "network": net, "size": size, "time_ns": ns,
                "info": {"mpi_algorithm": "MPIR_Knomial_Bcast_inter_node_wrapper_MV2"}}
    result = {"runs": [run("broadcast", "mpi", 512, 30_000), run("broadcast", "mpi", 8, 20_000),
                       run("broadcast", "hybrid", 8, 10_000), run("allgather", "mpi", 16, 1),
                       run("broadcast", "hybrid", 64, 5_000)]}
    got = rows_of(result, "broadcast")
    assert [(r["size"], r["ratio"]) for r in got] == [(8, 2.0)]
    assert got[0]["mpi_algorithm"].startswith("MPIR_Knomial")
    assert rows_of(result, "allgather") == []


def test_heatmap_stamps_in_the_section(tmp_path):
    """A heatmap's saved result carries its run's stamp: the section lists it (so its commit
    counts for the stale mark) and names the pictures without one; a picture whose
    simulation's sources changed since its commit marks the section stale."""
    from peach2.sim.bench import staleness
    from peach2.sim.bench.doc import heat_stamps
    stamp = {"command": "python -m peach2.sim.hybrid.heatmap --collective halo --out x.png",
             "commit": "5fc6511", "date": "2026-11-29", "seconds": 67}
    (tmp_path / "heat_halo.json").write_text(json.dumps({"title": "t", "run": stamp}))
    (tmp_path / "heat_broadcast.json").write_text(json.dumps({"title": "t"}))
    heat = heat_stamps(tmp_path)
    assert heat == {"broadcast": None, "halo": stamp}      # allgather etc.: no saved result
    lines = heat_lines(heat)
    assert lines[0].startswith("Heatmap `halo` drawn by `python -m peach2.sim.hybrid.heatmap "
                               "--collective halo --out x.png` at 5fc6511 on 2026-11-29 (67 s)")
    assert lines[1].startswith("Heatmap `broadcast`: not stamped")
    _, body = section({"machines": []}, tmp_path, draw=False, heat=heat)
    assert lines[0] in body and lines[1] in body
    if staleness.changed_since("5fc6511", ["sim/hybrid/heatmap/run.py"]) is None:
        pytest.skip("5fc6511 is not in this clone")
    # 5fc6511 is the heatmaps' simulation's own commit; what ran it has changed since.
    assert staleness.note("hybrid", body).startswith("**Stale:**")
    (tmp_path / "heat_bad.json").write_text("[1]")
    (tmp_path / "heat_halo.json").write_text("{")
    with pytest.raises(ValueError, match="heat_halo.json: not a saved heatmap result"):
        heat_stamps(tmp_path)


def test_heatmap_command_refuses_bad_paths_before_work(tmp_path, capsys):
    """``python -m peach2.sim.hybrid.heatmap``: an unwritable output, a missing or foreign
    saved result and ``--json`` on a redraw are refused at once (exit 2, one line), before
    any simulation."""
    from peach2.sim.hybrid.heatmap.__main__ import main
    (tmp_path / "file").write_text("x")
    cases = [
        (["--collective", "halo", "--out", str(tmp_path / "file" / "x.png")], "--out: cannot"),
        (["--collective", "halo", "--out", "x.png", "--json", str(tmp_path / "file" / "j")],
         "--json: cannot"),
        (["--from-json", str(tmp_path / "none.json"), "--out", str(tmp_path / "x.png")],
         "--from-json: cannot read"),
        (["--from-json", str(tmp_path / "file"), "--out", str(tmp_path / "x.png")],
         "--from-json: cannot read"),
        (["--from-json", str(tmp_path / "file"), "--out", str(tmp_path / "x.png"), "--json",
          str(tmp_path / "j.json")], "--json goes with --collective"),
    ]
    (tmp_path / "list.json").write_text("[]")
    cases.append((["--from-json", str(tmp_path / "list.json"), "--out", str(tmp_path / "x.png")],
                  "is not a saved heatmap result"))
    for argv, said in cases:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2, argv
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert said in err, (argv, err)
    assert not (tmp_path / "x.png").exists()
