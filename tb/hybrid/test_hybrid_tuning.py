"""The hybrid's network options and the tuning table (no simulator): what each option changes
in a collective's phases, what is refused, how a table is built from measured times and read.
"""

import json

import pytest

from peach2.sim.hybrid import Groups, allgather, broadcast
from peach2.sim.hybrid.algorithms import parse_network
from peach2.sim.hybrid.launch import parse_run
from peach2.sim.hybrid.saved import stamp_tuning, tuning_runs
from peach2.sim.hybrid.tuning import build_table, choose, fastest_times, load_table, table_rows
from peach2.sim.hybrid.tuning.sweep import choices, merge_tuning, tuning_table_text
from peach2.sim.system import MachinePlan

SPLIT = Groups(MachinePlan("2x4", 1), per_subcluster=2)          # 000 Figure 11, 8 nodes


def test_parse_network():
    assert parse_network("hybrid") == ("hybrid", {})
    assert parse_network("hybrid+ring+staged", "allgather") == \
        ("hybrid", {"ring": True, "staged": True})
    assert parse_network("tca+ring") == ("tca", {"ring": True})
    assert parse_network("hybrid+hops2+staged") == ("hybrid", {"hops": 2, "staged": True})
    for bad, why in (("ib", "network must be one of"), ("hybrid+fast", "unknown option"),
                     ("mpi+staged", "goes with"), ("tca+staged", "goes with"),
                     ("hybrid+staged+staged", "twice"), ("hybrid+hops", "unknown option"),
                     ("hybrid+hops0", "unknown option"), ("hybrid+ring2", "unknown option"),
                     ("hybrid+hops1+hops2", "twice"), ("tca+hops1", "goes with")):
        with pytest.raises(ValueError, match=why):
            parse_network(bad)
    with pytest.raises(ValueError, match=r"\+ring goes with allgather"):
        parse_network("hybrid+ring", "broadcast")
    with pytest.raises(ValueError, match="goes with"):
        parse_network("hybrid+staged", "halo")


def test_options_change_the_phases():
    blocks = [bytes([g]) * 3 for g in range(8)]
    plain = allgather(SPLIT, 3, blocks, network="hybrid")
    both = allgather(SPLIT, 3, blocks, network="hybrid+ring+staged")
    assert [p.name for p in plain.phases] == ["TCA recursive doubling in each group",
                                              "MPI recursive doubling across groups"]
    assert [p.name for p in both.phases] == ["TCA ring in each group",
                                             "MPI recursive doubling across groups, staged"]
    assert both.network == "hybrid+ring+staged" and both.expected(0) == plain.expected(0)
    assert [p.name for p in broadcast(SPLIT, 8, bytes(8), network="hybrid+staged").phases] == \
        ["MPI_Bcast among group leaders, staged", "TCA binomial in each group"]
    # the ring phase gathers along group 1's ring: chips 4..7 of the 2x4 (ring B)
    plan = SPLIT.plan
    assert SPLIT.ring == 4 and Groups(plan).ring == 4
    assert Groups(MachinePlan("2x8", 2), per_subcluster=4).ring is None


def test_options_refused_where_they_cannot_run():
    quarter = Groups(MachinePlan("2x8", 2), per_subcluster=4)      # groups of 4 in a ring of 8
    with pytest.raises(ValueError, match="whole rings"):
        allgather(quarter, 1, [b"x"] * 32, network="hybrid+ring")
    assert choices(quarter, "allgather") == ["mpi", "hybrid", "hybrid+staged", "hybrid+hops1",
                                             "hybrid+hops1+staged"]
    # hops2 keeps a ring of 4's steps (1 and 2 hops): it would run as plain hybrid
    assert choices(SPLIT, "allgather") == ["mpi", "hybrid", "hybrid+staged", "hybrid+ring",
                                           "hybrid+ring+staged", "hybrid+hops1",
                                           "hybrid+hops1+staged"]
    assert choices(SPLIT, "broadcast") == ["mpi", "hybrid", "hybrid+staged", "hybrid+hops1",
                                           "hybrid+hops1+staged"]
    assert parse_run("allgather:hybrid+ring:16")["network"] == "hybrid+ring"
    assert parse_run("broadcast:tuned:8")["network"] == "tuned"
    for bad in ("broadcast:hybrid+ring:8", "halo:tuned:small/2x4"):
        with pytest.raises(ValueError):
            parse_run(bad)


