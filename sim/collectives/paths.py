"""How a step's transfers leave a node: CPU stores, inline puts, register mode or a chained DMA.

002 section 4.2 ends on the choice this module makes (in translation): "a few bytes by PIO,
small data under a few KB by DMA set up in registers without descriptors, and so an optimal
low-latency communication for every size".  PEACH2 has a fourth path today, inline puts
(docs/put.md):

- ``"pio"``: the node's CPU stores each transfer through the TCA BAR (one store of at most
  :data:`PIO_MAX` bytes, inside one 8-byte word), then stores its completion word; posted writes
  on one path stay in order, so the flag lands behind the data.  The model charges a CPU
  nothing for a store (each is one TLP queued at once), which is only true of a single store:
  longer PIO would need write-combining and a fence whose cost the model does not know, so
  the path stops at one store, the "few bytes" of 002;
- ``"inline"``: the transfer cut into inline puts of up to 32 bytes (and at 4 KiB destination
  pages), its completion write on the last;
- ``"register"``: the step's transfers (at most :data:`~peach2.params.N_DMA_SLOTS`) in the
  channel's register-mode slots, started by one ``CH_CTRL`` write: no descriptor fetch (002
  section 3.4);
- ``"dma"``: the step's chain of descriptors in host memory (the papers' way).

PIO and inline puts need the bytes in the CPU's hands: one burst (no block-stride) from the
node's own host memory.  :func:`step_path` gives the path of a step under :func:`run`'s
``paths``: one of the four for every step (raising when a step cannot take it), or ``"auto"``,
by size from the measured times of each path (:data:`INLINE_MAX`; docs/benchmarks.md,
"Calibration", "Paths by size").
"""

from peach2.params import N_DMA_SLOTS
from peach2.put.descriptor import DATA_BYTES

__all__ = ["PATHS", "PIO_MAX", "INLINE_MAX", "SENDERS", "step_path", "unusable", "send_pio",
           "send_inline"]

#: :func:`run`'s ``paths``: ``"dma"`` (every step a chained DMA, the default), ``"auto"`` (by
#: size, :func:`step_path`), or one path forced for every step.
PATHS = ("dma", "auto", "pio", "inline", "register")

#: Most bytes a transfer may have to go by PIO: one 64-bit store of the CPU.
PIO_MAX = 8

#: Largest step (bytes, all its transfers) sent as inline puts by ``"auto"``; larger ones go in
#: register mode.  From the calibrated sub-cluster's kick-to-flag times (docs/benchmarks.md,
#: "Paths by size"): n puts of 32 bytes, a completion write on the last only, land after about
#: 853 + 24 (n - 1) ns; register mode after about 1.3 us for 8 bytes, 2.0 us for 1 KiB, then
#: 0.28 us a KiB (3.66 GB/s): puts are ahead at 1536 bytes (2003 against 2105 ns), register mode
#: at 2 KiB (2245 against 2387); the lines cross near 1.75 KiB.
INLINE_MAX = 1536

_STORE = 8          # bytes a PIO store may not cross (one aligned 64-bit word)


def _cpu_has(mem, node, step):
    """Why ``node``'s CPU cannot send ``step``'s bytes itself, or None."""
    base, region = mem.region(node, "host")
    for t in step.transfers:
        if (t.count or 1) != 1:
            return "a block-stride transfer"
        if not base <= t.src <= base + len(region) - t.length:
            return f"a source at {t.src:#x} outside node {node}'s host memory"
    return None


def unusable(mem, node, step, path):
    """Why ``step`` of ``node`` cannot take ``path``, or None when it can."""
    if path == "dma":
        return None
    if path == "register":
        n = len(step.transfers)
        return None if n <= N_DMA_SLOTS else f"{n} transfers (register mode has {N_DMA_SLOTS} " \
                                              "slots)"
    if path not in ("pio", "inline"):
        raise ValueError(f"no path {path!r}; paths are {PATHS}")
    why = _cpu_has(mem, node, step)
    if why or path == "inline":
        return why
    if any(t.irq for t in step.transfers):
        return "an interrupt asked for (a CPU store raises none)"
    for t in step.transfers:
        if t.length > PIO_MAX or t.dst // _STORE != (t.dst + t.length - 1) // _STORE:
            return f"{t.length} bytes at {t.dst:#x}: not one {PIO_MAX}-byte store"
    return None


def step_path(mem, node, step, paths="auto"):
    """The path ``step`` of ``node`` takes under ``paths`` (:data:`PATHS`).

    ``"auto"``: PIO when every transfer is one store, else inline puts when the step moves at most
    :data:`INLINE_MAX` bytes and the CPU has them, else register mode when the slots hold the
    step, else the chained DMA.  A forced path a step cannot take raises ``ValueError`` saying
    why."""
    if paths not in PATHS:
        raise ValueError(f"paths must be one of {PATHS}, not {paths!r}")
    if paths != "auto":
        why = unusable(mem, node, step, paths)
        if why:
            raise ValueError(f"node {node}: a step cannot go by {paths}: {why}")
        return paths
    if unusable(mem, node, step, "pio") is None:
        return "pio"
    if sum(t.length for t in step.transfers) <= INLINE_MAX \
            and unusable(mem, node, step, "inline") is None:
        return "inline"
    return "register" if unusable(mem, node, step, "register") is None else "dma"


def _flag(t):
    return t.seq_value.to_bytes(4, "little")


def _source(mem, node, t):
    """The bytes transfer ``t`` moves, as ``node``'s CPU reads them from its host memory."""
    base, region = mem.region(node, "host")
    return bytes(region[t.src - base:t.src - base + t.length])


async def send_pio(mem, node, step):
    """Store ``step``'s transfers from ``node``'s CPU through the TCA BAR, each followed by its
    completion word (posted writes on one path land in order)."""
    drv = mem.cluster.drivers[node]
    tca = mem.amap.tca_base
    for t in step.transfers:
        await drv.tca_bar.write(t.dst - tca, _source(mem, node, t))
        if t.seq_addr is not None:
            await drv.tca_bar.write(t.seq_addr - tca, _flag(t))


async def send_inline(mem, node, step):
    """Send ``step``'s transfers as inline puts: each cut at 32 bytes and at 4 KiB destination
    pages, its completion write on its last put (behind the data on the same path)."""
    drv = mem.cluster.drivers[node]
    slot = 0
    for t in step.transfers:
        data = _source(mem, node, t)
        at = 0
        while at < t.length:
            dst = t.dst + at
            n = min(DATA_BYTES, t.length - at, 4096 - dst % 4096)
            last = at + n == t.length
            await drv.put(dst, data[at:at + n], seq_addr=t.seq_addr if last else None,
                          seq_value=t.seq_value, irq=t.irq and last, slot=slot)
            slot = (slot + 1) % 64
            at += n


#: The paths a node's CPU sends itself (no DMA channel), by name.
SENDERS = {"pio": send_pio, "inline": send_inline}
