"""The figures README states about the gateware, asserted on the synthesis report.

docs/synthesis.md is today's gateware (``test_synthesis_fingerprint.py`` fails once ``rtl/``
changes its RTLIL until the report is made again), so its numbers are the design's: every
block's deepest path (its own and the core's paths ending in it) within the 6 LUT levels
(Stratix IV ALMs) a 250 MHz clock allows, and the core under a quarter of the EP4SGX530's ALMs
(README: "about 20%").
"""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "synthesis.md"
README = Path(__file__).resolve().parents[2] / "README.md"
MAX_DEPTH = 6
MAX_ALM_SHARE = 25.0


def block_depths(text):
    """``{block: (own depth, core depth)}`` in ALM levels, from the report's per-block table."""
    head = "| block | class |"
    lines = text[text.index(head):].splitlines()
    columns = [c.strip() for c in lines[0].strip("|").split("|")]
    own, core = columns.index("own depth, ALM"), columns.index("core depth, ALM")
    rows = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = (int(cells[own]), int(cells[core]))
    return rows


def alm_share(text):
    """The core's share of the device's ALMs, in percent."""
    return float(re.search(r"\| ALMs \(estimate[^|]*\| \d+ \| \d+ \| ([\d.]+) %", text).group(1))


def check(text):
    depths = block_depths(text)
    assert len(depths) > 20, f"the per-block table has {len(depths)} rows"
    deep = {b: d for b, d in depths.items() if max(d) > MAX_DEPTH}
    assert not deep, f"blocks deeper than {MAX_DEPTH} ALM levels (own, core): {deep}"
    share = alm_share(text)
    assert share < MAX_ALM_SHARE, f"the core takes {share} % of the EP4SGX530's ALMs"
    return share


def test_depth_and_area_within_budget():
    share = check(DOC.read_text())
    stated = re.search(r"at about (\d+)% of the EP4SGX530's ALMs", README.read_text())
    assert stated, "README no longer states the core's share of the ALMs"
    assert abs(share - int(stated.group(1))) < 2.5, (
        f"README says about {stated.group(1)} %, the report {share} %")


def test_a_deeper_block_fails():
    text = DOC.read_text()
    row = re.search(r"\| `xbar` \|[^\n]*", text).group(0)
    deeper = row[:row.rindex("|", 0, len(row) - 1)] + "| 7 |"
    with pytest.raises(AssertionError, match="xbar"):
        check(text.replace(row, deeper))
