"""cocotb tests of the DMA controller (002 section 3.4, 000 sections 2.2-2.3; docs/dma.md).

::

    Host 0 (RC) --Gen2 x8-- N  chip 0  E ==Gen2 x8== W  chip 1  N --Gen2 x8-- Host 1 (RC)
     src, descriptors,        DMA x4 channels             DMA x4 channels     src, descriptors,
     window memory            (reads via N, writes        (...)               window memory
                               routed N/E)

Built by :class:`peach2.sim.harness.dma.DmaHarness` on :class:`peach2.sim.hdl.chips_top.Chips` ``(n)`` (one or two
chips).  Every model runs strict with seeded random RX idles and TX backpressure; every byte of
every host window is compared with the reference model's shadow (so bytes outside the destinations
are checked untouched), every channel's ``CH_DESC_DONE``/``CH_BYTES``/error with the model's, MSIs
per descriptor with ``irq``, completion writes landing after their data.

Two-chip tests: ``random_chains`` (random lengths, alignments, block-stride, register mode, all
channels of both nodes at once, local and remote), ``halo_planes`` (jk/ik/ij of N^3 arrays both
ways).  One-chip tests: ``completions`` (splits at 64/128 B, out of order across tags, 2 us
latency), ``host_faults``, ``descriptor_faults``, ``abort_and_busy``, ``abort_after_start``, ``prefetch_race`` (the
next descriptor's fetch landing on every cycle around the close of the current one).  Parameters in
``PEACH2_PARAMS``: ``rounds``, ``max_len``, ``ns``.
"""

import os
import random

import cocotb
from cocotb.triggers import ClockCycles, Timer
from dma_trace import TRACE_ENV

from peach2.csr.regmap import DmaError
from peach2.dma import descriptor
from peach2.sim.driver import PLANES, Chain, halo_transfer, memcpy
from peach2.sim.harness.dma import DmaHarness, Job, ctrl_offset, src_arena
from peach2.sim.reference import dma as dma_model
from peach2.sim.run import HandshakeProbe, run_inputs

PARAMS, SEED = run_inputs()

N_CH = 4


# TRACE_ENV set to a file name: ``halo_planes`` records there the time of every beat of each
# chip's DMA streams ``o_rd``, ``o_wr`` and ``i_cpl`` (``tb/dma/dma_trace.py`` compares them).


def dma_trace_probe(dut, n_chips):
    """Return a started :class:`HandshakeProbe` of every chip's DMA streams if ``TRACE_ENV`` is
    set, else ``None``."""
    if not os.environ.get(TRACE_ENV):
        return None
    probe = HandshakeProbe(dut.clk)
    for c in range(n_chips):
        dma = getattr(dut, f"c{c}").dma
        for member in ("o_rd", "o_wr", "i_cpl"):
            probe.add_stream(f"c{c}.{member}", dma, member)
    probe.start()
    return probe


def random_jobs(harness, rng, max_len, nodes=None, channels=range(N_CH), reg_share=0.3):
    """One random job per (node, channel): a chain of 1-5 descriptors or 1-4 register slots."""
    jobs = []
    nodes = range(harness.n_nodes) if nodes is None else nodes
    share = harness.n_nodes * N_CH
    for node in nodes:
        for ch in channels:
            dst, seq = harness.arenas(rng, share, node * N_CH + ch)
            src = src_arena(harness, node, rng, N_CH, ch)
            reg = rng.random() < reg_share
            ts = []
            for _ in range(rng.randint(1, 4 if reg else 5)):
                try:
                    ts.append(harness.random_transfer(rng, node, src, dst, max_len,
                                                    seq_arena=seq))
                except MemoryError:
                    break
            if not ts:
                ts = [memcpy(src.alloc(16), harness.tca(node, dst[node].alloc(16)), 16)]
            jobs.append(Job(node, ch, ts, reg=reg))
    return jobs


