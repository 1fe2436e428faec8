"""The collectives section of docs/benchmarks.md, its plots, and the simple model beside them.

The measurement is ``tb/collectives/bench_collectives.py``; this module is what it and the
package's document builder (:mod:`peach2.sim.bench.doc`) share.

Model ("steps x (latency + size / bandwidth)"): ``L`` is the measured time of an
8-byte put with completion write to the neighbour on the same calibrated sub-cluster (hard-IP
pipeline of ``peach2.sim.pcie.calibration``), ``h`` the measured time per extra hop, ``B`` the wire
bound of DMA writes to a neighbour: 256-byte payloads with 4-DW headers, ``256 / (256 + 16 +
8) * 4 GB/s`` = 3.657 GB/s (docs/dma.md).

- Broadcast: ``log2(p) * (L + size / B)`` plus ``h`` per extra hop of the sends of the slowest
  chain of steps (on the 2x8 a step's send can be 4 hops);
- Allgather: ``log2(p) * L + (p - 1) * size / B`` (the size doubles each step) plus the extra
  hops of every step;
- halo exchange: ``L + bytes one node sends / B`` (a node's one chain sends its planes back to
  back: the next descriptor is fetched while the current one runs, so the latency is paid
  once);
- collision: two senders share the receiver's N link, so together at most ``B``.
"""

import json

from peach2.sim.run import ROOT

from .results import save_plot, stamp

IMG = ROOT / "docs" / "img"
#: The section's plot, a file name under the image folder.
PLOT = "coll_times.png"
B_WIRE = 256 / (256 + 16 + 8) * 4.0        # GB/s = bytes per ns
PAPER_HOP_US = (0.3, 0.4)                  # 000 section 5.4
ALLGATHER_TOTAL = 1 << 20                  # the full run's largest gathered size


def hop_fit(hops_rows):
    """``(L, h)``: the 1-hop time and the least-squares time per extra hop (ns)."""
    by = {}
    for r in hops_rows:
        by.setdefault(r["hops"], []).append(r["ns"])
    mean = {k: sum(v) / len(v) for k, v in sorted(by.items())}
    ks = sorted(mean)
    if len(ks) < 2:
        return mean.get(1), None
    mk, mt = sum(ks) / len(ks), sum(mean.values()) / len(ks)
    h = sum((k - mk) * (mean[k] - mt) for k in ks) / sum((k - mk) ** 2 for k in ks)
    return mean.get(1), h


def _steps(p):
    return p.bit_length() - 1


def model_bcast(p, size, L, h, extra_hops=0):
    return _steps(p) * (L + size / B_WIRE) + extra_hops * h


def model_allgather(p, size, L, h, extra_hops=0):
    return _steps(p) * L + (p - 1) * size / B_WIRE + extra_hops * h


def _calibration(saved):
    rows = (saved.get("16") or {}).get("hops") or (saved.get("8") or {}).get("hops") or []
    return hop_fit(rows)


def _size(n):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def _extra_hops(nodes, kind):
    """Extra hops (beyond one per step) on the critical path with the ranks on nodes 0..p-1 of
    the 2x4 / 2x8 (shortest paths of the safe routes, from the runs' hop table)."""
    # Binomial broadcast from 0 on 2xK: step 1 crosses S (1 hop), step 2 goes K/2 along the
    # ring, then K/4 ...; recursive doubling partners are r xor 2^s: the same distances.
    k = nodes // 2
    dist, d = [1], k // 2
    while d >= 1:
        dist.append(d)
        d //= 2
    return sum(x - 1 for x in dist)


