"""Tables and plots of the DMA benchmarks (``tb/dma/dma_perf_tb.py``, ``figures``) for
``docs/benchmarks.md``.

The figures are those of 002 section 4.1: Figure 4 (128 chained transfers, in one node),
Figure 5 (one transfer, with and without a descriptor), Figure 6 (4 KiB transfers, chain length
varied), Figure 7 (128 chained transfers to the neighbour node), and block-stride against
contiguous transfers of the halo planes (000 section 4, 002 section 3.4).  The scattered rows
are Figure 7's chains with no two descriptors adjacent in host memory.
"""

from peach2.dma.descriptor import BASE_BYTES

from .dma_plan import SCATTER_STRIDE
from .results import save_plot

__all__ = ["dma_markdown", "print_dma", "scattered_rows", "PLOTS", "plot_files"]

#: The section's plots, by role, as file names under the image folder.
PLOTS = {"chain": "dma_chain128.png", "single": "dma_single_chain4k.png"}

GOAL_NEIGHBOUR = 0.97       # of the 3.66 GB/s bound, at 4 KiB and above (the design goal)
GOAL_LINKS = 0.97           # of the point's own lower bound (start + wire time), issue 32
LINK_BYTES_PER_NS = 4.0     # Gen2 x8: 5 GT/s x 8 lanes, 8b/10b
GOAL_HALO = 0.95            # block-stride against contiguous, bursts of 256 B or more
MPS = 256                   # the run's max payload size: completions and writes
FETCH_BLOCK = 512           # a descriptor block is one read request (max read request size)


def _pts(result, fig, **match):
    return [p for p in result["points"] if p["figure"] == fig
            and all(p.get(k) == v for k, v in match.items())]


def _size(n):
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def bound_ns(result, p):
    """The lower bound of a chain's time (ns) from measured figures and wire bytes only: the
    ``start`` point of the same path (one 8-byte descriptor: two host round trips, the
    pipelines, the cable and the drain, almost no wire time) plus the wire time of what the
    chain sends beyond it on its busiest direction of a link, each with the DLLPs (ACKs,
    flow-control updates) that direction carried meanwhile (a run saved before they were
    metered: without): the TLPs sent on the data's link from the first write on; the
    completions received on N after the first descriptor block, less what the start point
    leaves that side idle for between the end of that block and its data completion
    (``rx_window_ns``: later descriptor blocks, fetched at the kick, can arrive then), but
    no less than the data completions alone.  A run saved before descriptor completions
    were told apart: all of them after the first block, no idle time taken off.  None when
    the run has no ``start`` point."""
    start = _pts(result, "start", where=p.get("where", "local"))
    if not start or "rx_wire_after" not in p:
        return None
    s = start[0]

    def on(x, way):
        return x[f"{way}_wire_after"] + x.get(f"{way}_dllp_after", 0)
    rx = on(p, "rx") - on(s, "rx")
    if s.get("rx_window_ns") is not None and "rx_desc_after" in p:
        data = rx - (p["rx_desc_after"] - s["rx_desc_after"])
        rx = max(data, rx - s["rx_window_ns"] * LINK_BYTES_PER_NS)
    wire = max(rx, on(p, "tx") - on(s, "tx"))
    return s["ns"] + max(0, wire) / LINK_BYTES_PER_NS


def receive_ns(p):
    """What PCIe's receive rule (a TLP is used only once whole: its LCRC comes last) adds to
    :func:`bound_ns` for chain point ``p``, from wire bytes, against the start point's 8-byte
    chain: its first descriptor arrives in a completion of up to one block (``FETCH_BLOCK``,
    split at ``MPS``), not one descriptor's; its first write waits for a data completion of up
    to ``MPS`` bytes, not 8; and to the neighbour its last write is whole at the far chip before
    it goes on that chip's N (the completion and the write of a payload differ by their headers
    alone, so both count the payload beyond 8 bytes)."""
    first = min(MPS, FETCH_BLOCK, p["count"] * BASE_BYTES) - BASE_BYTES
    data = min(MPS, p["size"]) - 8
    waits = 2 if p.get("where") == "neighbour" else 1
    return (max(0, first) + waits * max(0, data)) / LINK_BYTES_PER_NS


def _of_bound(result, p):
    """``"| 7.21 + 0.12 us | 98.1%, 99.7% |"`` cells: the point's bound and what the receive rule
    adds (:func:`receive_ns`), its time against the bound without and with it."""
    b = bound_ns(result, p)
    if b is None:
        return "| - | - |"
    r = receive_ns(p)
    return (f"| {b / 1000:.2f} + {r / 1000:.2f} us | {100 * b / p['ns']:.1f}%, "
            f"{100 * (b + r) / p['ns']:.1f}% |")