def finish(harness, jobs, dont_care=(), errors=None):
    """Check memory and every job's registers; with ``errors`` (a list) record failures there
    and go on instead of raising."""
    if not dont_care:           # failed_spans took the snapshot before its own changes
        harness.snapshot()
    harness.apply([w for j in jobs for w in j.outcome.writes if j.outcome.error == DmaError.NONE])
    checks = [lambda: harness.check_memory(dont_care, jobs)] + \
        [lambda j=j: harness.check_job(j) for j in jobs]
    for check in checks:
        try:
            check()
        except AssertionError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
            harness.dut._log.error("%s", exc)


def contested(jobs):
    """Bytes that more than one of ``jobs`` write, with different data: ``[(tca, 1, [each
    writer's byte])]``.  The halo planes of one array share their edges (the jk, ik and ij
    planes at index 0 meet on three lines), and concurrent channels give no order between
    their writes, so such a byte may hold any writer's value."""
    values = {}
    for job in jobs:
        final = {}                      # one channel's own writes: the later one wins
        for tca, data in job.outcome.writes:
            for i, b in enumerate(data):
                final[tca + i] = b
        for tca, b in final.items():
            values.setdefault(tca, []).append(b)
    return [(tca, 1, [bytes([b]) for b in bs]) for tca, bs in sorted(values.items())
            if len(set(bs)) > 1]


def failed_spans(harness, job, done=None):
    """Apply the writes of the ``done`` descriptors a failed job completed (default: as many
    as the channel reports done) to the shadow; return ``(tca, n, new bytes)`` of the bursts
    after them, which may or may not have been written (only those inside a host window)."""
    harness.snapshot()
    if done is None:
        done = job.fault.desc_done if job.fault is not None else job.outcome.desc_done
        done = min(done, len(job.transfers))
    read = harness.read_src(job.node)
    spans = []
    for k, t in enumerate(job.transfers):
        for s, d, n in dma_model.bursts(t):
            if k < done:
                harness.apply([(d, read(s, n))])
            elif harness.in_window(d, n):
                spans.append((d, n, read(s, n)))
        if k < done:
            f = t if isinstance(t, dict) else t.fields()
            if f["seq"]:
                harness.apply([(f["seq_addr"], f["seq_value"].to_bytes(4, "little"))])
    return spans


@cocotb.test()
async def random_chains(dut):
    """Random chains and register-mode jobs on all channels of both nodes at once."""
    harness = DmaHarness(dut, 2)
    await harness.start()
    rng = random.Random(SEED + 2)
    max_len = PARAMS.get("max_len", 1 << 14)
    for r in range(PARAMS.get("rounds", 2)):
        jobs = random_jobs(harness, rng, max_len)
        msi_before = [dict(harness.msi_counts(n)) for n in range(2)]
        await harness.run_jobs(jobs)
        await harness.settle()
        finish(harness, jobs)
        for node in range(2):
            want = dict(msi_before[node])
            for j in jobs:
                if j.node == node and j.outcome.irqs:
                    v = 2 * j.channel + 1 + node
                    want[v] = want.get(v, 0) + j.outcome.irqs
            assert harness.msi_counts(node) == want, (node, harness.msi_counts(node), want)
        total = sum(j.outcome.bytes for j in jobs)
        dut._log.info("round %d: %d jobs, %d descriptors, %d bytes, %d completion writes",
                      r, len(jobs), sum(j.outcome.desc_done for j in jobs), total,
                      sum(len(j.outcome.seq_writes) for j in jobs))
    assert not any(harness.seq_waits), "completion writes that never arrived"
    harness.check_hosts()


