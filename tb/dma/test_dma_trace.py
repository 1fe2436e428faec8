"""``dma_trace.py``'s parsing and comparison, on hand-made results (no simulation)."""

import json

import dma_trace
import pytest

RESULTS = """<?xml version='1.0' encoding='utf-8'?>
<testsuites name="cocotb tests"><testsuite name="dma_tb" tests="2">
<testcase classname="dma_tb" name="first" time="1.0"><properties>
<property name="sim_time_unit" value="ns" /><property name="sim_time_start" value="0.0" />
<property name="sim_time_stop" value="5000.0" /></properties></testcase>
<testcase classname="dma_tb" name="second" time="1.0"><properties>
<property name="sim_time_unit" value="ns" /><property name="sim_time_start" value="5000.001" />
<property name="sim_time_stop" value="9000.001" /></properties></testcase>
</testsuite></testsuites>
"""


def test_end_times_from_results(tmp_path):
    xml = tmp_path / "results.xml"
    xml.write_text(RESULTS)
    assert dma_trace.end_times(xml) == {"first": 5000.0, "second": 9000.001}


def test_end_times_refuse_a_case_without_end(tmp_path):
    xml = tmp_path / "results.xml"
    xml.write_text(RESULTS.replace('name="sim_time_stop" value="5000.0"', 'name="x" value="1"'))
    with pytest.raises(dma_trace.Failure, match="first has no end time"):
        dma_trace.end_times(xml)


def test_differences_name_each_change():
    before = ({"run": {"a": 10.0, "b": 20.0}}, {"c0.o_rd": [1, 2, 3], "c0.o_wr": [4]})
    assert dma_trace.differences(before, before) == []
    after = ({"run": {"a": 10.0, "b": 24.0}}, {"c0.o_rd": [1, 2, 5], "c0.o_wr": [4, 6]})
    diff = dma_trace.differences(before, after)
    assert diff == [
        "run b: ended at 20.0 ns, now 24.0 ns",
        "halo c0.o_rd: 3 beats, now 3; first difference at beat 2: 3 ns, now 5 ns",
        "halo c0.o_wr: 1 beats, now 2; first difference at beat 1: none ns, now 6 ns",
    ]


def test_collect_writes_one_stream_per_line(tmp_path):
    raw = {"unit": "ns", "times": {"c1.i_cpl": [7, 8], "c0.o_rd": [1]}, "summary": {}}
    (tmp_path / dma_trace.HALO_TRACE).write_text(json.dumps(raw))
    for run in dma_trace.RUNS:
        (tmp_path / "build" / run).mkdir(parents=True)
        (tmp_path / "build" / run / "results.xml").write_text(RESULTS)
    ends, times = dma_trace.collect(tmp_path, build=tmp_path / "build")
    assert ends == {run: {"first": 5000.0, "second": 9000.001} for run in dma_trace.RUNS}
    text = (tmp_path / dma_trace.HALO_TRACE).read_text()
    assert text.splitlines()[1:3] == [' "c0.o_rd": [1],', ' "c1.i_cpl": [7,8]']
    assert dma_trace.load(tmp_path) == (ends, {"c0.o_rd": [1], "c1.i_cpl": [7, 8]})


def test_load_without_evidence_is_a_failure(tmp_path):
    with pytest.raises(dma_trace.Failure, match="run 'record' first"):
        dma_trace.load(tmp_path)