def plot_files(img_dir):
    """``{role: path}`` of the section's plots under ``img_dir``."""
    return {role: img_dir / name for role, name in PLOTS.items()}


def _plot(result, img_dir, names=None):
    """Draw the plots of :data:`PLOTS` whose file name is in ``names`` (default: all)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bound = result["paper_bound_gbps"]
    files = plot_files(img_dir)
    names = set(PLOTS.values()) if names is None else set(names)
    if PLOTS["chain"] in names:
        _plot_chain(result, files["chain"], bound, plt)
    if PLOTS["single"] in names:
        _plot_single(result, files["single"], bound, plt)
    return files


def _plot_chain(result, path, bound, plt):
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for where, marker in (("local", "o"), ("neighbour", "s")):
        pts = _pts(result, "chain128", where=where)
        ax.plot([p["size"] for p in pts], [p["gbps"] for p in pts], marker=marker,
                label=f"{where} (Fig. {4 if where == 'local' else 7})")
    pts = _pts(result, "scattered")
    if pts:
        ax.plot([p["size"] for p in pts], [p["gbps"] for p in pts], marker="^",
                label="neighbour, descriptors scattered")
    local = _pts(result, "chain128", where="local")
    ax.plot([p["size"] for p in local], [p["port_bound_gbps"] for p in local], ":",
            color="grey", label="local bound with read requests on N")
    ax.axhline(bound, linestyle="--", color="black", label=f"bound {bound:.2f} GB/s")
    ax.set(xlabel="transfer size (bytes)", ylabel="GB/s",
           title="chained DMA transfers (002 Fig. 4, 7)")
    if local:
        ax.set_xscale("log", base=2)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_plot(fig, path, 100)
    plt.close(fig)


def _plot_single(result, path, bound, plt):
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for mode, marker in (("descriptor", "o"), ("register", "s")):
        pts = _pts(result, "single", mode=mode)
        a.plot([p["size"] for p in pts], [p["gbps"] for p in pts], marker=marker, label=mode)
    a.set(xlabel="transfer size (bytes)", ylabel="GB/s",
          title="one DMA transfer, local (002 Fig. 5)")
    if _pts(result, "single"):
        a.set_xscale("log", base=2)
    a.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=8)
    pts = _pts(result, "chain4k")
    b.plot([p["count"] for p in pts], [p["gbps"] for p in pts], marker="o")
    b.axhline(bound, linestyle="--", color="black")
    b.set(xlabel="4 KiB transfers in the chain", ylabel="GB/s",
          title="chain length, local (002 Fig. 6)")
    if pts:
        b.set_xscale("log", base=2)
    b.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_plot(fig, path, 100)
    plt.close(fig)


def scattered_rows(result):
    """Rows ``| size | chain | adjacent GB/s | scattered GB/s | scattered vs adjacent | of
    bound |`` of the scattered chains against the adjacent ones of the same size and count."""
    bound = result["paper_bound_gbps"]
    rows = []
    for p in _pts(result, "scattered"):
        adj = _pts(result, "chain128", where="neighbour", size=p["size"], count=p["count"])
        a = f"{adj[0]['gbps']:.3f}" if adj else "-"
        vs = f"{100 * (p['gbps'] / adj[0]['gbps'] - 1):+.0f}%" if adj else "-"
        rows.append(f"| {_size(p['size'])} | {p['count']} | {a} | {p['gbps']:.3f} | {vs} | "
                    f"{100 * p['gbps'] / bound:.1f}% |")
    return rows


def _scattered_text(result):
    rows = scattered_rows(result)
    if not rows:
        return ""
    return f"""
Scattered descriptors: the same chains to the neighbour with every descriptor
{SCATTER_STRIDE} bytes from the last in host memory, so no two are adjacent. Adjacent
descriptors (one after the other, as the driver model places a chain) are fetched in blocks of
up to one read request; scattered ones cost one host round trip each, so short transfers show
the gain of block fetch only when the chain is placed contiguously.

