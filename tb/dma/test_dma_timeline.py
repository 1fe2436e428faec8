"""``dma_timeline.py``: points checked before any work, bursts and milestones, one real run."""

import dma_timeline
import pytest


@pytest.mark.parametrize("figure, tokens, point", [
    ("single", ["size=4096"], {"figure": "single", "mode": "descriptor", "size": 4096}),
    ("start", [], {"figure": "start", "where": "local", "size": 8, "count": 1}),
    ("chain128", ["where=neighbour", "size=128"],
     {"figure": "chain128", "where": "neighbour", "size": 128, "count": 128}),
    ("halo", ["n=16", "plane=ik"], {"figure": "halo", "n": 16, "plane": "ik",
                                    "shape": "block-stride"}),
])
def test_points_with_their_defaults(figure, tokens, point):
    assert dma_timeline.parse_point(figure, tokens) == point


@pytest.mark.parametrize("figure, tokens, message", [
    ("chain", [], "unknown figure 'chain'"),
    ("single", [], "single needs size="),
    ("single", ["count=2", "size=8"], "'count=2': single takes mode=, size="),
    ("single", ["size"], "'size': single takes"),
    ("single", ["size=big"], "size=big: an integer"),
    ("single", ["size=0"], "size=0: at least 1"),
    ("single", ["size=8", "mode=dma"], "mode=dma: one of descriptor, register"),
    ("chain128", ["where=local", "size=65536", "count=128"], "at most 2097152"),
    ("halo", ["n=2", "plane=jk"], "n=2: 3 to 64"),
    ("scattered", ["size=8", "count=129"], "count=129: at most 128 scattered descriptors"),
])
def test_bad_points_refused_in_one_line(figure, tokens, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        dma_timeline.parse_point(figure, tokens)


def test_cli_refuses_before_simulating(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(dma_timeline, "run", lambda *a, **k: pytest.fail("simulated"))
    for argv in (["single"], ["single", "size=8", "--json", str(tmp_path / "no" / "t.json")]):
        with pytest.raises(SystemExit) as exc:
            dma_timeline.main(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "single needs size=" in err and "--json: no folder" in err


def test_bursts_split_where_a_cycle_is_skipped():
    assert dma_timeline.bursts([0, 4, 8, 16, 20, 40]) == [(0, 8, 3), (16, 20, 2), (40, 40, 1)]
    assert dma_timeline.bursts([]) == []


def _timeline(mode="descriptor"):
    """A hand-made local 512-byte transfer: a 32-byte descriptor fetch, two 256-byte
    completions, two writes."""
    return {"point": {"figure": "single", "mode": mode, "size": 512},
            "result": {"ns": 1900.0, "bytes": 512},
            "read_bytes": [32, 512],
            "tlps": {"N tx": [[150, 155, 0, 20], [820, 825, 0, 20],
                              [1700, 1770, 256, 280], [1770, 1840, 256, 280]],
                     "N rx": [[670, 683, 32, 52], [1340, 1409, 256, 276],
                              [1409, 1478, 256, 276]]},
            "beats": {}}


def test_milestones_skip_the_descriptor_fetch():
    got = dict(dma_timeline.milestones(_timeline()))
    assert got == {"kick to the first read request on the wire": 150,
                   "kick to the end of the first completion after the fetch": 1409,
                   "kick to the first write on the wire": 1700,
                   "that completion's end to the first write": 291,
                   "last completion's end to the last write landed": 422,
                   "kick to the last write landed (the point's time)": 1900.0}
    # Register mode fetches nothing: its first completion is data.
    got = dict(dma_timeline.milestones(_timeline("register")))
    assert got["kick to the end of the first completion after the fetch"] == 683


def test_a_4k_transfer_on_the_wire():
    """The real run: one 4 KiB descriptor, local.  After the 32-byte descriptor come sixteen
    256-byte completions and sixteen 256-byte writes; the point's time is the benchmark's."""
    timeline = dma_timeline.run(dma_timeline.parse_point("single", ["size=4096"]))
    rx, tx = timeline["tlps"]["N rx"], timeline["tlps"]["N tx"]
    assert [t[2] for t in rx] == [32] + [256] * 16
    assert [t[2] for t in tx if t[2]] == [256] * 16
    assert timeline["read_bytes"][0] == 32 and sum(timeline["read_bytes"][1:]) == 4096
    starts = [t[0] for t in rx + tx]
    assert min(starts) > 0 and max(t[1] for t in tx) <= timeline["result"]["ns"]
    assert timeline["result"]["bytes"] == 4096