def _rows_sizes(res, kind, L, h):
    p = res["nodes"]
    model = model_bcast if kind == "bcast" else model_allgather
    extra = _extra_hops(p, kind)
    ring = {r["bytes"]: r["ns"] for r in res.get("ring", [])} if kind == "allgather" else {}
    out = []
    for r in res.get(kind, []):
        m = model(p, r["bytes"], L, h, extra) if L and h is not None else None
        moved = r["bytes"] if kind == "bcast" else r["bytes"] * p
        row = (f"| {_size(r['bytes'])} | {_size(moved)} | {r['ns'] / 1000:.2f} | "
               + (f"{m / 1000:.2f} | {r['ns'] / m:.2f} |" if m else "- | - |"))
        if ring:
            t = ring.get(r["bytes"])
            row += f" {t / 1000:.2f} | {r['ns'] / t:.2f} |" if t else " - | - |"
        out.append(row)
    return out


def _ring_text(saved):
    """What the saved ring Allgather rows show against recursive doubling (a sentence each
    node count), or nothing without them."""
    out = []
    for n in ("8", "16"):
        res = saved.get(n) or {}
        ring = {r["bytes"]: r["ns"] for r in res.get("ring", [])}
        rd = {r["bytes"]: r["ns"] for r in res.get("allgather", [])}
        both = sorted(set(ring) & set(rd))
        if not both:
            continue
        big = both[-1]
        ahead = [b for b in both if ring[b] < rd[b]]
        first = next((b for b in both if all(x in ahead for x in both if x >= b)), None)
        where = ("at every size" if first == both[0] else
                 f"from {_size(first)} blocks on" if first else "at no size")
        out.append(f"on {n} nodes ({res['topology']}) it is ahead {where}, "
                   f"{rd[big] / ring[big]:.2f} times faster at {_size(big)} "
                   f"({ring[big] / 1000:.1f} against {rd[big] / 1000:.1f} us) and "
                   f"{rd[both[0]] / ring[both[0]]:.2f} times at {_size(both[0])}")
    if not out:
        return ""
    return ("  The ring Allgather (`ring_allgather`, the `ring` columns: both ways round each "
            "ring one hop a step, then between the rings, so one flow per link): "
            + "; ".join(out) + ".")


def summary(results, heading="collectives"):
    """Printed lines of the main figures of ``results`` (keyed by node count, ``"8"``,
    ``"16"``) under ``heading``; what ``results`` does not hold is left out, so a run prints
    what it measured and nothing else."""
    L, h = _calibration(results)
    lines = [f"{heading}:"]
    if L is not None:
        lines.append(f"  1-hop put {round(L)} ns"
                     + (f", per extra hop {round(h)} ns (000: 300-400 ns)" if h is not None
                        else ""))
    for n in ("8", "16"):
        res = results.get(n) or {}
        for kind in ("bcast", "allgather", "ring"):
            if res.get(kind):
                pts = ", ".join(f"{_size(r['bytes'])} {r['ns'] / 1000:.2f} us" for r in res[kind])
                lines.append(f"  {n} nodes {kind}: {pts}")
        for kind in ("halo", "collision"):
            if res.get(kind):
                lines.append(f"  {n} nodes {kind}: {len(res[kind])} rows")
        if res.get("small"):
            pts = ", ".join(f"{r['collective']} {r['paths']} {r['ns'] / 1000:.2f} us"
                            for r in res["small"])
            lines.append(f"  {n} nodes small (8 B): {pts}")
    if len(lines) == 1:
        lines.append("  nothing")
    return "\n".join(lines)


