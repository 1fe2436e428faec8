"""The machine section of docs/benchmarks.md: simulation speed of the 64-node machine.

Rendered from ``docs/results/machine.json`` (:mod:`.speed` writes it): the runs' table, the
goals as ratios, the equality of one machine on 1 process and on N ranks, the window-edge
share and the projection for one rank per core, and a bar plot of chip-cycles per second.
"""

from .speed import RUNS, SHAPE, table

__all__ = ["PLOT", "section", "plot"]

PLOT = "machine_speed.png"


def plot(saved, path):
    """Chip-cycles per second, idle and under traffic, per run (bars)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..results import save_plot

    names = list(saved["runs"])
    runs = [saved["runs"][n] for n in names]
    x = range(len(names))
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    ax.bar([i - 0.2 for i in x], [r["idle_chip_cycles_per_s"] or 0 for r in runs], 0.4,
           label="idle", color="0.75")
    ax.bar([i + 0.2 for i in x], [r["chip_cycles_per_s"] for r in runs], 0.4,
           label="under traffic", color="0.25")
    ax.set_xticks(list(x), [f"{n}\n{r['chips']} chips, {r['ranks']} "
                            f"{'rank' if r['ranks'] == 1 else 'ranks'}"
                            for n, r in zip(names, runs)], fontsize=7)
    ax.set_ylabel("chip-cycles per wall second")
    ax.set_title(f"Simulation speed, sub-clusters of {SHAPE} on "
                 f"{saved.get('cores', '?')} cores")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_plot(fig, path, 100)
    plt.close(fig)


def section(saved, img, draw=True):
    """The section's ``(title, body)``; draws the plot under ``img`` when ``draw``."""
    if draw is True or (draw and PLOT in draw):
        plot(saved, img / PLOT)
    runs = saved["runs"]
    lines = [
        f"The machine with its sub-clusters ([machine](machine.md)): PEACH2 chips of {SHAPE} "
        "sub-clusters on Verilator, TCA all-to-all inside each, MPI all-to-all over the "
        f"InfiniBand switch across (seed {saved['traffic']['seed']}, TCA transfers up to "
        f"{saved['traffic']['tca_size']} B, MPI messages up to {saved['traffic']['mpi_size']} "
        f"B), after {saved['idle_windows']} windows of {saved['window_ps'] // 1000} ns with no "
        "traffic (the idle column). Runs: "
        + "; ".join(f"`{n}` {RUNS[n][0]} x {SHAPE} "
                    + (f"on `mpiexec -n {RUNS[n][1]}`" if RUNS[n][1] else "in one process")
                    for n in runs) + ". Cycles are 4 ns clock cycles of every chip at once; "
        "chip-cycles/s multiplies by the chips. Time at window edges: the largest share of a "
        "rank's traffic phase spent in the exchange, waiting for the slowest rank included.",
        "",
        table(saved),
        "",
    ]
    for label, verdict in saved["equal"].items():
        if verdict is not None:
            lines.append(f"- {label} on 1 process (or fewer ranks) and on more ranks: "
                         + ("the same bytes and times." if not verdict else
                            f"**differ** in {', '.join(verdict)}."))
    lines += [
        f"- One bare `alltoall` between two ranks here: {saved['bare_exchange_us']} us. "
        "With one rank per sub-cluster, each on its own core, a rank's window costs what the "
        "`sub` run took per window plus one exchange: about "
        f"{saved['projected_cycles_per_s_one_rank_per_core']} cycles/s for the whole machine "
        "on a cluster (a network adds microseconds per exchange, well under a window's "
        "milliseconds).",
        "",
        "Each ratio compares runs made one after the other; it holds only if nothing else "
        "took the cores meanwhile (the load column says how far that held). Two ranks pay "
        "off only with a free core each: a rank that reaches a window edge first waits there "
        "(Open MPI polls), so any other job on the machine slows every rank.",
        "",
        f"![simulation speed](img/{PLOT})",
    ]
    return "Machine: simulation speed of HA-PACS/TCA's 64 nodes", "\n".join(lines)
