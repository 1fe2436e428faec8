"""Tuning runs cut short: a choice only has to be known slower than the fastest at a size, not
how much slower, so each network runs in simulations of its own and a run is cut once it takes
longer than the fastest time known there (issue 31's item 4; at 64 nodes the slowest choices
take hours otherwise)."""

from ..launch import run

__all__ = ["cut_runs", "time_of"]


def time_of(r):
    """A tuning time of one fixed network's run: ``time_ns``, or ``over_ns`` if it was cut."""
    got = {"over_ns": r["over_ns"]} if r.get("cut") else {"time_ns": r["time_ns"]}
    return {"network": r["network"], "size": r["size"], **got}


def cut_runs(shape, subclusters, collective, networks, sizes, best, kw):
    """Each of ``networks`` at ``sizes`` in simulations of its own, every run cut short once it
    takes longer than the fastest time known at its size (``best``, ``{size: ns}``, and the
    runs before it); after a cut run, the network's sizes left run in a new simulation.
    ``kw`` goes to :func:`~peach2.sim.hybrid.launch.run`.  Returns the times
    (:func:`time_of`) and the MPI preset."""
    best, fresh, preset = dict(best), [], None
    for network in networks:
        left = list(sizes)
        while left:
            got = run(shape, subclusters, [{"collective": collective, "network": network,
                                            "sizes": left,
                                            "limits_ns": [best.get(s) for s in left]}], **kw)
            preset, done = got["preset"], got["runs"]
            if not done:
                raise RuntimeError(f"{collective} {network}: a simulation ran none of {left}")
            for r in done:
                fresh.append(time_of(r))
                if not r["cut"]:
                    best[r["size"]] = min(best.get(r["size"], r["time_ns"]), r["time_ns"])
            left = left[len(done):]
    return fresh, preset