| size | chain | adjacent GB/s | scattered GB/s | scattered vs adjacent | of {bound_of(result)} |
| ---: | ---: | ---: | ---: | ---: | ---: |
{chr(10).join(rows)}
"""


def _links_text(result):
    """What the time bound is, and the points at or above :data:`GOAL_LINKS` of it."""
    starts = {p["where"]: p for p in _pts(result, "start")}
    if not starts:
        return ""
    shares = [(p, (bound_ns(result, p) + receive_ns(p)) / p["ns"])
              for fig in ("chain128", "chain4k")
              for p in _pts(result, fig) if bound_ns(result, p) is not None]
    low = [(p, share) for p, share in shares if share < GOAL_LINKS]
    names = ", ".join(f"{p['count']} x {_size(p['size'])} {p.get('where', 'local')} "
                      f"({100 * share:.1f}%)" for p, share in low)
    return (f"\"Time bound\": what the links allow, from measured figures and wire bytes only "
            "([dma](dma.md#what-the-links-allow)): one 8-byte descriptor on the same path "
            f"({starts['local']['ns']:.0f} ns local, {starts['neighbour']['ns']:.0f} ns to the "
            "neighbour: the start and the drain) plus the wire time, at 4 GB/s, of what the "
            "chain sends beyond it on its busiest direction (N's completions after the first "
            "descriptor block, less the time the start point's receive side waits for its "
            "data, which later blocks can fill, but no less than the data completions; or the "
            "TLPs on the data's link from the first write; each with the DLLPs, ACKs and "
            "flow-control updates, that direction carried meanwhile); then "
            "what "
            "PCIe's receive rule adds (a TLP is used only once whole: the first descriptor "
            "block's completion and the first data completion, and to the neighbour the last "
            "write at the far chip, against the start point's; the second percentage). "
            f"Goal: >= {100 * GOAL_LINKS:.0f}% of the bound with the receive rule. "
            + (f"Met at every point but {names}." if low else "Met at every point."))


def bound_of(result):
    """The paper's bound as the tables' column title shows it (``3.66``)."""
    return f"{result['paper_bound_gbps']:.2f}"


def dma_markdown(result, img_dir, draw=True):
    """Return the DMA section of ``docs/benchmarks.md`` as (title, body); (re)draw its plots
    under ``img_dir`` (:data:`PLOTS`): all with ``draw=True``, none with ``False``, or those
    whose file names ``draw`` lists.  The run's stamp is :mod:`peach2.sim.bench.doc`'s."""
    if draw:
        files = _plot(result, img_dir, None if draw is True else draw)
    else:
        files = plot_files(img_dir)
    bound = result["paper_bound_gbps"]
    lat = result["read_latency_ns"]
    rows = []
    for p in _pts(result, "chain128", where="local"):
        q = _pts(result, "chain128", where="neighbour", size=p["size"])[0]
        rows.append(f"| {_size(p['size'])} | {p['count']} | {p['gbps']:.3f} | "
                    f"{p['port_bound_gbps']:.3f} | {100 * p['gbps'] / p['port_bound_gbps']:.1f}% "
                    f"{_of_bound(result, p)} {q['gbps']:.3f} | {100 * q['gbps'] / bound:.1f}% "
                    f"{_of_bound(result, q)}")
    nb = [p for p in _pts(result, "chain128", where="neighbour") if p["size"] >= 4096]
    worst = min((p["gbps"] / bound for p in nb), default=0)
    verdict = (f"Met: at least {100 * worst:.1f}% of {bound:.2f} GB/s from 4 KiB."
               if worst >= GOAL_NEIGHBOUR else
               f"Not met: down to {100 * worst:.1f}% of {bound:.2f} GB/s at 4 KiB and above.")
    single = []
    for p in _pts(result, "single", mode="descriptor"):
        q = _pts(result, "single", mode="register", size=p["size"])[0]
        single.append(f"| {_size(p['size'])} | {p['ns']:.0f} | {p['gbps']:.3f} | {q['ns']:.0f} "
                      f"| {q['gbps']:.3f} | {100 * (q['gbps'] / p['gbps'] - 1):+.0f}% |")
    best = max((p["gbps"] for p in _pts(result, "chain4k")), default=1)
    chain = [f"| {p['count']} | {p['ns']:.0f} | {p['gbps']:.3f} | {100 * p['gbps'] / best:.0f}% "
             f"{_of_bound(result, p)}" for p in _pts(result, "chain4k")]
    halo = []
    for p in _pts(result, "halo", shape="block-stride"):
        q = _pts(result, "halo", shape="contiguous", n=p["n"], plane=p["plane"])[0]
        halo.append(f"| {p['n']} | {p['plane']} | {p['burst']} | {p['bytes']} | "
                    f"{p['gbps']:.3f} | {q['gbps']:.3f} | {100 * p['gbps'] / q['gbps']:.1f}% | "
                    f"{p['port_bound_gbps']:.3f} | {100 * p['gbps'] / p['port_bound_gbps']:.1f}% | "
                    f"{p.get('port_gbps', 0):.3f} |")
    wide = [p for p in _pts(result, "halo", shape="block-stride") if p["burst"] >= 256]
    worst_wide = min((p["gbps"] / _pts(result, "halo", shape="contiguous", n=p["n"],
                                       plane=p["plane"])[0]["gbps"] for p in wide), default=0)
    narrow = [p for p in _pts(result, "halo", shape="block-stride") if p["burst"] == 8]
    big = max(narrow, key=lambda p: p["n"]) if narrow else None
    halo_verdict = (
        f"Bursts of 256 B or more: at least {100 * worst_wide:.1f}% of contiguous "
        f"({'met' if worst_wide >= GOAL_HALO else 'not met'}). "
        + (f"8-byte strides, largest plane (N = {big['n']}, {big['bytes'] // 1024} KiB): "
           f"{100 * big['gbps'] / big['port_bound_gbps']:.1f}% of their wire bound from the "
           f"kick ({'met' if big['gbps'] >= GOAL_HALO * big['port_bound_gbps'] else 'not met'}), "
           f"{100 * big.get('port_gbps', 0) / big['port_bound_gbps']:.1f}% while E is busy."
           if big else ""))
    return "DMA (002 section 4.1, Figures 4-7)", f"""