@cocotb.test()
async def halo_planes(dut):
    """Halo exchange of N^3 arrays both ways: jk block, ik block-stride, ij 8-byte stride."""
    harness = DmaHarness(dut, 2)
    await harness.start()
    trace = dma_trace_probe(dut, 2)
    for n in PARAMS.get("ns", [3, 8, 16]):
        size = n ** 3 * 8
        space = 1 << max(18, (2 * size + 4096).bit_length())
        jobs = []
        for node in (0, 1):
            other = 1 - node
            src = harness.src[node][0] + 4096
            arrays = {d: harness.tca(d, 0x10000 + space * node) for d in (0, 1)}
            for ch, plane in enumerate(PLANES):
                t = halo_transfer(n, plane, src, arrays[other], n - 2, 0)
                jobs.append(Job(node, ch, [t]))
            # channel 3: gather the ij plane into a packed buffer of the node's own window
            packed = harness.tca(node, 0x10000 + space * node + size + 64)
            seq = (harness.tca(node, harness.amap.host_size - 64 + 16 * node), n)
            jobs.append(Job(node, 3, [halo_transfer(n, "ij", src, packed, 1, packed_dst=True,
                                                    seq=seq, irq=True)]))
        await harness.run_jobs(jobs)
        await harness.settle()
        harness.snapshot()
        shared = contested(jobs)
        finish(harness, jobs, dont_care=shared)
        dut._log.info("N=%d: %d planes of %d bytes each way; %d bytes written by two or three "
                      "planes", n, 4, n * n * 8, len(shared))
    if trace:
        trace.stop()
        trace.save(os.environ[TRACE_ENV])
    harness.check_hosts()


