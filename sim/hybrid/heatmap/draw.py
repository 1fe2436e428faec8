"""The heatmap of one traced run: every TCA cable direction and InfiniBand port (rows) against
time (columns), coloured by utilisation, under each node's phases.

::

    node 0  [== MPI ==][==== TCA ====]          one bar per node: its phases, coloured by
    ...                                         network (when the network switches)
    ------------------------------------------
    sub-cluster 0, group 0   0.E->1.W  ░░▓▓░░   TCA cables, both directions, by sub-cluster
                             ...                and group (cables between groups last)
    InfiniBand  HCA 0 ->sw   ▓▓░░░░░░           each HCA's link to the switch, both ways
                sw-> HCA 4   ▓▓░░░░░░
                             time (us) ->
"""

from pathlib import Path

__all__ = ["draw", "rows", "utilisation", "PHASE_COLOURS"]

#: Colour of a phase in the nodes' bars, by its kind.
PHASE_COLOURS = {"tca": "tab:blue", "mpi": "tab:orange", "overlap": "tab:purple"}
_KIND_TEXT = {"tca": "TCA", "mpi": "MPI (InfiniBand)", "overlap": "MPI and TCA at once"}


def utilisation(trace, link):
    """``link``'s utilisation per bin: bytes / (bin time x the link's rate)."""
    per_bin = trace["bin_ps"] * trace["bytes_per_s"] / 1e12
    return [b / per_bin for b in link["bytes"]]


def rows(heat):
    """The heatmap's rows in order: ``[(group label, link)]``: TCA cables by sub-cluster, then
    by group (a cable whose ends are in one group under it, the others after), then the
    InfiniBand ports (each HCA's uplink and downlink together)."""
    trace, group_of = heat["links"], heat["group_of"]
    out = []
    cables = [link for link in trace["links"] if link["kind"] == "tca"]
    for s in sorted({link["subcluster"] for link in cables}):
        mine = [link for link in cables if link["subcluster"] == s]
        ends = {id(link): [group_of[int(end.split(".")[0])] for end in link["name"].split("->")]
                for link in mine}
        for k in sorted({e[0] for e in ends.values() if e[0] == e[1]}):
            out += [(f"sub-cluster {s}, group {k}", link) for link in mine
                    if ends[id(link)] == [k, k]]
        out += [(f"sub-cluster {s}, between groups", link) for link in mine
                if ends[id(link)][0] != ends[id(link)][1]]
    ib = [link for link in trace["links"] if link["kind"] == "ib"]
    for g in sorted({link["port"] for link in ib}):
        out += [("InfiniBand", link) for link in ib if link["port"] == g]
    return out


def _label(link):
    if link["kind"] == "ib":
        return f"HCA {link['port']} > sw" if link["dir"] == "up" else f"sw > HCA {link['port']}"
    return link["name"].replace("->", " > ")


def draw(heat, path, title=None):
    """Draw ``heat`` (:func:`~.run.heat_run`'s result) to ``path`` (PNG); return the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    trace = heat["links"]
    order = rows(heat)
    nodes = len(heat["group_of"])
    bin_us = trace["bin_ps"] / 1e6
    span_us = trace["bins"] * bin_us
    grid = [utilisation(trace, link) for _, link in order]
    height = 1.3 + 0.14 * nodes + 0.13 * len(order)
    fig, (top, ax) = plt.subplots(2, 1, figsize=(10, height), sharex=True,
                                  gridspec_kw={"height_ratios": [0.14 * nodes + 0.3,
                                                                 0.13 * len(order)],
                                               "hspace": 0.06})
    # the nodes' phases
    start, kinds = heat["start_ps"], heat["phase_kinds"]
    for g in range(nodes):
        t0 = 0.0
        for i, kind in enumerate(kinds):
            end = heat["phase_ps"].get(f"{g}:{i}")
            if end is None:
                continue
            t1 = (end - start) / 1e6
            if t1 > t0:
                top.barh(g, t1 - t0, left=t0, height=0.7, color=PHASE_COLOURS[kind])
            t0 = t1
    top.set_yticks(range(nodes), [f"node {g}" for g in range(nodes)], fontsize=6)
    top.set_ylim(nodes - 0.5, -0.5)
    top.legend(handles=[Patch(color=PHASE_COLOURS[k], label=_KIND_TEXT[k])
                        for k in dict.fromkeys(kinds)],
               fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    top.set_title(title or heat.get("title", ""), fontsize=9)
    # the links
    image = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="YlOrRd", vmin=0,
                      vmax=1, extent=(0, span_us, len(order) - 0.5, -0.5))
    ax.set_yticks(range(len(order)), [_label(link) for _, link in order], fontsize=5.5)
    previous = None
    for r, (group, _) in enumerate(order):
        if group != previous:
            if r:
                ax.axhline(r - 0.5, color="black", linewidth=0.6)
            ax.text(1.01, r - 0.4, group.replace(", ", "\n"), transform=ax.get_yaxis_transform(),
                    fontsize=6.5, va="top")
            previous = group
    ends = sorted({(t - start) / 1e6 for t in heat["phase_ps"].values()})
    for i in range(len(kinds) - 1):             # when each phase is over on the last node
        last = max((t for k, t in heat["phase_ps"].items() if k.endswith(f":{i}")),
                   default=None)
        if last is not None:
            for a in (top, ax):
                a.axvline((last - start) / 1e6, color="black", linestyle="--", linewidth=0.7)
    ax.axvline(heat["time_ns"] / 1000, color="black", linewidth=0.9)
    ax.set_xlim(0, max(span_us, max(ends, default=0)))
    ax.set_xlabel(f"time from the start (us); bins of {bin_us * 1000:.0f} ns; solid line: the "
                  f"collective's end, dashed: the last node's end of a phase")
    bar = fig.colorbar(image, cax=ax.inset_axes([1.16, 0.0, 0.018, 1.0]))
    bar.set_label("utilisation (payload bytes / 4 GB/s)", fontsize=7)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path
