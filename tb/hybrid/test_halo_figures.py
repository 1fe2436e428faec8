"""The halo benchmark section (``peach2.sim.hybrid.figures.halo``) and halo_bench's saved
results: the section renders the saved rows beside 000's statements and draws its plots; the
results file is a dict with a run stamp, an old bare list is read or refused with a clear
message, and a run's rows replace only those of the figures and node counts it measured (no
simulation)."""

import json

import pytest

from peach2.sim.hybrid import halo_bench
from peach2.sim.hybrid.figures import halo as figures

SAVED = halo_bench.RESULTS_FILE


def _saved():
    return json.loads(SAVED.read_text())


def _run(command, commit="abc1234", date="2026-11-29"):
    return {"command": command, "commit": commit, "date": date, "seconds": 10, "cores": 2,
            "load": [0.5, 1.0], "shortened": [], "conditions": None}


def test_saved_results_have_a_run_and_every_figure():
    saved = _saved()
    assert set(saved) >= {"run", "rows"} and saved["run"]["command"].startswith(
        "python -m peach2.sim.hybrid.halo_bench")
    keys = {(r["figure"], r["nodes"]) for r in saved["rows"]}
    assert keys == {("9", 8), ("10", 8), ("9", 16), ("10", 16), ("6", 2)}


def test_section_renders_the_saved_rows_and_draws_its_plots(tmp_path):
    saved = _saved()
    title, body = figures.section(saved, tmp_path)
    assert "Figures 6, 9-10" in title
    for name in figures.PLOTS:
        assert (tmp_path / name).stat().st_size > 1000
        assert f"](img/{name})" in body
    small16 = {r["network"]: r for r in saved["rows"]
               if (r["size"] if "size" in r else None) == "small" and r["grid"] == [4, 4]}
    assert (f"| small | 16 | (4, 4, 1) | 50% | {small16['tca']['time_us']:.1f} | "
            f"{small16['mpi']['time_us']:.1f} | {small16['hybrid']['time_us']:.1f} |") in body
    plane = next(r for r in saved["rows"] if r["figure"] == "6" and r["n"] == 256
                 and r["plane"] == "ik" and r["network"] == "mpi")
    assert f"{plane['mb_per_s']:.0f} |" in body
    for text in halo_bench.PAPER.values():      # the paper's own statements
        assert text in body
    assert "| figure | 000 says | model | holds |" in body
    assert "python -m peach2.sim.hybrid.halo_bench --nodes 16" in body


def test_section_draws_only_what_it_is_asked(tmp_path):
    figures.section(_saved(), tmp_path, draw=[figures.PLANES_PLOT], notes="")
    assert [p.name for p in tmp_path.iterdir()] == [figures.PLANES_PLOT]
    figures.section(_saved(), tmp_path / "none", draw=False)
    assert not (tmp_path / "none").exists()


def test_compare_against_the_paper():
    got = {s: (m, h) for f, s, m, h in figures.compare(_saved()["rows"])}
    assert got["(2, 4, 1): hybrid faster than both MV2GDR and TCA"][1] is True
    assert got["TCA faster than MV2GDR"][1] is False            # (4, 4, 1) Middle: 0.97x
    assert "(4, 4, 1): 0.97x" in got["TCA faster than MV2GDR"][0]
    assert got["Block ahead of MV2GDR up to N = 320-384"] == (
        "TCA ahead at every N measured (to 256)", None)          # crossover not reached
    assert got["MV2GDR with pack/unpack below its Block"][1] is True


def test_compare_a_crossover_reached():
    rows = [{"figure": "6", "plane": "jk", "n": n, "network": net, "mb_per_s": v}
            for n, tca, mpi in ((256, 2700, 2200), (352, 2750, 2800), (512, 2760, 3000))
            for net, v in (("tca", tca), ("mpi", mpi))]
    (_, said, model, holds), = figures.compare(rows)
    assert said.startswith("Block ahead") and model == "MV2GDR ahead from N = 352" and holds
    rows[1]["mb_per_s"] = rows[3]["mb_per_s"] = 1                # MV2GDR ahead from 256
    rows[0]["mb_per_s"] = 1
    assert figures.compare(rows)[0][3] is False