@cocotb.test()
async def completions(dut):
    """Completions split at 64 and 128 bytes, out of order across tags, 2 us read latency."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    host = harness.host(0)
    rng = random.Random(SEED + 3)
    order = []
    host.rc.on_completion = lambda read, cpl, i: (order.append((read.host_seq, i)), cpl)[1]
    configs = [("RCB 64 every RCB", dict(rcb=64, split_on_all_rcb=True)),
               ("RCB 128 every RCB", dict(rcb=128, split_on_all_rcb=True)),
               ("out of order", dict(rcb=64, split_on_all_rcb=True, jitter_ns=1500,
                                     gap_ns=40)),
               ("2 us latency", dict(latency_ns=2000, jitter_ns=0, gap_ns=0, rcb=128,
                                     split_on_all_rcb=False))]
    for name, cfg in configs:
        host.configure_reads(**cfg)
        order.clear()
        reads_before = host.rc.reads
        jobs = random_jobs(harness, rng, PARAMS.get("max_len", 1 << 14), reg_share=0.2)
        await harness.run_jobs(jobs)
        await harness.settle()
        finish(harness, jobs)
        first = [r for r, i in order if i == 0]
        inversions = sum(1 for a, b in zip(first, first[1:]) if a > b)
        dut._log.info("%s: %d reads, %d completions, %d answered before an older read, "
                      "max outstanding %s", name, host.rc.reads - reads_before, len(order),
                      inversions, host.rc.max_outstanding)
        if "order" in name:
            assert inversions > 0, "jitter did not reorder any completions"
    harness.check_hosts()


async def background(harness, rng, channels=(1, 2, 3), max_len=1 << 12):
    return random_jobs(harness, rng, max_len, channels=channels, reg_share=0.2)


@cocotb.test()
async def host_faults(dut):
    """Completion timeout (dropped read, dropped last completion), UR, CA, poisoned, malformed
    completion, and a completion with a tag nobody used: channel 0 fails with the right code
    while channels 1-3 run; then channel 0 works again.  A read's first write goes as soon as
    its completions are in: a 512-byte read whose second completion is dropped writes its
    first 256 bytes, and nothing after them, before the timeout stops the channel."""
    harness = DmaHarness(dut, 1)
    await harness.start(timeout=4000)
    rc = harness.host(0).rc
    drv = harness.drivers[0]
    rng = random.Random(SEED + 4)
    cases = [("drop", DmaError.CPL_TIMEOUT), ("drop_last", DmaError.CPL_TIMEOUT),
             ("ur", DmaError.CPL_UR), ("ca", DmaError.CPL_CA),
             ("poison", DmaError.CPL_POISONED), ("corrupt", DmaError.CPL_MALFORMED),
             ("range_ur", DmaError.CPL_UR), ("range_ca", DmaError.CPL_CA)]
    errors = []
    for kind, code in cases:
        dut._log.info("case %s", kind)
        dst, _ = harness.arenas(rng, N_CH, 0)
        src = src_arena(harness, 0, rng, N_CH, 0)
        ts = [memcpy(src.alloc(n), harness.tca(0, dst[0].alloc(n)), n)
              for n in (rng.randrange(1, 3000), 2048 + rng.randrange(512), 700)]
        bad = ts[1]
        lo, hi = bad.src_span()
        if kind.startswith("range"):
            rc.fail_reads(lo & ~3, hi, kind[-2:].upper())
        else:
            rc.add_completion_fault(kind, match=lambda t, lo=lo, hi=hi:
                                    lo & ~3 <= t.address < hi)
        job = Job(0, 0, ts)
        harness.plan(job, readable=lambda s, n, lo=lo, hi=hi: code if lo <= s < hi else None)
        jobs = [job] + await background(harness, rng)
        await harness.run_jobs(jobs)
        await harness.settle()
        rc.clear_faults()
        dut._log.info("%s: %s", kind, job.fault)
        finish(harness, jobs, failed_spans(harness, job), errors)
        # recovery on the same channel, with the others busy again
        jobs = random_jobs(harness, rng, 1 << 12, channels=(0,)) + await background(harness, rng)
        await harness.run_jobs(jobs)
        await harness.settle()
        finish(harness, jobs, errors=errors)

    # The first of two 256-byte completions lands, the second never comes.
    harness.host(0).configure_reads(jitter_ns=0, gap_ns=0, rcb=128, split_on_all_rcb=False)
    dst, _ = harness.arenas(rng, N_CH, 0)
    s = src_arena(harness, 0, rng, N_CH, 0).alloc(512, align=512)
    d = harness.tca(0, dst[0].alloc(512, align=256))
    rc.add_completion_fault("drop_last", match=lambda t: s <= t.address < s + 512)
    job = Job(0, 0, [memcpy(s, d, 512)])
    harness.plan(job, readable=lambda a, n: DmaError.CPL_TIMEOUT if s <= a < s + 512 else None)
    await harness.run_jobs([job])
    await harness.settle()
    rc.clear_faults()
    harness.snapshot()
    harness.apply([(d, harness.read_src(0)(s, 256))])     # the second 256 bytes: untouched
    finish(harness, [job], errors=errors)
    if job.fault is not None and job.fault.bytes != 256:    # (check_job checked the code)
        errors.append(f"partial read: CH_BYTES {job.fault.bytes}, expected the 256 written")

    # A completion for a tag with no read outstanding: dropped, counted, harmless.  With 8-bit
    # tags every tag cycles through use, so a stray completion during traffic is told apart
    # only with 5-bit tags (tag 200 can never be ours); the second one comes when idle.
    await drv.dma_config(ext_tags=False)
    await drv.clear_counters()
    chip_id = harness.cluster.chips[0].models["n"].pcie_id
    jobs = random_jobs(harness, rng, 1 << 13)
    for j in jobs:
        harness.plan(j)
    runner = cocotb.start_soon(harness.run_jobs(jobs))
    await ClockCycles(dut.clk, 200)
    await rc.inject_completion(chip_id, 200, nbytes=16)     # above every 5-bit tag
    await runner
    await rc.inject_completion(chip_id, 3, nbytes=8)        # a real tag, but nothing pending
    await harness.settle()
    finish(harness, jobs, errors=errors)
    n = await drv.read_reg("COUNT", ("N", "UNEXPECTED_CPL"))
    if n != 2:
        errors.append(f"UNEXPECTED_CPL on N is {n}, expected 2")
    await drv.dma_config(ext_tags=True)
    harness.check_hosts()
    assert not errors, f"{len(errors)} failure(s):\n" + "\n".join(errors)


def bad_descriptor(how, t):
    """Return ``(bytes, pointer ext bit)`` of ``t`` (ending the chain) broken by ``how``."""
    kw = dict(src=t.src, dst=t.dst, length=t.length, end=True)
    ext = False
    if how == "magic":
        raw = descriptor.pack(**kw, control=descriptor._control(end=True, magic=0x5D))
    elif how == "reserved_ctl":
        raw = descriptor.pack(**kw, control=descriptor._control(end=True) | 1 << 20)
    elif how == "reserved":
        raw, ext = bytearray(descriptor.pack(**kw, count=1)), True
        raw[0x3F] = 0x80
    elif how == "length":
        raw = descriptor.pack(**{**kw, "length": 0})
    elif how == "count":
        raw, ext = descriptor.pack(**kw, count=0), True
    elif how == "ext_ptr":
        raw = descriptor.pack(**kw, count=1)                # 64 bytes, pointer says 32
    elif how == "ext_ptr_short":
        raw, ext = descriptor.pack(**kw), True              # 32 bytes, pointer says 64
    elif how == "next_bits":
        raw = descriptor.pack(**{**kw, "end": False}, next=0x1_0000_0008)
    elif how == "seq_no_ext":
        raw = descriptor.pack(**kw, control=descriptor._control(end=True, seq=1))
    elif how == "seq_align":
        raw, ext = descriptor.pack(**kw, seq_addr=(t.dst & ~3) + 2, seq_value=1), True
    else:
        raise ValueError(how)
    return bytes(raw), ext


MALFORMED = ("magic", "reserved_ctl", "reserved", "length", "count", "ext_ptr",
             "ext_ptr_short", "next_bits", "seq_no_ext", "seq_align")


@cocotb.test()
async def descriptor_faults(dut):
    """Each malformed-descriptor check, unroutable destination and completion write, register
    mode with 0 slots or a bad slot: DESC_MALFORMED / DST_UNROUTABLE at the right descriptor,
    the ones before it done; then the channel works again while the others ran."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 5)
    drv = harness.drivers[0]
    routable = lambda a: harness.amap.node_of(a) == 0     # noqa: E731 (one node: no other route)
    elsewhere = harness.amap.region(3)[0] + 0x1000
    cases = [("malformed", how) for how in MALFORMED] + [
        ("unroutable", "dst"), ("unroutable", "seq"), ("unroutable", "stride"),
        ("reg", "slots0"), ("reg", "count")]
    errors = []
    for family, how in cases:
        ch = rng.randrange(N_CH)
        dst, _ = harness.arenas(rng, N_CH, ch)
        src = src_arena(harness, 0, rng, N_CH, ch)
        ts = [memcpy(src.alloc(n), harness.tca(0, dst[0].alloc(n)), n)
              for n in (rng.randrange(1, 2000), 64, 300)]
        job = Job(0, ch, ts)
        if family == "malformed":
            base = harness.desc[0] + 0x4000 * ch
            chain = Chain(ch, base).add(ts[0]).add(ts[1])
            chain.place([base, base + 64])      # the second 64-byte aligned, either size
            img = chain.image()
            raw, ext = bad_descriptor(how, ts[1])
            first = ts[0].pack(next=descriptor.pointer(img[1][0], ext))
            job.transfers = ts[:2]
            job.images, job.head = [(img[0][0], first), (img[1][0], raw)], chain.head
            harness.plan(job, routable=routable)
        elif family == "unroutable":
            if how == "dst":
                ts[1] = memcpy(ts[1].src, elsewhere, 64)
            elif how == "seq":
                ts[1] = memcpy(ts[1].src, ts[1].dst, 64, seq=(elsewhere, 1))
            else:
                # the first bursts at the end of node 0's region, the others past it
                end = harness.amap.region(0)[0] + harness.amap.node_size
                ts[1] = memcpy(ts[1].src, end - 64, 16, count=8, dst_gap=16)
            job.reg = rng.random() < 0.5
            harness.plan(job, routable=routable)
        elif how == "slots0":
            job.reg = True
            job.transfers = []
            job.outcome = dma_model.run_slots([], harness.read_src(0))
        else:
            job.reg = True
            job.transfers = [ts[0], dict(ts[1].fields(), count=0, ext=1, control=ts[1].fields()
                                         ["control"] | 1 << 8)]
            harness.plan(job, routable=routable)
        assert job.outcome.error != DmaError.NONE, (family, how)
        others = random_jobs(harness, rng, 1 << 12, channels=[c for c in range(N_CH) if c != ch],
                             reg_share=0.2)
        for j in others:
            harness.plan(j)
        if how == "slots0":
            runner = cocotb.start_soon(harness.run_jobs(others))
            await drv.bar0.write(ctrl_offset(ch), (1 << 1).to_bytes(4, "little"))
            await harness.wait(job)
            await runner
        else:
            await harness.run_jobs([job] + others)
        await harness.settle()
        dut._log.info("%s %s on channel %d: %s", family, how, ch, job.fault)
        finish(harness, [job] + others, failed_spans(harness, job) if job.transfers else (),
               errors)
        jobs = random_jobs(harness, rng, 1 << 12, channels=(ch,))
        await harness.run_jobs(jobs)
        await harness.settle()
        finish(harness, jobs, errors=errors)
    harness.check_hosts()
    assert not errors, f"{len(errors)} failure(s):\n" + "\n".join(errors)