def plot(saved, path):
    """Broadcast and Allgather time vs size (8 and 16 nodes) with the model; halo vs N."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    L, h = _calibration(saved)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, kind, title in ((axes[0], "bcast", "Broadcast"), (axes[1], "allgather",
                                                                "Allgather (block per node)")):
        for n, style in (("8", "o-"), ("16", "s-")):
            res = saved.get(n)
            if not res or not res.get(kind):
                continue
            xs = [r["bytes"] for r in res[kind]]
            ax.plot(xs, [r["ns"] / 1000 for r in res[kind]], style, label=f"{n} nodes")
            if kind == "allgather" and res.get("ring"):
                ax.plot([r["bytes"] for r in res["ring"]], [r["ns"] / 1000 for r in res["ring"]],
                        style[0] + ":", label=f"{n} nodes, ring")
            if L and h is not None:
                model = model_bcast if kind == "bcast" else model_allgather
                ax.plot(xs, [model(int(n), x, L, h, _extra_hops(int(n), kind)) / 1000
                             for x in xs], "--", color="grey", lw=0.8)
        ax.set(xscale="log", yscale="log", xlabel="bytes", ylabel="time (us)",
               title=title + " (dashed: model)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    halo = (saved.get("8") or {}).get("halo", [])
    for order, style in (("pairwise", "o-"), ("naive", "x--")):
        rows = [r for r in halo if r["order"] == order]
        if rows:
            axes[2].plot([r["n"] for r in rows], [r["ns"] / 1000 for r in rows], style,
                         label=order)
    axes[2].set(xlabel="N (array N^3, 2x4 grid)", ylabel="time (us)", title="Halo exchange")
    axes[2].grid(True, alpha=0.3)
    axes[2].legend()
    fig.tight_layout()
    save_plot(fig, path, 90)
    plt.close(fig)
    return path


#: Goals of the 8-byte collectives on 16 nodes (sub-microsecond puts): Broadcast, Allgather (us).
SMALL_GOALS = {"bcast": 4.5, "allgather": 5.0}
_SMALL_NAMES = {"bcast": "Broadcast, binomial tree", "direct_bcast": "Broadcast, one step",
                "allgather": "Allgather, recursive doubling",
                "direct_allgather": "Allgather, one step"}


_PATH_TITLES = {"dma": "chained DMAs", "register": "register mode", "inline": "inline puts",
                "pio": "CPU stores", "auto": "by size (auto)"}


def _small_rows(saved):
    """The small-message table: each collective by each path measured (``run(paths=...)``)."""
    out = []
    for n in ("8", "16"):
        rows = (saved.get(n) or {}).get("small") or []
        if not rows:
            continue
        by = {(r["collective"], r["bytes"], r["paths"]): r["ns"] for r in rows}
        paths = [p for p in _PATH_TITLES if any(k[2] == p for k in by)]
        out += [f"### Small messages, {n} nodes: by path", "",
                "Each step as its chained DMA (`paths=\"dma\"`, the papers' way), as inline puts "
                "([put](put.md)), or by size (`paths=\"auto\"`: the CPU's stores where a step is "
                "one 8-byte store, inline puts up to 1536 bytes a step, register mode up to four "
                "transfers, the chain above; [collectives](collectives.md#small-messages-the-path-"
                "by-size-and-one-step-instead-of-log2p)); `direct_*`: the same collective in one "
                "step (us).", "",
                "| collective | size | " + " | ".join(_PATH_TITLES[p] for p in paths)
                + " | DMA / best | goal (us) |",
                "| --- | ---: | " + " | ".join("---:" for _ in paths) + " | ---: | --- |"]
        for (kind, size) in sorted({(k, b) for k, b, _ in by}, key=lambda x: (
                list(_SMALL_NAMES).index(x[0]), x[1])):
            times = {p: by.get((kind, size, p)) for p in paths}
            goal = SMALL_GOALS.get(kind.replace("direct_", "")) if n == "16" else None
            best = min(t for (k, b, _), t in by.items()
                       if b == size and k.replace("direct_", "") == kind.replace("direct_", ""))
            mine = min(t for t in times.values() if t)
            mark = ""
            if goal and kind.startswith("direct_"):
                mark = f"{goal}: {'met' if best / 1000 <= goal else 'NOT met'} (the best row)"
            dma = times.get("dma")
            out.append(f"| {_SMALL_NAMES[kind]} | {_size(size)} | "
                       + " | ".join(f"{t / 1000:.2f}" if t else "-" for t in times.values())
                       + " | " + (f"{dma / mine:.2f}" if dma else "-") + f" | {mark} |")
        out.append("")
    return out


def section(saved, img=None, draw=True):
    """``(title, body)`` of the section for :mod:`peach2.sim.bench.doc`; with ``draw`` (True, or
    file names that include :data:`PLOT`), (re)draw the plot into ``img`` (default :data:`IMG`)."""
    L, h = _calibration(saved)
    image = (img or IMG) / PLOT
    if draw is True or (draw and PLOT in draw):
        plot(saved, image)
    out = ["", "Collectives of `peach2.sim.collectives.algorithms` / `peach2.sim.collectives.halo` "
           "([collectives](collectives.md)) on the HDL sub-cluster (Verilator, cable credits "
           "of the cable model's defaults, calibrated hard-IP pipeline "
           f"{(saved.get('16') or saved.get('8') or {}).get('pipeline_ns')} ns). Time: from "
           "every node's start (one instant) to the last node seeing its last completion "
           "write; every result was checked byte for byte. Model: `peach2.sim.bench.collectives_doc` docstring "
           f"(L = {L and round(L)} ns, h = {h and round(h)} ns per extra hop, "
           f"B = {B_WIRE:.3f} GB/s).", "", f"![collectives](img/{image.name})",
           ""]
    # The parts measured by one run share one line (a run of one node count stamps every kind
    # of its rows): "8 nodes, allgather", "8 nodes, bcast" -> "8 nodes (allgather, bcast)".
    by_run = {}
    for what, run in sorted((saved.get("parts") or {}).items()):
        by_run.setdefault(json.dumps(run, sort_keys=True), (run, []))[1].append(what)
    for run, whats in by_run.values():
        heads = {}
        for what in whats:
            head, _, kind = what.partition(", ")
            heads.setdefault(head, []).append(kind)
        named = "; ".join(f"{head} ({', '.join(k for k in kinds if k)})" if any(kinds) else head
                          for head, kinds in heads.items())
        out += [f"Rows of {named} from another run than the section's: {stamp(run)}", ""]
    for n in ("8", "16"):
        rows = (saved.get(n) or {}).get("allgather") or []
        if rows and max(r["bytes"] for r in rows) * int(n) < ALLGATHER_TOTAL:
            out += [f"The {n}-node Allgather stops at {_size(max(r['bytes'] for r in rows))} "
                    f"blocks: its run did not reach {_size(ALLGATHER_TOTAL)} gathered (see "
                    "the known problem in [collectives](collectives.md)).", ""]
    hops = (saved.get("16") or {}).get("hops")
    if hops:
        rows = sorted({r["hops"] for r in hops})
        means = [sum(r["ns"] for r in hops if r["hops"] == k)
                 / sum(1 for r in hops if r["hops"] == k) for k in rows]
        out += ["### Latency per hop (8-byte put + completion write from node 0, 2x8)", "",
                "| hops | " + " | ".join(map(str, rows)) + " |",
                "| --- |" + " ---: |" * len(rows),
                "| ns (mean) | " + " | ".join(f"{m:.0f}" for m in means) + " |", "",
                f"Time per extra hop: **{h:.0f} ns** (least squares) against 000's 0.3-0.4 us "
                "(section 5.4).", ""]
    for kind, title in (("bcast", "Broadcast (root 0, binomial tree, one chained DMA per "
                                  "forwarding node)"),
                        ("allgather", "Allgather (recursive doubling)")):
        for n in ("8", "16"):
            res = saved.get(n)
            if not res or not res.get(kind):
                continue
            ring = kind == "allgather" and res.get("ring")
            out += [f"### {title}, {n} nodes ({res['topology']})", "",
                    "| size | per node received | time (us) | model (us) | time / model |"
                    + (" ring (us) | time / ring |" if ring else ""),
                    "| ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if ring else ""),
                    *_rows_sizes(res, kind, L, h), ""]
    out += _small_rows(saved)
    halo = (saved.get("8") or {}).get("halo", [])
    if halo:
        out += ["### Halo exchange, N^3 array of 8-byte elements on a 2x4 process grid (8 nodes)",
                "", "| N | jk plane (block) | ik plane (block-stride) | pairwise (us) | "
                "naive order (us) | model (us) |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for n in sorted({r["n"] for r in halo}):
            by = {r["order"]: r for r in halo if r["n"] == n}
            r = by.get("pairwise") or by.get("naive")
            sent = r["jk_bytes"] + 2 * r["ik_bytes"]    # an inner node: one i, two j planes
            m = L + sent / B_WIRE if L else None
            out.append(f"| {n} | {_size(r['jk_bytes'])} | {_size(r['ik_bytes'])} | "
                       + " | ".join(f"{by[o]['ns'] / 1000:.2f}" if o in by else "-"
                                    for o in ("pairwise", "naive"))
                       + (f" | {m / 1000:.2f} |" if m else " | - |"))
        out.append("")
    coll = (saved.get("8") or {}).get("collision", [])
    if coll:
        out += ["### Collision: two senders into one receiver at once (8 nodes)", "",
                "| size per sender | alone (us) | each, together (us) | alone GB/s | "
                "each GB/s | total GB/s | bound (GB/s) |",
                "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in coll:
            each, size = r["each_ns"], r["bytes"]
            times = " / ".join(f"{t / 1000:.2f}" for t in each)
            rates = " / ".join(f"{size / t:.3f}" for t in each)
            out.append(f"| {_size(size)} | {r['alone_ns'] / 1000:.2f} | {times} | "
                       f"{size / r['alone_ns']:.3f} | {rates} | {2 * size / max(each):.3f} | "
                       f"{B_WIRE:.3f} |")
        out.append("")
    out += ["Where the time goes: a step of an 8-byte collective costs about one put latency "
            "L (the CPU's start, the descriptor fetch and the data read from host memory, "
            "the write and its completion write through the hard IPs, about 1.8 us), and "
            "large sizes run at the wire bound: Broadcast of 1 MiB is within 0.2 % of "
            "`log2(p) * size / B`.  The Allgather's middle step on the 2x4 exchanges "
            "between nodes two apart on a ring of four, so two flows share each ring link "
            "in each direction: that step runs at half the link and the 4 KiB and 32 KiB "
            "points take 1.3 and 1.5 times the model; on the 2x8 the steps between nodes two "
            "and four apart on a ring of eight put two and four flows on a ring link, and "
            "the Allgathers from 32 KiB blocks take 2.2 times the model (the model counts "
            "one flow per link)." + _ring_text(saved) + "  The halo exchange is one chain "
            "per node; at N = 128 the naive order (a node at the edge of the grid starts "
            "its j planes early and meets a neighbour's) is 12 % slower than the pairwise "
            "order.  Two senders into one receiver split its N link evenly; together they "
            "reach 98.5 % of the bound at 256 KiB each.", "",
            "000 (Figures 12-15) plots Broadcast and Allgather of its TCA+InfiniBand hybrid "
            "against MVAPICH2-GDR on 8 and 16 nodes; the figures' values are not in its text, "
            "which gives: Broadcast up to 21 % (8 nodes) and 14 % (16 nodes) faster than "
            "MVAPICH2-GDR, Allgather up to 46 % and 40 %, TCA ahead up to 512 KB (Broadcast, "
            "8 nodes) and 32 KB / 16 KB (Allgather), 0.3-0.4 us per extra hop. Its step 1 "
            "(Broadcast) and last step (Allgather) cross InfiniBand; here every step is TCA "
            "on one sub-cluster, so the curves are the TCA side alone."]
    return "Collectives: Broadcast, Allgather, halo exchange (000 sections 5.3-5.5)", \
        "\n".join(out)
