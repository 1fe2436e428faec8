"""Descriptors fetched in blocks (docs/dma.md): cocotb tests on one chip with its host.

Chains mix announced adjacent runs (``control.adj``) and scattered descriptors, 32- and
64-byte, placed so that runs cross 4 KiB pages and MRRS blocks and end in the middle of a
fetched block; the host model fails any read that crosses 4 KiB or exceeds MRRS.  Every byte of
host memory, every channel's status and counters are checked against the reference model
(:mod:`peach2.sim.reference.dma`, which follows runs as the engine does).
"""

import dataclasses
import random

import cocotb
from cocotbext.pcie.core.tlp import TlpType
from dma_tb import failed_spans, finish

from peach2.csr.regmap import DmaError
from peach2.dma import descriptor
from peach2.sim.driver import Chain, memcpy
from peach2.sim.harness.dma import DESC_AREA, DmaHarness, Job, src_arena
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()

N_CH = 4
PAGE = 4096


def _placement(rng, chain, base, limit, holes=True):
    """Place ``chain``'s descriptors from ``base`` (below ``limit``): runs of adjacent
    descriptors with holes between them, a run's start sometimes just before a 4 KiB page end;
    without ``holes``, one run from ``base``.  Return the addresses."""
    addrs, at, jumped = [], base, not holes
    for t in chain.transfers:
        if holes and rng.random() < 0.15:                # a hole: the run ends here
            at += 32 * rng.randrange(1, 8)
        if not jumped and rng.random() < 0.05:           # once: to a page end, less a few
            at, jumped = (at // PAGE + 1) * PAGE - 32 * rng.randrange(1, 6), True
        at += at % t.size                                # 64-byte ones are 64-byte aligned
        addrs.append(at)
        at += t.size
    assert at <= limit, "descriptor area too small"
    return chain.place(addrs)


def watch_reads(harness, node=0):
    """Return a list that collects ``(address, bytes)`` of every read node's host receives, in
    the order it receives them."""
    rc = harness.host(node).rc
    reads = []
    for ft in (TlpType.MEM_READ, TlpType.MEM_READ_64):
        handler = rc.rx_tlp_handler[ft]

        async def watched(tlp, handler=handler):
            reads.append((tlp.address, 4 * tlp.length))
            await handler(tlp)
        rc.rx_tlp_handler[ft] = watched
    return reads


def fetch_sizes(harness, reads, node=0):
    """The byte counts of the reads of node's descriptor area among ``reads``
    (:func:`watch_reads`)."""
    lo = harness.desc[node]
    return [n for address, n in reads if lo <= address < lo + DESC_AREA]


def _chain_job(harness, rng, node, ch, n, max_len, *, adjacent=True, scattered=False,
               holes=True, size=None):
    """A chain job of ``n`` random descriptors on ``ch``, placed as :func:`_placement` (or
    every one apart, ``scattered``), announcing its runs unless ``adjacent`` is false; its
    start announces (``CH_CTRL.adj``) all of the head's run, part of it or none.  Without
    ``holes``, one run (of ``size``-byte descriptors, if given) crossing a 4 KiB page."""
    dst, seq = harness.arenas(rng, N_CH, ch)
    src = src_arena(harness, node, rng, N_CH, ch)
    chain = Chain(ch, 0)
    # One size for the whole chain (long runs), or both (runs end where the size changes).
    size = size or rng.choice((32, 64, None))
    for _ in range(n):
        try:
            t = harness.random_transfer(rng, node, src, dst, max_len, seq_arena=seq)
        except MemoryError:
            break
        if size == 64 and not t.ext:
            t = dataclasses.replace(t, count=1)
        elif size == 32 and t.ext:
            t = memcpy(t.src, t.dst, t.length, irq=t.irq)
        chain.add(t)
    area = harness.desc[node] + (DESC_AREA // N_CH) * ch
    limit = area + DESC_AREA // N_CH
    if scattered:
        chain.place([area + 128 * i for i in range(len(chain))])
    else:
        start = 32 * rng.randrange(0, 64) if holes else PAGE - 64 * rng.randrange(1, 20)
        _placement(rng, chain, area + start, limit, holes)
    job = Job(node, ch, chain.transfers)
    job.images = chain.image(adjacent=adjacent)
    job.head = chain.head if adjacent else chain.pointer(0)
    job.adj = rng.choice((0, chain.announced, rng.randint(0, chain.announced)))
    return job


@cocotb.test()
async def fetch_chains(dut):
    """Random chains on all four channels at once: announced runs (crossing 4 KiB pages and
    MRRS blocks, ending mid-block), scattered descriptors, mixed sizes, runs not announced,
    long runs; each start announcing all, part or none of the head's run."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 21)
    drv = harness.drivers[0]
    reads = watch_reads(harness)
    loaded = 0
    for r in range(PARAMS.get("rounds", 3)):
        # MRRS 128 cuts fetches at 4 descriptors, 512 at 16.
        await drv.dma_config(mrrs=rng.choice((128, 256, 512)))
        jobs = []
        for ch in range(N_CH):
            mode = rng.choice(("runs", "runs", "scattered", "unannounced", "long"))
            jobs.append(_chain_job(harness, rng, 0, ch, rng.randrange(1, 70), 600,
                                   adjacent=mode != "unannounced",
                                   scattered=mode == "scattered", holes=mode != "long"))
        await harness.run_jobs(jobs)
        await harness.settle()
        finish(harness, jobs)
        loaded += sum(j.outcome.desc_done for j in jobs)
        dut._log.info("round %d: %s descriptors", r, [j.outcome.desc_done for j in jobs])
    # Runs were fetched in blocks (the host fails reads over MRRS or across 4 KiB).
    fetches = fetch_sizes(harness, reads)
    dut._log.info("%d descriptors in %d fetches (%d bytes at most)", loaded, len(fetches),
                  max(fetches))
    assert max(fetches) > 64 and len(fetches) < loaded, (len(fetches), loaded)
    await drv.dma_config()
    harness.check_hosts()


@cocotb.test()
async def fetch_order(dut):
    """A scattered chain: each descriptor's fetch goes to the host before the data reads of
    the one before it (``fwait``), so its completion does not queue behind that data."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 23)
    ch, n, length = rng.randrange(N_CH), 10, 512
    dst, _ = harness.arenas(rng, N_CH, ch)
    src = src_arena(harness, 0, rng, N_CH, ch)
    chain = Chain(ch, 0)
    for _ in range(n):
        chain.add(memcpy(src.alloc(length, align=64), harness.tca(0, dst[0].alloc(length)),
                         length))
    area = harness.desc[0] + (DESC_AREA // N_CH) * ch
    addrs = [area + 128 * i for i in range(n)]
    chain.place(addrs)
    job = Job(0, ch, chain.transfers)
    job.images = chain.image(adjacent=False)
    job.head = chain.pointer(0)
    reads = watch_reads(harness)
    await harness.run_jobs([job])
    await harness.settle()
    finish(harness, [job])
    order = []                  # ("F", k): descriptor k fetched; ("D", k): a data read of k
    for address, _ in reads:
        if address in addrs:
            order.append(("F", addrs.index(address)))
        else:
            k = [i for i, t in enumerate(chain.transfers)
                 if t.src <= address < t.src + length]
            assert len(k) == 1, hex(address)
            order.append(("D", k[0]))
    dut._log.info("host reads in order: %s", " ".join(f"{w}{k}" for w, k in order))
    assert sorted(k for w, k in order if w == "F") == list(range(n)), order
    for k in range(n - 1):
        assert order.index(("F", k + 1)) < order.index(("D", k)), (k, order)
    harness.check_hosts()


@cocotb.test()
async def fetch_start(dut):
    """What a start announces is fetched at once: 64 adjacent 8-byte descriptors from a 512-byte
    boundary, the start announcing 63 (``CH_CTRL.adj``): the first four host reads are the
    four 512-byte blocks, ahead of every data read; announcing only CH_HEAD[4:1]'s 15, a data
    read goes out before the second block (it waits for the head's own ``adj``)."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 24)
    ch = rng.randrange(N_CH)
    dst, _ = harness.arenas(rng, N_CH, ch)
    src = src_arena(harness, 0, rng, N_CH, ch)
    area = harness.desc[0] + (DESC_AREA // N_CH) * ch
    for adj, blocks_first in ((63, 4), (None, 1), (63, 4)):
        chain = Chain(ch, area)
        for _ in range(64):
            chain.add(memcpy(src.alloc(8), harness.tca(0, dst[0].alloc(8)), 8))
        job = Job(0, ch, chain.transfers)
        job.images, job.head = chain.image(), chain.head
        job.adj = adj if adj is not None else 0
        assert job.head & 0x1E == 15 << 1 and chain.announced == 63
        reads = watch_reads(harness)
        await harness.run_jobs([job])
        await harness.settle()
        finish(harness, [job])
        kinds = ["F" if area <= a < area + DESC_AREA // N_CH else "D" for a, _ in reads]
        dut._log.info("start announcing %s: host reads %s", job.adj, "".join(kinds[:24]))
        assert kinds[:blocks_first] == ["F"] * blocks_first, kinds[:8]
        assert kinds[blocks_first] == "D", kinds[:8]
        assert [n for a, n in reads if area <= a < area + 2048][:blocks_first] == \
            [512] * blocks_first
    harness.check_hosts()


@cocotb.test()
async def fetch_faults(dut):
    """A malformed descriptor in the middle of a fetched block, a wrong ``next`` inside an
    announced run (by a descriptor, or by the start's ``CH_CTRL.adj`` past CH_HEAD[4:1]'s
    15), ``end`` inside a run, a 64-byte head off its alignment: the right error at the right
    descriptor (or a clean end), the ones before it done, and the next start works."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 22)
    errors = []
    for how in ("magic", "next_in_run", "end_in_run", "head_align", "next_in_start_run"):
        ch = rng.randrange(N_CH)
        in_start = how == "next_in_start_run"
        job = _chain_job(harness, rng, 0, ch, 40, 300, holes=not in_start,
                         adjacent=not in_start, size=32 if in_start else None)
        chain_addrs = [a for a, _ in job.images]
        images = dict(job.images)
        adjs = [descriptor.unpack(images[a])["adj"] for a in chain_addrs]
        # A descriptor that announces a run (so the wrong next is inside one), mid-chain; or
        # (next_in_start_run: no descriptor announces) one inside what the start announces.
        if in_start:            # 40 adjacent, none announcing: the start announces 39
            job.adj = len(chain_addrs) - 1
            assert job.adj >= 38 and not any(adjs), (job.adj, adjs)
        picks = [i for i in range(2, len(chain_addrs) - 2) if adjs[i]] or [2]
        k = rng.choice(range(16, 38) if in_start else picks)
        a = chain_addrs[k]
        t = job.transfers[k]
        ext = len(images[a]) == 64
        f = dict(src=t.src, dst=t.dst, length=t.length, ext=ext, adj=adjs[k])
        if ext:
            f.update(count=t.count or 1, src_gap=t.src_gap, dst_gap=t.dst_gap)
        nxt = descriptor.unpack(images[a])["next"]
        if how == "magic":
            ctl = descriptor._control(ext=ext, adj=adjs[k], magic=0x5A)
            images[a] = descriptor.pack(**f, next=nxt, control=ctl)
        elif how in ("next_in_run", "next_in_start_run"):
            images[a] = descriptor.pack(**f, next=nxt + 0x1000)
        elif how == "end_in_run":
            images[a] = descriptor.pack(**f, end=True)
        else:                   # a 64-byte head at an address with bit 5 set
            job.head = (chain_addrs[0] & ~0x3F) | 0x21
        job.images = sorted(images.items())
        harness.plan(job)
        want_error = how != "end_in_run"
        assert (job.outcome.error != DmaError.NONE) == want_error, (how, job.outcome.error)
        await harness.run_jobs([job])
        await harness.settle()
        dut._log.info("%s at descriptor %d: %s", how, k, job.fault)
        finish(harness, [job], failed_spans(harness, job) if want_error else (), errors)
        again = _chain_job(harness, rng, 0, ch, 20, 300)
        await harness.run_jobs([again])
        await harness.settle()
        finish(harness, [again], errors=errors)
    harness.check_hosts()
    assert not errors, f"{len(errors)} failure(s):\n" + "\n".join(errors)