def test_hops_sends_far_steps_over_mpi():
    """``+hopsH``: TCA keeps the steps whose routes cross at most H links (safe routing), MPI
    takes the rest: smaller TCA groups and more leaders.  On a ring of 8 (half a 2x8) the
    steps 1, 2 and 4 apart cross 1, 2 and 4 links."""
    half = Groups(MachinePlan("2x8", 1), per_subcluster=2)
    assert [half.within(h).size for h in (1, 2, 3, 4)] == [2, 4, 4, 8]
    whole = Groups(MachinePlan("2x8", 2))      # the S step is one hop: 16 at 4 hops
    assert [whole.within(h).size for h in (1, 2, 4)] == [2, 4, 16]
    coll = broadcast(half, 8, bytes(8), network="hybrid+hops2")
    assert coll.groups.size == 4 and coll.info["leaders"] == [0, 4, 8, 12]
    coll = allgather(half, 2, [bytes(2)] * 16, network="hybrid+hops1")
    assert coll.groups.size == 2 and coll.info["mpi_steps"] == 3
    assert broadcast(half, 8, bytes(8)).groups is half
    with pytest.raises(ValueError, match="hops must be a positive integer"):
        half.within(0)


def _times(rows):
    return [{"collective": "allgather", "nodes": 8, "groups": 2, "network": n, "size": s,
             "time_ns": t} for s, by in rows.items() for n, t in by.items()]


def test_table_takes_the_fastest_and_switches_half_way():
    table = build_table(_times({16: {"mpi": 20, "hybrid": 10},
                                256: {"mpi": 30, "hybrid": 25},
                                4096: {"mpi": 40, "hybrid": 60, "hybrid+staged": 35},
                                65536: {"mpi": 90, "hybrid+staged": 80}}))
    assert table == {"allgather:8:2": [[1024, "hybrid"], [-1, "hybrid+staged"]]}
    pick = [choose(table, "allgather", 8, 2, s) for s in (1, 16, 1024, 1025, 1 << 30)]
    assert pick == ["hybrid", "hybrid", "hybrid", "hybrid+staged", "hybrid+staged"]
    # an unmeasured node count takes the nearest row of the same collective and groups
    assert choose(table, "allgather", 16, 2, 100) == "hybrid"
    with pytest.raises(KeyError, match="no broadcast on 2 groups"):
        choose(table, "broadcast", 8, 2, 8)
    with pytest.raises(ValueError, match="positive number of bytes"):
        choose(table, "allgather", 8, 2, 0)
    with pytest.raises(ValueError, match="network must be one of"):
        build_table(_times({16: {"infiniband": 1}}))
    # equal times: the same choice every time (by name), not by dict order
    assert build_table(_times({8: {"mpi": 5, "hybrid": 5}}))["allgather:8:2"] == \
        [[-1, "hybrid"]]
    assert "| allgather | 8 | 2 | 1024 | `hybrid` |" in table_rows(table)


def test_saved_tables_merge_and_a_missing_file_says_how(tmp_path):
    path = tmp_path / "t.json"
    with pytest.raises(FileNotFoundError, match="sweep --tune"):
        load_table(path)
    path.write_text(json.dumps({"machines": [{"table": {"broadcast:8:2": [[-1, "hybrid"]]}},
                                             {"table": {"allgather:8:2": [[-1, "mpi"]]}}]}))
    assert load_table(path) == {"broadcast:8:2": [[-1, "hybrid"]],
                                "allgather:8:2": [[-1, "mpi"]]}


def test_tuning_table_text_marks_check_sizes():
    result = {"networks": ["mpi", "hybrid"],
              "rows": [{"size": 16, "check": False, "times": {"mpi": 20000, "hybrid": 10000},
                        "best": "hybrid", "tuned": "hybrid", "ratio": 1.0},
                       {"size": 64, "check": True, "times": {"mpi": 21000, "hybrid": 12000},
                        "best": "hybrid", "tuned": "mpi", "ratio": 1.75}]}
    text = tuning_table_text(result)
    assert "| 16 B | 20.0 | 10.0 | `hybrid` | `hybrid` | 1.000 |" in text
    assert "| 64 B * | 21.0 | 12.0 | `hybrid` | `mpi` | 1.750 |" in text