async def abort_beside_others(harness, rng, job, delay, max_len):
    """Start ``job`` (channel 0) beside a random chain on each other channel, abort it after
    ``delay`` (a trigger, or None), wait for all; return the other channels' jobs."""
    harness.plan(job)
    others = random_jobs(harness, rng, max_len, channels=(1, 2, 3))
    for j in others:
        harness.plan(j)
    runner = cocotb.start_soon(harness.run_jobs(others))
    await harness.kick(job)
    if delay is not None:
        await delay
    await harness.drivers[job.node].dma_abort(job.channel)
    await harness.wait(job)
    await runner
    return others


@cocotb.test()
async def abort_and_busy(dut):
    """Abort a long chain (ABORTED, busy falls, next start works); a start while busy is
    ignored and flagged, and the running chain completes as if it had not come."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 6)
    drv = harness.drivers[0]
    harness.host(0).configure_reads(latency_ns=1000)
    dst, _ = harness.arenas(rng, N_CH, 0)
    src = src_arena(harness, 0, rng, N_CH, 0)
    ts = [memcpy(src.alloc(8192), harness.tca(0, dst[0].alloc(8192)), 8192) for _ in range(8)]
    job = Job(0, 0, ts)
    others = await abort_beside_others(harness, rng, job, Timer(3, unit="us"), 1 << 13)
    assert job.fault is not None and job.fault.error == DmaError.ABORTED, job.fault
    assert job.fault.desc_done < len(ts), "abort came after the chain had finished"
    await harness.settle()
    finish(harness, others, failed_spans(harness, job, job.fault.desc_done))
    st = await drv.dma_status(0)
    assert not st["busy"] and st["error"] == DmaError.ABORTED
    dut._log.info("aborted after %d descriptors, %d bytes", job.fault.desc_done,
                  job.fault.bytes)

    # start while busy: ignored, flagged; the running chain finishes as planned
    harness.host(0).configure_reads(latency_ns=0)
    job = Job(0, 0, ts[:4])
    harness.plan(job)
    await harness.kick(job)
    await drv.dma_start(0)
    st = await drv.dma_status(0)
    assert st["busy"] and st["start_ignored"], st
    await harness.wait(job)
    await harness.settle()
    finish(harness, [job])
    jobs = random_jobs(harness, rng, 1 << 12, channels=(0,))
    await harness.run_jobs(jobs)
    st = await drv.dma_status(0)
    assert not st["start_ignored"], "the next accepted start did not clear start_ignored"
    await harness.settle()
    finish(harness, jobs)
    harness.check_hosts()


@cocotb.test()
async def abort_after_start(dut):
    """An abort right behind the start: its write 0 to 300 cycles after the start's (while the
    start's announcement is taken, the head's block fetched, the reads issued, the last
    writes drained).  An abort that finds the chain running (WAIT or RUN) ends it with ABORTED
    before its last descriptor: busy falls, every byte of the descriptors it counts done is
    written and none outside the chain's spans.  One that comes after the chain's last read
    was issued (DRAIN: at 300 cycles) has nothing left to stop: the chain ends as if it had not
    come, every descriptor done, no error (docs/dma.md, the channel states).  Each time the
    other channels' chains complete and the channel's next start runs a chain whole."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 9)
    drv = harness.drivers[0]
    dst, _ = harness.arenas(rng, N_CH, 0)
    src = src_arena(harness, 0, rng, N_CH, 0)

    def chain(n, size):
        return [memcpy(src.alloc(size), harness.tca(0, dst[0].alloc(size)), size)
                for _ in range(n)]
    gaps = (0, 1, 2, 3, 5, 8, 13, 21, 40, 100, 160, 200, 300)
    late = []
    for gap in gaps:
        job = Job(0, 0, chain(12, 256))
        others = await abort_beside_others(harness, rng, job,
                                           ClockCycles(dut.clk, gap) if gap else None, 1 << 11)
        await harness.settle()
        st = await drv.dma_status(0)
        assert not st["busy"], (gap, st)
        if job.fault is None:       # the abort found the chain draining
            assert st["error"] == 0, (gap, st)
            finish(harness, [job] + others)
            late.append(gap)
        else:
            assert job.fault.error == DmaError.ABORTED, (gap, job.fault)
            assert job.fault.desc_done < len(job.transfers), (gap, job.fault)
            assert st["error"] == DmaError.ABORTED, (gap, st)
            finish(harness, others, failed_spans(harness, job, job.fault.desc_done))
        if gap <= 100:      # before the head's block can have come back
            assert job.fault is not None and job.fault.desc_done == 0, (gap, job.fault)
        again = Job(0, 0, chain(3, 512))
        harness.plan(again)
        await harness.run_jobs([again])
        await harness.settle()
        finish(harness, [again])
        dut._log.info("abort %d cycles after the start: %s", gap,
                      "came in DRAIN, chain whole" if job.fault is None else
                      f"{job.fault.desc_done} descriptors done, {job.fault.bytes} bytes")
    # (Which gaps come too late depends on the other channels' random chains.)
    assert late, "no abort came in DRAIN: that path went untested"
    harness.check_hosts()


