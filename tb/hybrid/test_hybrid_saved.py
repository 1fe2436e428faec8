"""The hybrid sweeps' saved results: rows merged with a stamp per run, so a machine measured over
several sessions says which rows are how old; saves under a lock, so sweeps run side by side
keep each other's entries (``peach2.sim.hybrid.saved``)."""

import json
import multiprocessing
import time

import pytest

from peach2.sim.bench import staleness
from peach2.sim.hybrid import sweep as sweep_module
from peach2.sim.hybrid.figures import machine_entry, section
from peach2.sim.hybrid.saved import merge_curves, updating
from peach2.sim.hybrid.tuning import sweep as tuning_module


def _rows(*sizes, ns=1000.0):
    return [{"size": s, "mpi_ns": ns, "hybrid_ns": ns / 2, "ratio": 2.0,
             "mpi_algorithm": None} for s in sizes]


def _entry(rows, shape="2x4", subclusters=1, split=2):
    raw = {"broadcast": {"preset": "MV2GDR-QPI-Tuned", "runs": [{"nodes": 8}]}}
    return machine_entry(shape, subclusters, split, rows, raw, gpu_read=2.8e9)


def _stamp(commit, command="python -m x"):
    return {"command": command, "commit": commit, "date": "2026-11-29", "seconds": 10,
            "conditions": "test"}


def test_merge_replaces_measured_sizes_and_keeps_the_others_stamped():
    saved = {"run": {"commit": "old"}, "machines": []}
    merge_curves(saved, _entry({"broadcast": _rows(8, 64, 512), "allgather": _rows(16)}),
                 _stamp("aaaaaaa"))
    assert "run" not in saved and len(saved["machines"]) == 1
    merge_curves(saved, _entry({"broadcast": _rows(64, 2048, ns=5000.0)}), _stamp("bbbbbbb"))
    m = saved["machines"][0]
    assert [s["commit"] for s in m["runs"]] == ["aaaaaaa", "bbbbbbb"]
    bcast = {r["size"]: r for r in m["rows"]["broadcast"]}
    assert sorted(bcast) == [8, 64, 512, 2048]                     # sorted, 64 replaced
    assert bcast[64]["mpi_ns"] == 5000.0 and bcast[64]["run"] == 1 and bcast[8]["run"] == 0
    assert m["rows"]["allgather"][0]["run"] == 0
    # a run whose every row was measured again leaves no stamp behind
    merge_curves(saved, _entry({"broadcast": _rows(8, 64, 512, 2048), "allgather": _rows(16)}),
                 _stamp("ccccccc"))
    m = saved["machines"][0]
    assert [s["commit"] for s in m["runs"]] == ["ccccccc"]
    assert {r["run"] for rows in m["rows"].values() for r in rows} == {0}
    # another machine is another entry
    merge_curves(saved, _entry({"broadcast": _rows(8)}, "2x8", 2, 1), _stamp("ddddddd"))
    assert len(saved["machines"]) == 2 and saved["machines"][0]["runs"][0]["commit"] == "ccccccc"


def test_each_machine_names_its_runs_and_the_stale_mark_follows_every_stamp(tmp_path):
    saved = {"machines": []}
    merge_curves(saved, _entry({"broadcast": _rows(8, 64, 512, 2048)}), _stamp("6551fc4", "old"))
    merge_curves(saved, _entry({"broadcast": _rows(512)}), _stamp("HEAD", "new"))
    _, body = section(saved, tmp_path, draw=False)
    stamps = [line for line in body.split("\n") if line.startswith("Measured by")]
    assert stamps == [
        "Measured by `old` at 6551fc4 on 2026-11-29 (10 s, test): Broadcast 8 B-2 KiB (3 sizes).",
        "Measured by `new` at HEAD on 2026-11-29 (10 s, test): Broadcast 512 B."]
    # no section-wide stamp: the mark goes under the heading, naming the old run
    text = f"## T\n\n{body.strip()}"
    if staleness.changed_since("6551fc4", ["rtl"]) is None:
        pytest.skip("commit 6551fc4 is not in this clone (shallow?)")
    marked = staleness.mark("hybrid", text)
    assert marked.split("\n")[2].startswith("**Stale:**") and "since 6551fc4" in marked