def test_old_list_format_is_refused_by_the_section_and_read_by_halo_bench(tmp_path):
    rows = _saved()["rows"]
    with pytest.raises(ValueError, match="bare list of rows"):
        figures.section(rows, tmp_path)
    old = tmp_path / "halo.json"
    old.write_text(json.dumps(rows))
    assert halo_bench.load(old) == {"run": None, "parts": [], "rows": rows}
    old.write_text(json.dumps({"machines": []}))
    with pytest.raises(ValueError, match="not halo_bench's results"):
        halo_bench.load(old)
    assert halo_bench.load(tmp_path / "none.json") is None


def test_a_run_replaces_only_the_rows_it_measured():
    saved = halo_bench.saved_form(_saved())
    new16 = [dict(r, time_us=1.0) for r in saved["rows"] if r["nodes"] == 16]
    got = halo_bench.merge(saved, new16, _run("python -m peach2.sim.hybrid.halo_bench "
                                               "--nodes 16", commit="def5678"))
    assert len(got["rows"]) == len(saved["rows"])
    assert all(r["time_us"] == 1.0 for r in got["rows"] if r["nodes"] == 16)
    assert [r for r in got["rows"] if r["nodes"] != 16] == [
        r for r in saved["rows"] if r["nodes"] != 16]
    assert [p["what"] for p in got["parts"]] == ["Figures 9-10 on 8 nodes, Figure 6",
                                                 "Figures 9-10 on 16 nodes"]
    eight = next(p for p in saved["parts"] if p["what"].startswith("Figures 9-10 on 8 nodes"))
    assert got["run"]["commit"] == eight["commit"]              # the oldest rows' design
    assert got["run"]["command"].endswith("; python -m peach2.sim.hybrid.halo_bench --nodes 16")
    assert "Figures 9-10 on 16 nodes at def5678" in got["run"]["conditions"]
    every = halo_bench.merge(got, saved["rows"], _run("all"))    # everything again: one part
    assert every["run"] == _run("all") and len(every["parts"]) == 1


def test_a_list_file_merges_into_a_stamped_file(tmp_path):
    rows = _saved()["rows"]
    got = halo_bench.merge(halo_bench.saved_form(rows), [r for r in rows if r["figure"] == "6"],
                           _run("python -m peach2.sim.hybrid.halo_bench --part figure6"))
    assert got["parts"][0]["conditions"] == "saved without a run stamp"
    assert got["run"]["commit"] == "unknown" and len(got["rows"]) == len(rows)


def test_main_refuses_an_out_that_is_not_its_results(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2")
    with pytest.raises(SystemExit):
        halo_bench.main(["--out", str(bad)])
    assert "not JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        halo_bench.main(["--out", str(tmp_path / "no" / "x.json")])
    assert "no folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        halo_bench.main(["--nodes", "16", "--part", "figure6"])
    assert "Figure 6 runs with the 8-node measurement" in capsys.readouterr().err


def test_main_saves_its_rows_with_a_stamp(tmp_path, monkeypatch, capsys):
    """halo_bench's main with the simulation replaced: the rows merged into --out, stamped."""
    rows = _saved()["rows"]
    out = tmp_path / "halo.json"
    out.write_text(json.dumps(rows))                            # the old format, converted
    asked = {}

    def measure(nodes, halo, figure6, planes, seed):
        asked.update(nodes=nodes, halo=halo, figure6=figure6, planes=planes)
        return [dict(r, time_us=2.0) for r in rows if r["nodes"] == 16]
    monkeypatch.setattr(halo_bench, "measure", measure)
    assert halo_bench.main(["--nodes", "16", "--out", str(out)]) == 0
    assert asked == {"nodes": 16, "halo": True, "figure6": False, "planes": None}
    saved = json.loads(out.read_text())
    assert saved["run"]["command"].endswith("; python -m peach2.sim.hybrid.halo_bench --nodes 16")
    assert sorted({r["nodes"] for r in saved["rows"] if r["time_us"] == 2.0}) == [16]
    assert len(saved["rows"]) == len(rows)
    assert "| small | 16 |" in capsys.readouterr().out