def _machine(collective, ratios):
    rows = [{"size": s, "check": s == 64, "times": {"mpi": 20000.0, "hybrid": 10000.0},
             "best": "hybrid", "best_ns": 10000.0, "tuned": "hybrid" if r == 1 else "mpi",
             "tuned_ns": 10000.0 * r, "ratio": r} for s, r in zip((16, 64, 256), ratios)]
    return {"collective": collective, "nodes": 8, "groups": 2, "shape": "2x4",
            "subclusters": 1, "per_subcluster": 2, "networks": ["mpi", "hybrid"],
            "rows": rows, "table": {f"{collective}:8:2": [[-1, "hybrid"]]},
            "run": {"command": "python -m peach2.sim.hybrid.sweep --tune", "commit": "abc1234",
                    "date": "2026-11-29", "seconds": 5}}


def test_tuning_section_states_the_limit_and_draws(tmp_path):
    from peach2.sim.hybrid.figures import tuning as fig
    saved = {"machines": [_machine("broadcast", [1.0, 1.01, 1.0]),
                          _machine("allgather", [1.0, 1.0, 1.0])]}
    title, body = fig.section(saved, tmp_path)
    assert "Tuned choice" in title
    assert "more than 5%: holds** (worst 1.010: broadcast of 64 B on 8 nodes)" in body
    assert "| 64 B * | 20.0 | 10.0 | `hybrid` | `mpi` | 1.010 |" in body
    assert "| allgather | 8 | 2 | larger | `hybrid` |" in body
    assert "at abc1234 on 2026-11-29 (5 s)" in body
    # Every machine's stamp is a "Measured by" line, so its commit counts for the stale mark.
    stamps = [line for line in body.split("\n") if line.startswith("Measured by")]
    assert len(stamps) == 2 and all("at abc1234" in line for line in stamps)
    for m in saved["machines"]:
        assert (tmp_path / fig.plot_name(m)).stat().st_size > 1000
    saved["machines"][1] = _machine("allgather", [1.0, 1.2, 1.0])
    _, body = fig.section(saved, tmp_path, draw=False)
    assert "does not hold** (worst 1.200: allgather of 64 B" in body


@pytest.mark.parametrize("argv, why", [
    (["--checks", "64"], "--checks goes with --tune and --sizes"),
    (["--tune", "--collective", "allgather", "--sizes", "16", "--checks", "a"], "integers"),
    (["--tune", "--collective", "allgather", "--sizes", "16", "--checks", "0"], "at least 1"),
    (["--max-size", "0"], "at least 1 byte"),
    (["--collective", "broadcast", "--max-size", "4"], "leaves no size"),
    (["--cutoff"], "--cutoff goes with --tune"),
])
def test_sweep_refuses_bad_options_before_running(argv, why, capsys):
    from peach2.sim.hybrid.sweep import main
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and why in capsys.readouterr().err


def _t(size, network, ns, run=None):
    t = {"collective": "allgather", "nodes": 64, "groups": 4, "network": network, "size": size,
         "time_ns": ns}
    return t if run is None else dict(t, run=run)


def _row(size, tuned, check=False, run=0):
    return {"size": size, "check": check, "times": {}, "best": tuned, "best_ns": 1.0,
            "tuned": tuned, "tuned_ns": 1.0, "ratio": 1.0, "run": run}


def _kept():
    """A 64-node entry of one stamp (the old form): MPI alone best at 512 B and 4 KiB blocks,
    the hybrid at 16 B; a check at 32 KiB took MPI alone (the table's last range)."""
    times = [_t(16, "mpi", 30), _t(16, "hybrid", 20), _t(512, "mpi", 50), _t(512, "hybrid", 90),
             _t(4096, "mpi", 100), _t(4096, "hybrid", 150), _t(32768, "mpi", 900),
             _t(32768, "hybrid", 800)]
    return {"collective": "allgather", "nodes": 64, "groups": 4, "networks": ["mpi", "hybrid"],
            "times": times, "rows": [_row(16, "hybrid"), _row(512, "mpi"), _row(4096, "mpi"),
                                     _row(32768, "mpi", check=True)],
            "table": {}, "run": {"commit": "aaaaaaa"}}