def _add(path, name, pause):
    with updating(path) as saved:
        time.sleep(pause)
        saved["machines"].append({"name": name})


def test_side_by_side_saves_keep_both(tmp_path):
    path = tmp_path / "r.json"
    ctx = multiprocessing.get_context("fork")
    slow = ctx.Process(target=_add, args=(path, "first", 0.5))
    slow.start()
    time.sleep(0.1)                 # the second reads while the first holds the file
    _add(path, "second", 0)
    slow.join(10)
    assert slow.exitcode == 0
    assert sorted(m["name"] for m in json.loads(path.read_text())["machines"]) == [
        "first", "second"]


def _fake_run(pause):
    """A stand-in for the launcher in :func:`~peach2.sim.hybrid.tuning.sweep.tuning_sweep`:
    each fixed network's time from its name and size, after ``pause`` seconds; ``tuned``
    reports mpi."""
    def run(shape, subclusters, runs, **kw):
        time.sleep(pause)
        return {"preset": "MV2GDR-QPI-Tuned",
                "runs": [{"network": "mpi" if r["network"] == "tuned" else r["network"],
                          "size": size, "time_ns": 1000.0 + len(r["network"]) + size}
                         for r in runs for size in r["sizes"]]}
    return run


def _tune(out, networks, pause):
    tuning_module.run = _fake_run(pause)
    return sweep_module.main(["--shape", "2x4", "--subclusters", "1", "--per-subcluster", "2",
                              "--collective", "broadcast", "--sizes", "8", "--tune",
                              "--networks", networks, "--out", str(out)])


def test_tuning_sweeps_of_one_entry_take_turns(tmp_path, monkeypatch, capsys):
    """Two tuning sweeps of one machine's entry at once, each measuring some of its choices:
    the second waits (and says so) until the first has saved, then merges into what the first
    saved, so the entry ends with every choice measured and its row (without the hold, the
    later save would put back the entry as it was at its start, losing the first's times)."""
    monkeypatch.setattr(tuning_module, "run", tuning_module.run)   # restored after the test
    out = tmp_path / "tuning.json"
    nets = sweep_module.choices(sweep_module.Groups(sweep_module.MachinePlan("2x4", 1), 2),
                                "broadcast")
    first, second = ",".join(nets[:2]), ",".join(nets[2:])
    ctx = multiprocessing.get_context("fork")
    slow = ctx.Process(target=_tune, args=(out, first, 1.0))
    slow.start()
    time.sleep(0.3)                 # the first holds the entry, measuring
    assert _tune(out, second, 0) == 0
    slow.join(20)
    assert slow.exitcode == 0
    entry = json.loads(out.read_text())["machines"][0]
    assert sorted(t["network"] for t in entry["times"]) == sorted(nets)
    assert [r["size"] for r in entry["rows"]] == [8] and entry["pending"] == []
    assert len(entry["runs"]) == 2
    assert "waiting for another tuning sweep of the broadcast on 8 nodes in 2 groups" in \
        capsys.readouterr().err


