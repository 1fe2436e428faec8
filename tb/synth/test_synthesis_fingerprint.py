"""docs/synthesis.md describes today's gateware (the report cannot drift from rtl/).

The report section records the SHA-256 of the core's RTLIL it was made from
(:mod:`peach2.synth.fingerprint`).  ``test_report_describes_todays_gateware`` fails, naming
the blocks that changed, once a change to ``rtl/`` changes that RTLIL; the fix is to make the
report again (``peach2 synth-report -o docs/synthesis.md``) and commit it.  It costs a few
milliseconds while ``rtl/`` is unchanged and about 15 CPU-seconds (one elaboration of the core)
after an edit.  The full re-synthesis against the document is the slow test
``tb/platform/test_platform.py::test_synth_report_of_the_core``.
"""

from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from peach2.synth.fingerprint import (
    Stale,
    check_document,
    from_document,
    record,
    refresh_sources,
    source_digest,
    to_comment,
)
from peach2.synth.report import BEGIN, END
from peach2.synth.rtlil import core_rtlil

DOC = Path(__file__).resolve().parents[2] / "docs" / "synthesis.md"


def test_report_describes_todays_gateware():
    try:
        check_document(DOC)
        problem = None
    except Stale as stale:
        problem = str(stale)
    if problem:
        pytest.fail(problem, pytrace=False)


class _Counter(wiring.Component):
    def __init__(self, width):
        self.width = width
        super().__init__({"en": In(1), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.o.eq(self.o + 1)
        return m


class _Toy(wiring.Component):
    """Two blocks, ``a`` and ``b``; ``width`` changes ``b`` only."""
    en: In(1)
    o: Out(16)

    def __init__(self, width):
        self.b_width = width
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = a = _Counter(8)
        m.submodules.b = b = _Counter(self.b_width)
        m.d.comb += [a.en.eq(self.en), b.en.eq(a.o[0]), self.o.eq(b.o)]
        return m


def _document(tmp_path, design, sources=None):
    text, modules, instances = core_rtlil(_Toy(**design), "toy")
    fp = record(text, modules, "toy", instances, design)
    if sources is not None:
        fp["sources"] = sources
    path = tmp_path / "synthesis.md"
    path.write_text(f"# Report\n\n{BEGIN}\n\n{to_comment(fp)}\n\n{END}\n")
    return path, fp


def test_fingerprint_round_trip_and_sources(tmp_path):
    path, fp = _document(tmp_path, {"width": 8})
    assert from_document(path.read_text()) == fp
    assert set(fp["blocks"]) == {"a", "b"} and fp["sources"] == source_digest()
    assert check_document(path, make_top=_Toy, name="toy") == "sources"


def test_same_rtlil_passes_changed_rtlil_names_the_block(tmp_path):
    # Sources "edited" (another hash) but the same RTLIL: the figures still hold.
    path, _ = _document(tmp_path, {"width": 8}, sources="edited")
    assert check_document(path, make_top=_Toy, name="toy") == "rtlil"
    # The gateware changed in block b only (the document says 8 bits, the sources make 9).
    def wider(width):
        return _Toy(width + 1)
    with pytest.raises(Stale, match=r"RTLIL differs; blocks: b\); run `peach2 synth-report"):
        check_document(path, make_top=wider, name="toy")


def test_refresh_records_the_sources_only_when_the_rtlil_is_the_same(tmp_path):
    path, fp = _document(tmp_path, {"width": 8}, sources="0" * 64)
    assert refresh_sources(path, make_top=_Toy, name="toy") == "rtlil"
    assert from_document(path.read_text()) == dict(fp, sources=source_digest())
    assert check_document(path, make_top=_Toy, name="toy") == "sources"     # cheap again
    path, _ = _document(tmp_path, {"width": 8}, sources="0" * 64)
    with pytest.raises(Stale, match="blocks: b"):
        refresh_sources(path, make_top=lambda width: _Toy(width + 1), name="toy")
    assert from_document(path.read_text())["sources"] == "0" * 64     # left as it was


def test_document_without_fingerprint(tmp_path):
    path = tmp_path / "synthesis.md"
    path.write_text("# Report\n")
    with pytest.raises(Stale, match="records no gateware fingerprint"):
        check_document(path)