def test_merge_tuning_keeps_other_sizes_and_runs_changed_choices_again():
    """A sweep adding 64 KiB blocks keeps the entry's other sizes (with their run index), builds
    the table from the kept table sizes and the new one (not the check), and runs the kept
    check at 32 KiB again, whose choice moved from MPI alone to the hybrid."""
    nets = ["mpi", "hybrid"]
    fresh = [_t(65536, "mpi", 1800), _t(65536, "hybrid", 1600)]
    m = merge_tuning(_kept(), fresh, [65536], [], nets)
    assert sorted(m["kept_rows"]) == [16, 512, 4096, 32768]
    assert all(t["run"] == 0 for t in m["times"] if t["size"] != 65536)
    assert [t for t in m["times"] if t["size"] == 65536] == fresh    # new: no run index yet
    assert m["table"] == {"allgather:64:4": [[90, "hybrid"], [16384, "mpi"], [-1, "hybrid"]]}
    assert m["checks"] == [32768] and m["retune"] == [32768]
    assert m["new_rows"] == [65536] and m["pending"] == []
    # Measuring a kept size again replaces it.
    m = merge_tuning(_kept(), [_t(512, "hybrid", 40), _t(512, "mpi", 50)], [512], [], nets)
    assert 512 not in m["kept_rows"] and len([t for t in m["times"] if t["size"] == 512]) == 2
    assert m["table"]["allgather:64:4"] == [[1448, "hybrid"], [-1, "mpi"]]
    assert m["retune"] == [] and m["new_rows"] == [512]
    m = merge_tuning(None, fresh, [65536], [], nets)
    assert (m["times"], m["kept_rows"], m["retune"]) == (fresh, {}, [])


def test_merge_tuning_waits_for_every_choice_of_a_size():
    """A size measured one network at a time gets no row and stays out of the table until every
    choice is there; a network measured again replaces only its own times."""
    nets = ["mpi", "hybrid", "hybrid+staged"]
    m = merge_tuning(_kept(), [_t(65536, "mpi", 1800)], [65536], [], nets)
    assert m["pending"] == [16, 512, 4096, 32768, 65536]       # the kept ones lack +staged
    assert m["table"] == {} and m["new_rows"] == [] and m["retune"] == []
    kept = dict(_kept(), times=_kept()["times"] + [
        _t(s, "hybrid+staged", 999) for s in (16, 512, 4096, 32768)] + [_t(65536, "mpi", 1800)])
    m = merge_tuning(kept, [_t(65536, "hybrid", 1600)], [65536], [], nets)
    assert m["pending"] == [65536] and m["new_rows"] == []
    assert m["table"]["allgather:64:4"] == [[90, "hybrid"], [-1, "mpi"]]
    m = merge_tuning(dict(kept, times=m["times"]), [_t(65536, "hybrid+staged", 1500),
                                                    _t(65536, "mpi", 1700)], [65536], [], nets)
    assert m["pending"] == [] and m["new_rows"] == [65536]
    at = {t["network"]: t["time_ns"] for t in m["times"] if t["size"] == 65536}
    assert at == {"mpi": 1700, "hybrid": 1600, "hybrid+staged": 1500}
    assert m["table"]["allgather:64:4"][-1] == [-1, "hybrid+staged"] and m["retune"] == [32768]


def test_stamp_tuning_renumbers_the_runs_and_drops_unused_stamps():
    kept = dict(_kept(), runs=[{"commit": "old"}, {"commit": "mid"}])
    del kept["run"]
    for x in kept["times"] + kept["rows"]:
        x["run"] = 1                       # every item is the second stamp's
    result = dict(kept, times=kept["times"][2:] + [_t(65536, "mpi", 1800)],
                  rows=kept["rows"][1:] + [dict(_row(65536, "mpi"), run=None)],
                  retuned=[])
    other = {"collective": "broadcast", "nodes": 64, "groups": 4, "runs": [{"commit": "x"}],
             "times": [], "rows": []}
    saved = {"machines": [dict(_kept(), runs=[{"commit": "gone"}]), other]}
    stamp_tuning(saved, result, {"commit": "new"}, tuning_runs(kept))
    entry = saved["machines"][-1]
    assert saved["machines"][0] is other and len(saved["machines"]) == 2
    assert entry["runs"] == [{"commit": "mid"}, {"commit": "new"}]
    assert {x["run"] for x in entry["times"] if x["size"] != 65536} == {0}
    assert [x["run"] for x in entry["rows"]] == [0, 0, 0, 1] and "retuned" not in entry
    assert saved["run"] == {"commit": "new"}
    assert tuning_runs(_kept()) == [{"commit": "aaaaaaa"}]


def test_tuning_stamps_name_each_runs_sizes():
    from peach2.sim.hybrid.figures.tuning import stamp_lines
    entry = dict(_kept(), runs=[{"command": "a", "commit": "1111111", "date": "d", "seconds": 1},
                                {"command": "b", "commit": "2222222", "date": "d", "seconds": 2}])
    entry["rows"][3]["run"] = 1
    for t in entry["times"][6:]:
        t["run"] = 1
    lines = stamp_lines(entry)
    assert lines == ["Measured by `a` at 1111111 on d (1 s): 16 B, 512 B, 4 KiB.",
                     "Measured by `b` at 2222222 on d (2 s): 32 KiB."]
    assert stamp_lines(_kept()) == ["Measured by `?` at aaaaaaa (? s)."]