@cocotb.test()
async def prefetch_race(dut):
    """The next descriptor's fetch landing on every cycle around the close of the current one.

    The planner can pick a channel again in the action that closes its descriptor (its last
    read), so the channel reaches CALC in WAIT while the prefetch of its next descriptor may
    still be arriving; the load must wait for the whole descriptor (loading from the
    half-written buffer ran a mix of the two; found by the seed-31 soak).  Chains of a K-burst
    stride descriptor (one 8-byte read per planner action, so the close comes 2 K cycles after
    the prefetch) and a plain one; K swept across the prefetch's measured round trip, and the
    host latency in 4 ns steps, so the fetch's last DW lands on each cycle around the close.  No idles or
    backpressure: the timing is exact."""
    harness = DmaHarness(dut, 1)
    await harness.start(pauses=False)
    rng = random.Random(SEED + 7)
    dst, _ = harness.arenas(rng)
    src = src_arena(harness, 0, rng)
    latency = 200

    def chain(k):
        stride = memcpy(src.alloc(16 * k), harness.tca(0, dst[0].alloc(16 * k)), 8, count=k,
                        src_gap=8, dst_gap=8)
        plain = memcpy(src.alloc(64), harness.tca(0, dst[0].alloc(64)), 64)
        return Job(0, 0, [stride, plain])

    async def run(job):
        await harness.run_jobs([job])
        await harness.settle(idle_cycles=150)
        finish(harness, [job])

    # The round trip of a descriptor fetch: from the read request to its completion.
    probe = HandshakeProbe(dut.clk)
    probe.add_stream("rd", dut.c0.dma, "o_rd")
    probe.add("cpl", dut.c0.dma.i_cpl__valid)
    harness.host(0).configure_reads(latency_ns=latency)
    probe.start()
    await run(chain(1))
    probe.stop()
    trip = probe.times["cpl"][0] - probe.times["rd"][0]
    mid = trip // 8
    below, above = PARAMS.get("k_span", (12, 4))       # K around the round trip's middle
    ks = range(max(1, mid - below), mid + above + 1)
    dut._log.info("fetch round trip %d ns; K from %d to %d", trip, ks[0], ks[-1])
    for k in ks:
        for extra in (0, 4):
            harness.host(0).configure_reads(latency_ns=latency + extra)
            try:
                await run(chain(k))
            except AssertionError as exc:
                raise AssertionError(f"K = {k}, host latency {latency + extra} ns: {exc}") \
                    from exc
    harness.check_hosts()
