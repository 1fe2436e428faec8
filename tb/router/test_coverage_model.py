"""The router's coverage model itself (``peach2.sim.harness.coverage``, no simulator): bins and
classification, the reachable set and how it follows the reference decision, holes reported,
the report command.  That the default traffic reaches every reachable bin is
``test_router.py::test_coverage_closure``."""

import json
import random

import pytest
from cocotbext.pcie.core.tlp import Tlp, TlpType

from peach2.sim.harness import coverage as cv
from peach2.sim.harness import mrd, mwr
from peach2.sim.reference import Decision

GOAL = cv.reachable()


def test_dimensions_and_bins():
    assert [n for n, _, _ in cv.DIMENSIONS] == ["type", "size", "align", "arrival", "dest",
                                                "error", "backpressure"]
    # every drop reason of the counters is an error bin, and nothing else but "none"
    assert set(cv.ERRORS) == {"none", "UNROUTABLE", "WINDOW_CLOSED", "UNSUPPORTED",
                              "READ_REJECTED", "MALFORMED", "POISONED", "RX_ERR",
                              "UNEXPECTED_CPL", "PROTECTED", "LINK_DOWN", "LINK_FLUSHED"}


@pytest.mark.parametrize("tlp, bins", [
    (mwr(0x1000, bytes(4)), ("MWr", "1", "64B")),
    (mwr(0x1_0000_0044, bytes(64)), ("MWr", "16", "DW")),
    (mwr(0x2001, bytes(3)), ("MWr", "1", "byte")),
    (mwr(0x2000, bytes(256)), ("MWr", "64", "64B")),
    (mwr(0x2000, bytes(260)), ("MWr", ">64", "64B")),
    (mwr(0x2FF8, bytes(16)), ("MWr", "2-15", "4KiB")),
    (mwr(0x3040, bytes(100)), ("MWr", "17-63", "64B")),
    (mrd(0x1_0000_0040, 256), ("MRd", "0", "64B")),
    (mrd(0x1002, 2), ("MRd", "0", "byte")),
])
def test_classify_memory(tlp, bins):
    assert cv.classify(tlp, "e", "E", "none", "ready") == bins + ("E", "E", "none", "ready")


def test_classify_other_types():
    cpl = Tlp()
    cpl.fmt_type = TlpType.CPL_DATA
    cpl.set_data(bytes(8))
    assert cv.classify(cpl, "n", "drop", "UNEXPECTED_CPL")[:3] == ("CplD", "2-15", "n/a")
    cfg = Tlp()
    cfg.fmt_type = TlpType.CFG_WRITE_0
    cfg.set_data(bytes(4))
    assert cv.classify(cfg, "s", "drop", "UNSUPPORTED")[:3] == ("Other", "1", "n/a")
    msg = Tlp()
    msg.fmt_type = TlpType.MSG_LOCAL
    assert cv.tlp_type(msg) == "Msg" and cv.alignment(msg) == "n/a"


def test_sample_rejects_unknown_bins():
    cov = cv.Coverage()
    with pytest.raises(ValueError, match="backpressure"):
        cov.sample("MWr", "1", "DW", "N", "E", "none", "maybe")
    with pytest.raises(ValueError, match="7"):
        cov.sample("MWr", "1")


def test_reachable_follows_the_documented_rules():
    forwarded = {t for t in GOAL if t[4] in cv.ARRIVALS}
    assert forwarded and all(t[0] == "MWr" for t in forwarded)       # only writes routed
    assert {t[6] for t in forwarded} == {"ready", "stalled"}
    assert all(t[6] == "n/a" for t in GOAL - forwarded)
    assert {t[3] for t in GOAL if t[4] == "CSR"} == {"N"}               # register BAR on N
    assert {t[0] for t in GOAL if t[4] == "CSR"} == {"MWr", "MRd"}
    assert {t[0] for t in GOAL if t[5] == "READ_REJECTED"} == {"MRd"}
    assert {t[0] for t in GOAL if t[5] == "UNEXPECTED_CPL"} == {"Cpl", "CplD"}
    assert {t[3] for t in GOAL if t[5] == "PROTECTED"} == {"E", "W", "S"}
    assert not [t for t in GOAL if t[1] == ">64" or t[2] == "4KiB"]   # never reach the router
    assert {t[1] for t in GOAL if t[0] == "MRd"} == {"0"}
    assert {t[1] for t in GOAL if t[0] == "Other"} == {"0", "1", "2-15"}
    assert ("MWr", "1", "DW", "E", "E", "none", "stalled") in GOAL      # back where it came
    # every type can be broken in its framing on every port
    for kind in cv.TYPES:
        assert {t[3] for t in GOAL if t[0] == kind and t[5] == "RX_ERR"} == set(cv.ARRIVALS)
    assert len(GOAL) == 1269


