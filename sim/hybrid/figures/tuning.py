"""The ``tuning`` section of ``docs/benchmarks.md``: issue 31's item 4 from the saved tuning
sweeps (``docs/results/tuning.json``, :func:`peach2.sim.hybrid.tuning.sweep.tuning_sweep`):
every network choice's time per size on each machine, the choice the table makes, and the
tuned network's measured time against the best fixed choice, at the sizes the table was built
from and at sizes between them.
"""

from pathlib import Path

from peach2.sim.run.provenance import run_sentence

from ..saved import tuning_runs
from ..tuning import fastest_times, table_rows
from .collectives import save_figure, size_text

__all__ = ["LIMIT", "MACHINES", "NOTES", "PLOT_MACHINES", "plot_name", "plot", "section",
           "pending_lines", "stamp_lines", "table_lines"]

#: The tuned network may be at most this much slower than the best fixed choice (issue 31).
LIMIT = 1.05

#: The tuning sweeps of the full run: ``(shape, subclusters, per_subcluster, collective,
#: options of python -m peach2.sim.hybrid.sweep)``, as the saved entries were measured: 000
#: Figure 11's virtual split of a 2x4 (8 nodes) and of a 2x8 (16 nodes, sizes capped: every
#: choice to 512 KiB on 16 nodes is hours of simulation; the Allgather measured densely around
#: MVAPICH2's 8 KB protocol step, where the best choice changes in a step), two 2x8s (32
#: nodes, every size in the table: the steps come at other sizes there) and four (64 nodes, the
#: whole machine, five sizes each, up to the 8-node curves' largest: one choice of 64 KiB
#: Allgather blocks there takes up to an hour, so these are measured a few sizes a command,
#: each merged into the entry, :func:`peach2.sim.hybrid.tuning.sweep.merge_tuning`).
MACHINES = (("2x4", 1, 2, "broadcast", ["--max-size", "131072"]),
            ("2x4", 1, 2, "allgather", []),
            ("2x8", 1, 2, "broadcast", ["--max-size", "131072"]),
            ("2x8", 1, 2, "allgather", ["--sizes", "16,128,1024,2048,4096,16384",
                                        "--checks", "64,512,1536,3072,8192"]),
            ("2x8", 2, 1, "broadcast", ["--sizes", "8,64,512,1024,2048,4096,8192,16384,32768"]),
            ("2x8", 2, 1, "allgather", ["--sizes", "16,64,128,512,1024,2048,4096"]),
            ("2x8", 4, 1, "broadcast", ["--sizes", "8,2048,32768,131072,524288"]),
            ("2x8", 4, 1, "allgather", ["--sizes", "16,512,4096,16384,65536"]))

#: ``(collective, nodes, groups)`` of :data:`MACHINES`, whose plots the section draws.
PLOT_MACHINES = (("broadcast", 8, 2), ("allgather", 8, 2), ("broadcast", 16, 2),
                 ("allgather", 16, 2), ("broadcast", 32, 2), ("allgather", 32, 2),
                 ("broadcast", 64, 4), ("allgather", 64, 4))


def plot_name(machine):
    """The plot of one machine's tuning sweep, a file name under the image folder."""
    return f"tuning_{machine['collective']}_{machine['nodes']}n{machine['groups']}g.png"