def test_pending_sizes_are_named_with_the_choices_measured():
    from peach2.sim.hybrid.figures.tuning import pending_lines
    entry = dict(_kept(), pending=[65536], times=_kept()["times"] + [_t(65536, "mpi", 1800)])
    assert pending_lines(entry) == [
        "Pending, not in the table yet: 64 KiB: 1 of 2 choices measured so far (`mpi`).", ""]
    assert pending_lines(_kept()) == []


def _cut(size, network, over):
    return {"collective": "allgather", "nodes": 64, "groups": 4, "network": network,
            "size": size, "over_ns": over}


def test_a_choice_cut_short_counts_when_its_bound_is_above_the_fastest():
    """``--cutoff``: a choice known only to take longer than some time completes its size when
    that time is at least the fastest measured there (it is no candidate in the table); a
    bound below the fastest (the fastest measured again, slower) leaves the size pending, and
    the pending line says which choice has to run again."""
    from peach2.sim.hybrid.figures.tuning import pending_lines
    nets = ["mpi", "hybrid", "hybrid+staged"]
    kept = dict(_kept(), times=[_t(65536, "mpi", 1800), _t(65536, "hybrid", 1600)], rows=[])
    m = merge_tuning(kept, [_cut(65536, "hybrid+staged", 1600)], [65536], [], nets)
    assert m["pending"] == [] and m["new_rows"] == [65536]
    assert m["table"] == {"allgather:64:4": [[-1, "hybrid"]]}
    # the bound ties the fastest: still slower (it was not over by then)
    assert build_table(m["times"]) == m["table"]
    m = merge_tuning(dict(kept, times=m["times"]), [_t(65536, "hybrid", 1700)], [65536], [],
                     nets)
    assert m["pending"] == [65536] and m["new_rows"] == [] and m["table"] == {}
    entry = dict(kept, networks=nets, times=m["times"], pending=m["pending"])
    assert pending_lines(entry) == [
        "Pending, not in the table yet: 64 KiB: 3 of 3 choices measured so far (`mpi`, "
        "`hybrid+staged`, `hybrid`); cut short below the fastest there now, to run again: "
        "`hybrid+staged`.", ""]


def test_fastest_times_skips_bounds_and_the_networks_named():
    times = [{"network": "mpi", "size": 8, "time_ns": 300},
             {"network": "hybrid", "size": 8, "time_ns": 200},
             {"network": "hybrid+staged", "size": 8, "over_ns": 100},    # cut: a bound only
             {"network": "hybrid+staged", "size": 64, "over_ns": 900},
             {"network": "hybrid", "size": 512, "time_ns": 700}]
    assert fastest_times(times) == {8: 200, 512: 700}
    assert fastest_times(times, skip=["hybrid"]) == {8: 300}
    assert fastest_times([]) == {}


def test_cut_choices_show_their_bound_in_the_table():
    row = dict(_row(65536, "hybrid"), times={"mpi": 1800e3, "hybrid": 1600e3},
               over={"hybrid+staged": 1600e3})
    text = tuning_table_text({"networks": ["mpi", "hybrid", "hybrid+staged"], "rows": [row]})
    assert "| 64 KiB | 1800.0 | 1600.0 | > 1600.0 | `hybrid` | `hybrid` | 1.000 |" in text