def test_sweep_saves_its_rows_with_its_stamp(tmp_path, monkeypatch, capsys):
    """``--save`` merges the sweep's rows, stamped with the command that reproduces them (the
    simulations themselves are :func:`~peach2.sim.hybrid.sweep.sweep`'s, tested in
    tb/hybrid/test_hybrid.py; here they are replaced by fixed rows)."""
    raw = {"broadcast": {"preset": "MV2GDR-QPI-Tuned", "runs": [{"nodes": 8}]}}
    monkeypatch.setattr(sweep_module, "sweep", lambda *a, **k: ({"broadcast": _rows(8)}, raw))
    out = tmp_path / "hybrid.json"
    argv = ["--shape", "2x4", "--subclusters", "1", "--per-subcluster", "2", "--collective",
            "broadcast", "--sizes", "8", "--save", str(out), "--conditions", "quiet"]
    assert sweep_module.main(argv) == 0
    m = json.loads(out.read_text())["machines"][0]
    assert m["runs"][0]["command"] == ("python -m peach2.sim.hybrid.sweep --shape 2x4 "
                                       "--subclusters 1 --per-subcluster 2 --collective "
                                       "broadcast --sizes 8 --save")
    assert m["runs"][0]["conditions"] == "quiet" and m["rows"]["broadcast"][0]["run"] == 0
    out.write_text("not json")
    assert sweep_module.main(argv) == 4 and "--save: cannot read" in capsys.readouterr().err
    assert out.read_text() == "not json"


@pytest.mark.parametrize("argv, why", [
    (["--tune", "--save"], "--save goes without --tune"),
    (["--conditions", "x"], "--conditions goes with --tune or --save"),
    (["--save", "/no/such/folder/x.json"], "--save: no folder"),
])
def test_sweep_save_refuses_bad_options(argv, why, capsys):
    with pytest.raises(SystemExit) as exit_:
        sweep_module.main(argv)
    assert exit_.value.code == 2 and why in capsys.readouterr().err


def _tuning_entry():
    """A 2x4-split tuning entry of two runs: 8 B's mpi and hybrid by the first, 512 B's mpi by
    the first and hybrid by the second, 2 KiB's hybrid only, 16 KiB's mpi cut short."""
    t = [("mpi", 8, 100.0, 0), ("hybrid", 8, 80.0, 0), ("mpi", 512, 300.0, 0),
         ("hybrid", 512, 250.0, 1), ("hybrid", 2048, 900.0, 1)]
    return {"nodes": 8, "groups": 2, "shape": "2x4", "subclusters": 1, "per_subcluster": 2,
            "collective": "broadcast", "gpu_read": 2.8e9,
            "times": [{"network": n, "size": s, "time_ns": ns, "run": r} for n, s, ns, r in t]
            + [{"network": "mpi", "size": 16384, "over_ns": 900.0, "run": 0},   # --cutoff
               {"network": "hybrid", "size": 16384, "time_ns": 800.0, "run": 0}],
            "rows": [], "runs": [_stamp("1111111", "tune a"), _stamp("2222222", "tune b")]}


def test_take_tuning_copies_mpi_and_hybrid_with_the_tuning_stamp(tmp_path):
    from peach2.sim.hybrid.saved import take_tuning
    saved = {"machines": []}
    merge_curves(saved, _entry({"broadcast": _rows(8, 64), "allgather": _rows(16)}),
                 _stamp("aaaaaaa"))
    take_tuning(saved, _tuning_entry(), "broadcast", [8])
    m = saved["machines"][0]
    bcast = {r["size"]: r for r in m["rows"]["broadcast"]}
    assert (bcast[8]["mpi_ns"], bcast[8]["hybrid_ns"], bcast[8]["ratio"]) == (100.0, 80.0, 1.25)
    assert bcast[8]["mpi_algorithm"].startswith("MPIR_") and bcast[64]["mpi_ns"] == 1000.0
    assert m["runs"][bcast[8]["run"]] == dict(_stamp("1111111", "tune a"), from_tuning=True)
    assert m["label"].startswith("one 2x4") and m["rows"]["allgather"][0]["size"] == 16
    _, body = section(saved, tmp_path, draw=False)
    assert ("Measured by `tune a` at 1111111 on 2026-11-29 (10 s, test): Broadcast 8 B (from "
            "the tuning sweep, taken into these curves by") in body
    for sizes, why in (([2048], "has not measured mpi there"),
                       ([4096], "has not measured mpi there"),
                       ([16384], "mpi was cut short there")):
        with pytest.raises(ValueError, match=why):
            take_tuning(saved, _tuning_entry(), "broadcast", sizes)
    with pytest.raises(ValueError, match="the curves have no machine"):
        take_tuning({"machines": []}, _tuning_entry(), "broadcast", [8])