def test_reachable_is_derived_from_the_reference_decision(monkeypatch):
    """A reference that forwarded reads to E would make forwarded reads reachable: the set
    comes from ``route()``, not from a list."""
    real = cv.route

    def reads_forwarded(state, port, tlp, bar=None):
        if tlp.fmt_type in (TlpType.MEM_READ, TlpType.MEM_READ_64) and not tlp.ep:
            return Decision("forward", port="E")
        return real(state, port, tlp, bar)
    monkeypatch.setattr(cv, "route", reads_forwarded)
    changed = cv.reachable()
    assert ("MRd", "0", "DW", "W", "E", "none", "stalled") in changed
    assert ("MRd", "0", "DW", "W", "E", "none", "stalled") not in GOAL


def test_holes_reported_and_unreachable_hits_flagged():
    cov = cv.Coverage({t: 1 for t in GOAL})
    missing = ("MRd", "0", "byte", "S", "drop", "READ_REJECTED", "n/a")
    del cov.hits[missing]
    text, data = cv.report(cov, GOAL)
    assert data["cross"]["reached"] == len(GOAL) - 1
    assert data["cross"]["holes"] == [list(missing)]
    assert "hole: MRd 0 byte S drop READ_REJECTED n/a" in text
    assert data["dimensions"]["type"]["holes"] == []        # MRd is reached elsewhere
    assert data["dimensions"]["align"]["unreachable"] == ["4KiB"]
    impossible = ("Cpl", "0", "n/a", "E", "W", "none", "ready")
    cov.sample(*impossible)
    _, data = cv.report(cov, GOAL)
    assert data["cross"]["hit_unreachable"] == [list(impossible)]
    # one dimension's bin never hit at all shows as a hole of that dimension
    only_writes = cv.Coverage({t: 1 for t in GOAL if t[0] == "MWr"})
    _, data = cv.report(only_writes, GOAL)
    assert data["dimensions"]["type"]["holes"] == ["MRd", "Cpl", "CplD", "Msg", "Other"]


def test_example_builds_its_bins():
    rng = random.Random(3)
    for kind, size, align in {t[:3] for t in GOAL}:
        for _ in range(3):
            tlp = cv.example(rng, kind, size, align, 1 << 32)
            assert (cv.tlp_type(tlp), cv.size_class(cv.payload_dw(tlp)),
                    cv.alignment(tlp)) == (kind, size, align)
    assert cv.example(rng, "MRd", "16", "DW") is None
    assert cv.example(rng, "Cpl", "0", "DW") is None


def test_ready_log_window():
    log = cv.ReadyLog()
    log.low = [10, 50]
    assert log.stalled(12, 1)               # low 2 cycles before its only beat
    assert not log.stalled(30, 4)           # nothing low from 23 to 30
    assert log.stalled(55, 4)


def test_command_writes_the_report(tmp_path, capsys):
    cov = cv.Coverage({t: 2 for t in GOAL if t[0] != "Cpl"})
    src = tmp_path / "a.json"
    cov.save(src)
    out = tmp_path / "report.json"
    assert cv.main([str(src), "--out", str(out)]) == 1          # holes: exit status 1
    data = json.loads(out.read_text())
    assert data["dimensions"]["type"]["holes"] == ["Cpl"]
    assert "cross" in capsys.readouterr().out
    cv.Coverage({t: 1 for t in GOAL if t[0] == "Cpl"}).save(tmp_path / "b.json")
    assert cv.main([str(src), str(tmp_path / "b.json"), "--out", str(out)]) == 0


def test_command_refuses_an_unwritable_out_before_reading(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "r.json"
    assert cv.main([str(tmp_path / "no-such-input.json"), "--out", str(missing)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: cannot write" in err
    assert cv.main([str(tmp_path), "--out", str(tmp_path)]) == 4     # a folder