Two chips cabled E - W, a host on each N (`tb/dma/dma_perf_tb.py`, test `figures`), each point
in its own simulation from reset (`peach2.sim.bench.dma_run`; the stamp names the simulator);
host memory reads are answered after **{lat:.0f} ns** plus the link (the root complex model's
`read_latency_ns`), completions the largest the 256-byte max payload size allows; DMA max
payload 256 B, max read request 512 B, 4-DW headers (host memory above 4 GiB), idle system.
As in the paper, time runs from the kick (the `CH_CTRL` write; descriptors or register slots are
written before) to the last write landing in destination memory, and completion is polled
(`CH_STATUS`, every 1 us). Bound: 4 GB/s x 256 / (256 + 16 + 2 + 4 + 1 + 1) = {bound:.2f} GB/s.
For local transfers the DMA's own read requests (24 wire bytes per 512 bytes read) share N's
transmit side with the writes; "N bound" is the wire bound of exactly the TLPs sent on N.

### 128 chained transfers (Figures 4 and 7)

Chains of up to {max(p["count"] for p in _pts(result, "chain128"))} transfers (the paper: 128),
shortened so that a point moves at most {max(p["bytes"] for p in _pts(result, "chain128")) //
1024} KiB (the chain column; simulation time).
Goal: >= 97% of {bound:.2f} GB/s at 4 KiB and above to the neighbour (PEACH2: 90% locally).
{verdict}

{_links_text(result)}

| size | chain | local GB/s | N bound | of N bound | local time bound | of it | neighbour GB/s | \
of {bound:.2f} | neighbour time bound | of it |
| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
{chr(10).join(rows)}
{_scattered_text(result)}
![128 chained transfers](img/{files['chain'].name})

### One transfer: descriptor against register mode (Figure 5), chain length (Figure 6)

A single local transfer started from a descriptor (fetched from host memory first) or from the
register-mode slots (002: up to +63% at 2 KB).

| size | descriptor ns | GB/s | register ns | GB/s | register vs descriptor |
| ---: | ---: | ---: | ---: | ---: | ---: |
{chr(10).join(single)}

4 KiB local transfers, chain length varied (PEACH2: 75-80% of the best at 4):

| chain | ns | GB/s | of best | time bound | of it |
| ---: | ---: | ---: | ---: | ---: | ---: |
{chr(10).join(chain)}

![single transfer and chain length](img/{files['single'].name})

### Halo planes: block-stride against contiguous

One descriptor per plane of an N^3 array of doubles, to the neighbour's array: block-stride
(jk: one block; ik: N bursts of N x 8 bytes; ij: N^2 bursts of 8 bytes) against one contiguous
descriptor of the same bytes. "E bound" is the wire bound of the writes sent on E (for 8-byte
bursts, 8 / (16 + 8 + 8) x 4 GB/s = 1.0 GB/s). Goals: >= 95% of contiguous with bursts of
256 B or more; 8-byte strides >= 95% of their own wire bound. "E while busy" is the writes'
throughput from the first to the last write on E: the kick-to-last-write figures also hold the
descriptor fetch and the first read (two host round trips), which a small plane cannot hide.
{halo_verdict}

| N | plane | burst (B) | bytes | block-stride GB/s | contiguous GB/s | of contiguous | E bound |\
 of E bound | E while busy |
| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
{chr(10).join(halo)}
"""


def print_dma(result, out=print):
    """Print the DMA points, one line each, then the scattered chains against the adjacent."""
    for p in result["points"]:
        keys = {k: v for k, v in p.items() if k not in ("figure", "read_latency_ns", "port",
                                                         "tlps", "desc_done")}
        out(p["figure"], " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                  for k, v in keys.items()))
    rows = scattered_rows(result)
    if rows:
        out(f"scattered descriptors ({SCATTER_STRIDE} bytes apart) against adjacent, to the "
            "neighbour:")
        out(f"| size | chain | adjacent GB/s | scattered GB/s | scattered vs adjacent | of "
            f"{bound_of(result)} |")
        for row in rows:
            out(row)
