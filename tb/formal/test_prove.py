"""``peach2 prove``: every catalogued property proves (or stays bounded) as stated, a broken
property fails with a waveform, and the command checks its options (``docs/verification.md``).

Properties marked slow in the catalogue run under ``-m slow``; a failing property leaves its
SymbiYosys folder and counterexample under the test's temporary folder.
"""

import dataclasses

import pytest

from peach2.cli import main
from peach2.sim.formal import BLOCKS, properties_of, run_property
from peach2.sim.formal.blocks.linkstate import linkstate_at

#: The parent of the LinkState reset fix (its linkstate.py holds every port for HOLD cycles).
BEFORE_FIX = "6551fc4"


def _expected(prop):
    return "proved" if prop.mode == "prove" else "bounded"


def _params(slow):
    return [pytest.param(p, id=p.label, marks=[pytest.mark.slow] if p.slow else [])
            for p in properties_of() if p.slow == slow]


@pytest.mark.parametrize("prop", _params(False) + _params(True))
def test_property(prop, tmp_path):
    result = run_property(prop, tmp_path)
    assert result.status == _expected(prop), result.line()


def _one(block, name):
    return next(p for p in BLOCKS[block] if p.name == name)


@pytest.mark.parametrize("block, name, mutant, depth", [
    ("slice", "order", "lose_skid", 8),         # the tracker counts a refused beat as taken
    ("fifo", "bound", "small", 6),              # a bound one entry below the queue's depth
    ("egress", "translate", "no_offset", 1),    # a reference that forgets the offset
    pytest.param("ingress_e", "route", "strict", 6,     # a reference with < at the upper bound
                 marks=pytest.mark.slow),
    ("crossbar", "packet", "no_lock", 6),       # a crossbar that never locks to a packet
    ("buffer", "queued", "late_count", 6),      # a queued reference one cycle early
    pytest.param("dma", "tags", "blind_tag", 15,        # a planner blind to one outstanding
                 marks=pytest.mark.slow),               # read (fails at cycle 14, 21 s)
    ("receiver", "accept", "stale_window", 12),  # the window of reads a cycle late
])
def test_broken_property_fails_with_waveform(block, name, mutant, depth, tmp_path):
    prop = dataclasses.replace(_one(block, name), mode="bmc", depth=depth)
    result = run_property(prop, tmp_path, mutant=mutant)
    assert result.status == "failed", result.line()
    assert result.trace == tmp_path / block / f"{name}.vcd" and result.trace.stat().st_size
    gtkw = result.gtkw.read_text()
    assert str(result.trace.resolve()) in gtkw and "top." in gtkw
    assert "assertion at" in result.where


def test_linkstate_before_the_reset_fix_fails(tmp_path):
    """Before the fix, a port held itself dropping for HOLD cycles after every reset, so an
    answer to a request on N could be discarded long after N had nothing queued."""
    old = linkstate_at(BEFORE_FIX)
    if old is None:
        pytest.skip(f"git history without {BEFORE_FIX}")
    prop = dataclasses.replace(_one("linkstate", "answered"), mode="bmc", depth=6,
                               kwargs={"block_class": old})
    result = run_property(prop, tmp_path)
    assert result.status == "failed", result.line()
    assert result.trace.exists()


def test_receiver_with_timeout_release_accepts_a_released_read(tmp_path):
    """Known gap: when the writer frees a read on its timeout (not after ``done``), a
    completion of that read already inside the receiver's pipeline is still accepted after the
    release (the read's rows are free then; the next read's own data overwrites them)."""
    prop = dataclasses.replace(_one("receiver", "accept"), mode="bmc", depth=8,
                               kwargs={"n_tags": 4, "rows": 64, "timeout": True})
    result = run_property(prop, tmp_path)
    assert result.status == "failed", result.line()


def test_command_reports_each_property(tmp_path, capsys):
    assert main(["prove", "egress", "linkstate", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out] == [
        "egress.translate: proved", "linkstate.answered: proved"]


def test_command_checks_options_first(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["prove", "nosuch"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown block 'nosuch'" in err[0]
    with pytest.raises(SystemExit):
        main(["prove", "egress", "-p", "nosuch"])
    assert "no property 'nosuch'" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["prove", "egress", "-o", str(blocker / "out")]) == 4
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("file/*"))


def test_list(capsys):
    assert main(["prove", "--list", "ingress_e"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ingress_e.route: k-induction, depth 6")