def test_cutoff_sweep_runs_each_network_alone_and_cuts_at_the_fastest(monkeypatch):
    """With ``cutoff`` each network runs in simulations of its own, each size's limit the
    fastest time before it (kept times of other networks first); a cut run ends its
    simulation, so the network's sizes after it run in a new one."""
    import peach2.sim.hybrid.tuning.cutoff as cutoff
    import peach2.sim.hybrid.tuning.sweep as sweep
    took = {("mpi", 8): 100, ("mpi", 64): 200, ("mpi", 512): 900,
            ("hybrid", 8): 90, ("hybrid", 64): 500, ("hybrid", 512): 800}
    calls = []

    def fake_run(shape, subclusters, runs, **kw):
        (r,) = runs
        if r["network"] == "tuned":         # the table's choice at 512 B: the hybrid
            assert kw["tuning_table"] == {"broadcast:8:2": [[-1, "hybrid"]]}
            return {"preset": "P", "runs": [{"network": "hybrid", "size": s, "cut": False,
                                             "time_ns": 801} for s in r["sizes"]]}
        calls.append((r["network"], r["sizes"], r["limits_ns"]))
        out = []
        for size, limit in zip(r["sizes"], r["limits_ns"]):
            t = took[(r["network"], size)]
            if limit is not None and t > limit:
                out.append({"network": r["network"], "size": size, "cut": True,
                            "over_ns": limit})
                break
            out.append({"network": r["network"], "size": size, "cut": False, "time_ns": t})
        return {"preset": "P", "runs": out}
    monkeypatch.setattr(sweep, "run", fake_run)
    monkeypatch.setattr(cutoff, "run", fake_run)
    machine = {"collective": "broadcast", "nodes": 8, "groups": 2}
    kept = dict(machine, rows=[], runs=[{}], times=[
        dict(machine, network="hybrid+staged", size=512, time_ns=850, run=0),
        dict(machine, network="mpi", size=8, time_ns=1, run=0)])
    assert sweep.choices(Groups(MachinePlan("2x2", 2)), "broadcast") == [
        "mpi", "hybrid", "hybrid+staged"]
    r = sweep.tuning_sweep("2x2", 2, "broadcast", [8, 64, 512], [], gpu_read=2.8e9, kept=kept,
                           networks=["mpi", "hybrid"], cutoff=True)
    assert calls == [("mpi", [8, 64, 512], [None, None, 850]),      # mpi's kept 1 ns: replaced
                     ("hybrid", [8, 64, 512], [100, 200, 850]),     # cut at 64 B
                     ("hybrid", [512], [850])]
    fresh = {(t["network"], t["size"]): t.get("time_ns", -t.get("over_ns", 0))
             for t in r["times"] if "run" not in t}
    assert fresh == {("mpi", 8): 100, ("mpi", 64): 200, ("mpi", 512): -850,
                     ("hybrid", 8): 90, ("hybrid", 64): -200, ("hybrid", 512): 800}
    # 512 B is complete: mpi's bound (850) is above the hybrid's 800; 8 and 64 B lack +staged
    assert r["preset"] == "P" and r["pending"] == [8, 64]
    (row,) = r["rows"]
    assert (row["size"], row["times"], row["over"]) == (512, {"hybrid+staged": 850,
                                                              "hybrid": 800}, {"mpi": 850})
    assert (row["best"], row["tuned"], row["tuned_ns"]) == ("hybrid", "hybrid", 801)


def test_plot_marks_each_choice_cut_short(tmp_path, monkeypatch):
    """The plot draws a choice cut short (``--cutoff``) as a triangle at the time it was cut,
    in its line's colour; choices cut at one size stand apart along x, and the legend says
    what a triangle means.  A size where no choice was cut draws none."""
    from peach2.sim.hybrid.figures import tuning as fig
    drawn = []
    monkeypatch.setattr(fig, "save_figure", lambda f, path: drawn.append(f))
    nets = ["mpi", "hybrid", "hybrid+staged"]
    rows = [dict(_row(4096, "mpi"), times={n: 100_000.0 + i for i, n in enumerate(nets)}),
            dict(_row(65536, "mpi"), times={"mpi": 1_800_000.0},
                 over={"hybrid": 1_800_000.0, "hybrid+staged": 1_800_000.0})]
    fig.plot(dict(_kept(), networks=nets, rows=rows), tmp_path / "t.png")
    ax = drawn[0].axes[0]
    colour = {ln.get_label(): ln.get_color() for ln in ax.lines if ln.get_label() in nets}
    cuts = [ln for ln in ax.lines if ln.get_marker() == "^" and len(ln.get_xdata())]
    assert sorted(ln.get_color() for ln in cuts) == sorted([colour["hybrid"],
                                                            colour["hybrid+staged"]])
    assert all(ln.get_ydata()[0] == 1800.0 for ln in cuts)
    xs = sorted(ln.get_xdata()[0] for ln in cuts)
    assert xs[0] < 65536 < xs[1] and xs[1] / xs[0] < 1.2
    assert "cut short: longer than this" in [t.get_text() for t in ax.get_legend().get_texts()]
    drawn.clear()
    fig.plot(dict(_kept(), networks=nets, rows=rows[:1]), tmp_path / "u.png")
    ax = drawn[0].axes[0]
    assert not [ln for ln in ax.lines if ln.get_marker() == "^"]