def test_take_tuning_stamps_a_size_measured_by_two_runs_with_both(tmp_path):
    """512 B's mpi time is the first tuning run's, its hybrid time the second's: the row is
    the second's, its mpi_run the first's, and both stamps say so; merging again keeps both."""
    from peach2.sim.hybrid.saved import take_tuning
    saved = {"machines": []}
    merge_curves(saved, _entry({"broadcast": _rows(8, 512)}), _stamp("aaaaaaa"))
    take_tuning(saved, _tuning_entry(), "broadcast", [512])
    m = saved["machines"][0]
    row = m["rows"]["broadcast"][1]
    assert (row["mpi_ns"], row["hybrid_ns"], row["ratio"]) == (300.0, 250.0, 1.2)
    assert m["runs"][row["run"]]["commit"] == "2222222"
    assert m["runs"][row["mpi_run"]] == dict(_stamp("1111111", "tune a"), from_tuning=True)
    _, body = section(saved, tmp_path, draw=False)
    assert "at 2222222 on 2026-11-29 (10 s, test): Broadcast 512 B (the `hybrid` time) (from " \
           "the tuning sweep" in body
    assert "at 1111111 on 2026-11-29 (10 s, test): Broadcast 512 B (the `mpi` time) (from the " \
           "tuning sweep" in body
    # the 8 B row measured again: the 512 B row keeps both its stamps, renumbered
    merge_curves(saved, _entry({"broadcast": _rows(8)}), _stamp("ccccccc"))
    m = saved["machines"][0]
    row = m["rows"]["broadcast"][1]
    assert [r["commit"] for r in m["runs"]] == ["2222222", "1111111", "ccccccc"]
    assert (row["run"], row["mpi_run"], m["rows"]["broadcast"][0]["run"]) == (0, 1, 2)
    # both times from one run again: no mpi_run left, its stamp dropped
    take_tuning(saved, dict(_tuning_entry(), times=[dict(t, run=1) for t in
                                                    _tuning_entry()["times"]]),
                "broadcast", [512])
    m = saved["machines"][0]
    assert "mpi_run" not in m["rows"]["broadcast"][1]
    assert [r["commit"] for r in m["runs"]] == ["ccccccc", "2222222"]


def test_take_tuning_from_the_command_line(tmp_path, capsys):
    from peach2.sim.hybrid.saved import main
    curves, tuning = tmp_path / "hybrid.json", tmp_path / "tuning.json"
    saved = {"machines": []}
    merge_curves(saved, _entry({"broadcast": _rows(8)}), _stamp("aaaaaaa"))
    curves.write_text(json.dumps(saved))
    tuning.write_text(json.dumps({"machines": [_tuning_entry()]}))
    base = ["--shape", "2x4", "--subclusters", "1", "--per-subcluster", "2", "--collective",
            "broadcast", "--tuning", str(tuning), "--curves", str(curves), "--sizes"]
    assert main(base + ["2048"]) == 1 and "not measured mpi" in capsys.readouterr().err
    assert json.loads(curves.read_text()) == saved                  # nothing written
    assert main(base[:3] + ["3"] + base[4:] + ["8"]) == 1          # no such tuning entry
    assert main(base + ["8"]) == 0
    assert json.loads(curves.read_text())["machines"][0]["rows"]["broadcast"][0]["ratio"] == 1.25
    tuning.write_text("not json")
    assert main(base + ["8"]) == 4 and "--tuning: cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(base + ["8,x"])