def plot(machine, path):
    """Time against size for every choice (log-log), the tuned runs as black dots; a choice cut
    short (``--cutoff``) as an open triangle at the time it was cut, in its line's colour: it
    takes longer than that, how much longer is not known."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    rows = machine["rows"]
    sizes = [r["size"] for r in rows]
    # Choices cut at one size share their time (the fastest's): spread their triangles a
    # little along x, so each shows (not joined to the line: the time is only a bound).
    cut_at = {r["size"]: sorted(r.get("over", {})) for r in rows}
    triangle = {"linestyle": "none", "marker": "^", "markersize": 6, "fillstyle": "none"}
    for net in machine["networks"]:
        pts = [(r["size"], r["times"][net] / 1000) for r in rows if net in r["times"]]
        cut = [r for r in rows if net in cut_at[r["size"]]]
        if not pts and not cut:
            continue
        line, = ax.plot(*(zip(*pts) if pts else ([], [])), marker=".", linewidth=1, label=net)
        for r in cut:
            here = cut_at[r["size"]]
            x = r["size"] * 2 ** (0.12 * (here.index(net) - (len(here) - 1) / 2))
            ax.plot([x], [r["over"][net] / 1000], color=line.get_color(), **triangle)
    if any(cut_at.values()):
        ax.plot([], [], color="grey", label="cut short: longer than this", **triangle)
    ax.plot(sizes, [r["tuned_ns"] / 1000 for r in rows], "ko", markersize=4, fillstyle="none",
            label="tuned (its own run)")
    ax.set(xscale="log", yscale="log", xlabel="bytes" if machine["collective"] == "broadcast"
           else "block per node (bytes)", ylabel="time (us)",
           title=f"{machine['collective'].capitalize()}, {machine['nodes']} nodes, "
                 f"{machine['groups']} TCA groups")
    ax.set_xscale("log", base=2)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def stamp_lines(machine):
    """A "Measured by" line per run of ``machine``'s tuning entry (each run's commit counts for
    the section's stale mark: :mod:`peach2.sim.bench.staleness` reads them), naming the sizes
    it measured when the entry has more than one."""
    runs = tuning_runs(machine)
    out = []
    for i, run in enumerate(runs):
        run = run or {}
        sizes = sorted({x["size"] for x in machine.get("times", []) + machine["rows"]
                        if x.get("run", 0) == i})
        what = f": {', '.join(map(size_text, sizes))}" if len(runs) > 1 else ""
        out.append(run_sentence(run, details=[f"{run.get('seconds', '?')} s"]) + f"{what}.")
    return out


def pending_lines(machine):
    """A line naming the sizes of ``machine`` whose choices are not all measured yet (no row,
    not in the table: :func:`peach2.sim.hybrid.tuning.sweep.merge_tuning`), and which are."""
    out, fastest_at = [], fastest_times(machine.get("times", ()))
    for size in machine.get("pending", ()):
        here = [t for t in machine["times"] if t["size"] == size]
        fastest = fastest_at.get(size, float("inf"))
        again = [t["network"] for t in here if t.get("over_ns", fastest) < fastest]
        have = [t["network"] for t in here]
        out.append(f"{size_text(size)}: {len(here)} of {len(machine['networks'])} choices "
                   f"measured so far ({', '.join(f'`{n}`' for n in have)})" +
                   (f"; cut short below the fastest there now, to run again: "
                    f"{', '.join(f'`{n}`' for n in again)}." if again else "."))
    return [f"Pending, not in the table yet: {' '.join(out)}", ""] if out else []


def table_lines(machine):
    """Markdown lines of one tuning sweep (:func:`~peach2.sim.hybrid.tuning.sweep.tuning_sweep`):
    every network's time per size (us; * marks a size the table was not built from; "> t": cut
    short after t, slower than the best), the best, the tuned choice and its time against the
    best."""
    nets = machine["networks"]
    out = ["| size | " + " | ".join(f"`{n}`" for n in nets) + " | best | tuned | tuned / best |",
           "| ---: |" + " ---: |" * len(nets) + " --- | --- | ---: |"]
    for r in machine["rows"]:
        over = r.get("over", {})
        cells = " | ".join(f"{r['times'][n] / 1000:.1f}" if n in r["times"] else
                           f"> {over[n] / 1000:.1f}" if n in over else "-" for n in nets)
        out.append(f"| {size_text(r['size'])}{' *' if r['check'] else ''} | {cells} | "
                   f"`{r['best']}` | `{r['tuned']}` | {r['ratio']:.3f} |")
    return out


#: What the saved sweeps show (written from them; the tables above each hold the figures).
NOTES = """
**What each option gains** (one 2x4 and one 2x8 split in two groups, 000 Figure 11's machine):

- **`+ring` is the hybrid Allgather's best TCA part wherever the hybrid wins with more than a
  few bytes**: 8 nodes, 16 B to 32 KiB blocks, up to 1.14x faster than recursive doubling (32
  KiB: 135.8 against 154.2 us); 16 nodes, 2-8 KiB, up to 1.35x (8 KiB: 88.0 against 119.0),
  where recursive doubling puts up to four flows on a ring cable. It moves the size from which
  MPI alone is faster from 16 KiB to 64 KiB on 8 nodes (000: "slower from 64 KB") and from
  512 B (never ahead again without it) to 16 KiB on 16 nodes (000: from 32 KB). Below that the
  ring's extra step costs more than it saves on 16 nodes (16 B: 17.1 against 16.3 us).
- **`+staged` removes MVAPICH2's protocol-switch dips**: the hybrid's own MPI step, sent from
  GPU0 by GPUDirect RDMA across QPI up to 8 KB, is what makes the hybrid slower than MPI alone
  at 512 B-2 KiB (Allgather, 8 nodes) and 2-8 KiB (Broadcast); staged through host memory, as
  MPI alone is, it is even with or ahead of MPI alone there (Allgather 2 KiB: 36.0 against
  37.2 us with `+ring+staged`; Broadcast 8 KiB: 37.9 against 42.8 on 8 nodes, 44.9 against
  50.8 on 16). Below those sizes the two `cudaMemcpy` (7.8 us each) cost more than GPUDirect
  saves, so the tables keep the plain hybrid.
- **`+hopsH`, the per-step choice by hop count, pays only with staging and only for the
  Broadcast on 16 nodes**: `+hops1+staged` or `+hops2+staged` is the best Broadcast at 2-4 KiB
  and 32-64 KiB there (32 KiB: 80.1 against the plain hybrid's 82.3 and MPI alone's 84.5; 64
  KiB: 127.6 against 136.6 and 129.3): its
  leaders' staged step carries the data to more nodes at InfiniBand's rate, and the TCA tree
  that is left is shorter. Alone it never wins: a TCA hop costs 0.4 us, an MPI step several.
- **MPI alone is best for large messages** (Broadcast from 32 KiB on 8 nodes and at 128 KiB on
  16, 218.9 against 222.7 us for `+hops1+staged`; Allgather 64 KiB blocks on 8 and 16 KiB on
  16): staged through host memory it runs the InfiniBand link at full rate, where the hybrid's
  TCA part is bound by PEACH2's 2.8 GB/s GPU reads.
- **The tuned network stays within 5 % of the best fixed choice on every machine**, at the sizes
  the table was built from and those between them (not above them: on 64 nodes, below). The
  16-node Allgather needed the sizes around MVAPICH2's 8 KB protocol step measured densely:
  between 1 KiB blocks (MPI alone best when first measured: the hybrid's 8 KiB message still
  goes GPUDirect across QPI) and 4 KiB (`+ring` best) the choice changes in a step, not
  gradually, and a table from 1 KiB and 4 KiB alone took MPI alone at 2 KiB, 10 % slower than
  `+ring` (1.103); with 2 KiB in the table and 1.5 and 3 KiB checked, it takes the best choice
  at every size but the 512 B check (1.007: `+hops2+staged`, the 1 KiB choice since the
  cut-through transmitters, 40.2 against MPI alone's 40.4 us, where `+hops1+staged` is 0.2 us
  faster). The 8-node Broadcast's worst is 1.044 (16 KiB, between 8 and 32 KiB).
- **A table does not carry to a machine twice the size**: 2 sub-clusters of 2x8 (32 nodes, 2
  groups) have no row of their own, so `tuned` takes the 16-node rows there. Measured later at
  09402a2 (`python -m peach2.sim.hybrid.launch --shape 2x8 --subclusters 2 --gpu-read 2.8e9
  --run broadcast:tuned:8,64,512,2048,8192,32768,131072 --run
  allgather:tuned:16,128,1024,4096,16384`) against the better of MPI alone and the hybrid at
  the same sizes (the hybrid section's 32-node rows, the only choices measured there): within
  1.3% at 9 of the 12 sizes (at 4 KiB blocks its `+ring` Allgather beats both, 0.987), but
  1.154 at the 2 KiB Broadcast (`+hops1+staged`: on 32 nodes its groups of two need 16
  leaders; MPI alone is best), 1.123 at 128 B Allgather blocks (the hybrid, whose TCA part
  among 16 nodes takes a step more than among 8; MPI alone is best) and 1.069 at 1 KiB (MPI
  alone; the hybrid is best, its last step now 16 KiB, above the 8 KB that GPUDirect takes
  across QPI on 16 nodes). So every machine needs its own sweep, as MVAPICH2 tunes per process
  count.
- **32 nodes have their own rows now** (2 x 2x8, two groups: every choice at every size, the
  tables above). A first sweep built them from the usual sizes and checked between them: 1.116
  at the 16 KiB Broadcast and 1.898 at 512 B Allgather blocks, where the hybrid's own MPI step
  meets MVAPICH2's protocol steps (a 16-block Allgather step of 512 B blocks is an 8 KiB
  message, GPUDirect across QPI; a Broadcast's 8 KiB goes that way, 16 KiB through the host
  pipeline), so its time jumps between two sizes and a table that has not seen the size in
  between cannot know. Built from every size measured, the table takes the best choice at each:
  on 32 nodes the plain hybrid up to 512 B and at 16 KiB, MPI alone at 1-4 KiB, `+staged` at
  8 KiB (50.4 against MPI alone's 51.1 us), `+hops2+staged` at 32 KiB (94.9 against 98.9); the
  Allgather's hybrid at 16-64 B and 1 KiB blocks, MPI alone at 128 B, `+hops1+staged` at 512 B
  (level with MPI alone, 43.3 us), `+ring` at 2-4 KiB. Its worst, 1.006 at 16 B blocks, is the
  best choice itself run again (`tuned` runs in a simulation of its own, after other runs).
- **64 nodes, the whole machine** (4 x 2x8, four groups; Allgather blocks of 16 B-64 KiB,
  Broadcasts of 8 B-512 KiB, five sizes each: one choice of 64 KiB blocks takes up to an hour
  of simulation, so these were measured a choice or two a command and merged). Up to 16 KiB
  blocks and at every Broadcast size the hybrid does not win: MPI alone is the best choice for
  the 8 B and 2 KiB Broadcast (22.1 and 31.7 us; the plain hybrid 23.6 and 58.0) and for 16 B
  and 16 KiB Allgather blocks (28.7 and 485.3 us; 30.2 and 586.0); at 512 B and 4 KiB blocks
  and the 32 KiB Broadcast the staged hybrid is level with it (`+hops1+staged` 55.3 against
  55.3 us and 155.8 against 156.8; `+staged` 111.8 against 113.3). From 128 KiB the Broadcast
  is MPI alone's (299.1 us at 128 KiB, `+hops1+staged` 308.6; 877.4 us at 512 KiB, the plain
  hybrid 1238.4, every other choice cut short at MPI alone's time, `--cutoff`). Unstaged, the
  farther TCA steps sent over MPI cost most: `+hops1` takes 830 us for the 32 KiB Broadcast
  (`+hops2` 682; 669 on 32 nodes), MPI alone 113. **At 64 KiB blocks the hybrid wins, along
  the rings**: `+ring` 1375.6 us against MPI alone's 1802.5 (0.763), where recursive doubling
  over a whole 2x8 puts up to four flows on a ring cable (the plain hybrid 1683.0, `+hops2`
  1521.6, `+hops1` 1541.6: sending the far steps over InfiniBand instead helps, but less than
  not sharing the cables). Staged, every hybrid loses there (`+staged` 2364.1,
  `+ring+staged` 2063.3, `+hops2+staged` 1876.6, `+hops1+staged` 1817.7): its MPI steps
  move 1-2 MiB a rank through two `cudaMemcpy`. So the 64-node table takes MPI alone at 16
  KiB and `+ring` from 32 KiB (half-way in log scale), which no size between them checks.
  `tuned` takes the best at every measured size (at most 1.003). Between the sizes the table
  is not checked, and on 32 nodes a table from too few sizes missed MVAPICH2's protocol steps
  by up to 1.9x, so sizes between these may be far from the best.
"""


def section(saved, img, draw=True):
    """``(title, body)``; draws each machine's plot under ``img`` when ``draw`` (True, or a
    list of file names to draw)."""
    lines = [
        "",
        "Issue 31's item 4 on the co-simulated machine: every network a collective can take "
        "there ([hybrid](hybrid.md#options-and-the-tuned-choice-beyond-the-paper): MPI alone, "
        "the hybrid, with its MPI steps staged through host memory (`+staged`), its TCA "
        "Allgather along the rings (`+ring`), its farther TCA steps sent over MPI (`+hopsH`)), "
        "at the sweep's sizes; the table built from them (`peach2.sim.hybrid.tuning`); and "
        "network `tuned`, run with that table in its own simulation, at the same sizes and at "
        "sizes between them (marked *) that the table was not built from. Time in us from the "
        "common start to the last node's end, every GPU's bytes checked; `> t`: a choice cut "
        "short (`--cutoff`) once it took longer than the fastest, t (in the plots, an open "
        "triangle at t).",
        "",
    ]
    worst = []
    # By machine size, Broadcast before Allgather (the saved entries are in the order their
    # last runs came).
    machines = sorted(saved["machines"], key=lambda m: (m["nodes"], m["groups"],
                                                        m["collective"] != "broadcast"))
    for machine in machines:
        name = plot_name(machine)
        if draw is True or (draw and name in draw):
            plot(machine, Path(img) / name)
        bad = max(machine["rows"], key=lambda r: r["ratio"], default=None)
        if bad is not None:
            worst.append((bad["ratio"], machine, bad))
        lines += [f"### {machine['collective'].capitalize()}, {machine['nodes']} nodes in "
                  f"{machine['groups']} TCA groups ({machine['subclusters']} x "
                  f"{machine['shape']}{', split' if machine['per_subcluster'] > 1 else ''})",
                  "", *stamp_lines(machine),
                  "", f"![tuning](img/{name})", "", *table_lines(machine), "",
                  *([f"Tuned against the best fixed choice: at most {bad['ratio']:.3f} "
                     f"(at {size_text(bad['size'])}).", ""] if bad is not None else []),
                  *pending_lines(machine)]
    if worst:
        ratio, machine, row = max(worst, key=lambda w: w[0])
        held = "holds" if ratio <= LIMIT else "does not hold"
        lines[3:3] = [f"**Never slower than the best fixed choice by more than "
                      f"{LIMIT - 1:.0%}: {held}** (worst {ratio:.3f}: "
                      f"{machine['collective']} of {size_text(row['size'])} on "
                      f"{machine['nodes']} nodes).", ""]
        table = {}
        for m in machines:
            table.update(m["table"])
        lines += ["### The tables", "", *table_rows(table), "", NOTES.strip(), ""]
    return "Tuned choice of network (beyond the paper)", "\n".join(lines)
