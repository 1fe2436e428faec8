"""cocotb tests of register-mode queues: DMA descriptors appended to a running channel
(docs/dma.md, "Queue mode"; issue 32's doorbells).

One chip and its host (:class:`peach2.sim.harness.dma.DmaHarness`), every model strict with
random idles and backpressure.  Each queue is checked against the reference model
(:func:`peach2.sim.reference.dma.run_queue`): every byte of the host window, ``CH_DESC_DONE``,
``CH_BYTES``, the error and the completion writes.

- ``queue_appends``: queues on all four channels at once, appended as they run (random sizes,
  block-stride, completion writes, MSIs), each batch as soon as the queue has room, then
  stopped, the first round's starts the channels' first requests after reset; a queue started
  empty and appended after it has waited.
- ``queue_append_timing``: one slot running and the append of the next written 0 to 60 cycles
  after the start, so it lands on every cycle around the close of the running slot and the
  channel's wait with nothing to load; an append and a stop in one write.
- ``queue_refusals``: what the chip refuses and what it does then: an append to a channel that
  runs no queue, an append that would hold a fifth slot, a write to a held slot, an append
  after stop, a stop of a channel that runs no queue, a start of 5 slots, a malformed slot
  appended, an abort of a queue waiting empty; each followed by work that must run whole.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles

from peach2.csr.regmap import REGMAP, DmaError
from peach2.sim.driver import memcpy
from peach2.sim.harness.dma import DmaHarness, Job, ctrl_offset, src_arena
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()

N_CH = 4


def transfers(harness, rng, n, src, dst, seq, max_len=1 << 12):
    """``n`` random descriptors of node 0 (plain, block-stride, short; some with completion
    writes and MSIs)."""
    return [harness.random_transfer(rng, 0, src, dst, max_len, seq_arena=seq) for _ in range(n)]


async def run_queue(harness, rng, channel, ts, *, first=2, wait_cycles=0):
    """Start ``channel`` as a queue with the first ``first`` of ``ts``, append the rest in
    random batches of 1..4 (each as soon as there is room), stop it and wait for it."""
    drv = harness.drivers[0]
    await drv.dma_queue_start(channel, ts[:first])
    if wait_cycles:
        await ClockCycles(harness.dut.clk, wait_cycles)
    i = first
    while i < len(ts):
        k = min(rng.randint(1, 4), len(ts) - i)
        await drv.dma_append(channel, ts[i:i + k])
        i += k
    await drv.dma_stop(channel)
    job = Job(0, channel, ts, queue=True)
    harness.plan(job)
    await harness.wait(job)
    return job


def check(harness, jobs):
    harness.snapshot()
    # (a malformed slot stops the queue before it: the outcome holds the writes before it)
    harness.apply([w for j in jobs for w in j.outcome.writes])
    harness.check_memory((), jobs)
    for j in jobs:
        harness.check_job(j)


async def status(harness, channel):
    return await harness.drivers[0].dma_status(channel)


@cocotb.test()
async def queue_appends(dut):
    """Queues on all four channels at once, appended while they run, then stopped; one queue
    started empty and appended after waiting."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 40)
    # The first requests after reset: no channel has had a CH_CTRL write yet (the harness
    # set DMA_CONFIG and the vectors only), so round 0's queue starts are the first.
    for c in range(N_CH):
        st = await status(harness, c)
        assert st == {"busy": False, "start_ignored": False, "append_refused": False,
                      "slot_refused": False, "held": 0, "tail": 0, "error": DmaError.NONE,
                      "desc_done": 0, "bytes": 0, "desc_addr": 0}, (c, st)
    for rnd in range(PARAMS.get("rounds", 2)):
        dst, seq = harness.arenas(rng, N_CH, 0)
        runs, jobs = [], []
        for c in range(N_CH):
            dst, seq = harness.arenas(rng, N_CH, c)
            src = src_arena(harness, 0, rng, N_CH, c)
            ts = transfers(harness, rng, rng.randint(6, 14), src, dst, seq)
            runs.append(cocotb.start_soon(run_queue(harness, rng, c, ts,
                                                    first=rng.randint(0, 4))))
        for r in runs:
            jobs.append(await r)
        await harness.settle()
        check(harness, jobs)
        for c in range(N_CH):
            st = await status(harness, c)
            assert not st["busy"] and st["held"] == 0, (c, st)
            assert not st["append_refused"] and not st["slot_refused"], (c, st)
        dut._log.info("round %d: %d descriptors appended on 4 queues, %d bytes", rnd,
                      sum(len(j.transfers) for j in jobs), sum(j.outcome.bytes for j in jobs))
    # Started empty: the queue waits (busy, nothing held) until the first append.
    dst, seq = harness.arenas(rng, 1, 0)
    src = src_arena(harness, 0, rng)
    ts = transfers(harness, rng, 5, src, dst, seq)
    drv = harness.drivers[0]
    await drv.dma_queue_start(2, [])
    await ClockCycles(dut.clk, 200)
    st = await status(harness, 2)
    assert st["busy"] and st["held"] == 0 and st["desc_done"] == 0, st
    job = await run_queue(harness, rng, 2, ts, first=0, wait_cycles=0)
    await harness.settle()
    check(harness, [job])
    harness.check_hosts()


@cocotb.test()
async def queue_append_timing(dut):
    """The append of the second slot written 0..60 cycles after the first slot's start, so
    it meets the close of the running slot, the cycle after, and the queue waiting empty."""
    harness = DmaHarness(dut, 1)
    await harness.start(pauses=False)
    rng = random.Random(SEED + 41)
    drv = harness.drivers[0]
    for gap in range(0, 61, 3):
        dst, seq = harness.arenas(rng, 1, 0)
        src = src_arena(harness, 0, rng)
        ts = [memcpy(src.alloc(n), harness.tca(0, dst[0].alloc(n)), n) for n in (8, 64, 8)]
        await drv.dma_slot_set(0, 0, ts[0])
        await drv.dma_slot_set(0, 1, ts[1])
        await drv.dma_slot_set(0, 2, ts[2])
        await drv.write_reg("CH_CTRL", index=0, reg_start=1, queue=1, slots=1)
        await ClockCycles(dut.clk, gap)
        await drv.write_reg("CH_CTRL", index=0, append=1, slots=2)
        await drv.dma_stop(0)
        job = Job(0, 0, ts, queue=True)
        harness.plan(job)
        await harness.wait(job)
        await harness.settle()
        check(harness, [job])
        st = await status(harness, 0)
        assert not st["append_refused"] and st["tail"] == 3, (gap, st)
    # An append and a stop in one write, to a queue waiting empty: the slot runs, then the
    # queue ends (the stop must not drain it before the appended slot is seen).
    for first in (0, 1):
        dst, seq = harness.arenas(rng, 1, 0)
        src = src_arena(harness, 0, rng)
        ts = [memcpy(src.alloc(n), harness.tca(0, dst[0].alloc(n)), n) for n in (64, 512)]
        await drv.dma_queue_start(0, ts[:first])
        await ClockCycles(dut.clk, 100)
        await drv.dma_slot_set(0, first, ts[first])
        await drv.write_reg("CH_CTRL", index=0, append=1, stop=1, slots=1)
        job = Job(0, 0, ts[:first + 1], queue=True)
        harness.plan(job)
        await harness.wait(job)
        await harness.settle()
        check(harness, [job])
        st = await status(harness, 0)
        assert not st["append_refused"] and not st["busy"], (first, st)
    harness.check_hosts()


@cocotb.test()
async def queue_refusals(dut):
    """Every refusal leaves what runs as it was and is readable in CH_STATUS; the next start
    clears the flags."""
    harness = DmaHarness(dut, 1)
    await harness.start()
    rng = random.Random(SEED + 42)
    drv = harness.drivers[0]
    dst, seq = harness.arenas(rng, 1, 0)
    src = src_arena(harness, 0, rng)

    def big(n=16384):
        return memcpy(src.alloc(n), harness.tca(0, dst[0].alloc(n)), n)

    # An append to a channel that runs no queue: refused, nothing starts.
    await drv.write_reg("CH_CTRL", index=1, append=1, slots=1)
    st = await status(harness, 1)
    assert st["append_refused"] and not st["busy"] and st["desc_done"] == 0, st

    # A fifth slot: refused while four are held (slow reads keep them held); a write to a
    # held slot is dropped; the four run as written.
    harness.host(0).configure_reads(latency_ns=3000)
    ts = [big() for _ in range(4)]
    await drv.dma_queue_start(0, ts)
    await drv.write_reg("CH_CTRL", index=0, append=1, slots=1)
    await drv.write_reg("SLOT_LENGTH", 8, (0, 3))
    st = await status(harness, 0)
    assert st["busy"] and st["held"] == 4, st
    assert st["append_refused"] and st["slot_refused"], st
    await drv.dma_stop(0)
    await drv.write_reg("CH_CTRL", index=0, append=1, slots=1)     # after stop: refused
    job = Job(0, 0, ts, queue=True)
    harness.plan(job)
    await harness.wait(job)
    harness.host(0).configure_reads(latency_ns=500)
    await harness.settle()
    check(harness, [job])
    st = await status(harness, 0)
    assert st["append_refused"] and st["slot_refused"] and st["error"] == 0, st

    # A stop of a channel that runs no queue (a plain register-mode start): refused; the
    # start runs whole.  The next accepted start cleared the flags.
    ts = [big(512), big(512)]
    n = await drv.dma_reg_set(0, ts)
    await drv.dma_reg_start(0, n)
    await drv.dma_stop(0)
    st = await status(harness, 0)
    assert st["append_refused"] and not st["slot_refused"], st
    job = Job(0, 0, ts, reg=True)
    harness.plan(job)
    await harness.wait(job)
    await harness.settle()
    check(harness, [job])

    # A queue start of 5 slots: DESC_MALFORMED at once (0 is a valid queue start).
    raw = REGMAP["CH_CTRL"].encode(reg_start=1, queue=1, slots=5)
    await drv.bar0.write(ctrl_offset(3), raw.to_bytes(4, "little"))
    st = await status(harness, 3)
    assert st["error"] == DmaError.DESC_MALFORMED and not st["busy"], st

    # A malformed slot appended: the queue ends with DESC_MALFORMED at that slot (6 % 4),
    # after the slots before it; busy falls.
    ts = [big(256) for _ in range(6)]
    good = ts[5].fields()
    bad = dict(good, control=good["control"] & ~0xFF, magic=0)      # magic 0
    ts[5] = bad
    job = await run_queue(harness, rng, 3, ts, first=3)
    assert job.fault is not None and job.fault.error == DmaError.DESC_MALFORMED, job.fault
    assert job.fault.desc_addr == 5 % 4 and job.fault.desc_done == 5, job.fault
    await harness.settle()
    check(harness, [job])

    # An abort of a queue waiting empty: ABORTED, busy falls; the next queue runs whole.
    await drv.dma_queue_start(3, [])
    await ClockCycles(dut.clk, 50)
    await drv.dma_abort(3)
    job = Job(0, 3, [], queue=True)
    harness.plan(job)
    await harness.wait(job)
    assert job.fault is not None and job.fault.error == DmaError.ABORTED, job.fault
    ts = [big(1000) for _ in range(5)]
    job = await run_queue(harness, rng, 3, ts, first=1)
    await harness.settle()
    check(harness, [job])
    st = await status(harness, 3)
    assert not st["append_refused"] and not st["slot_refused"], st
    harness.check_hosts()


@cocotb.test()
async def queue_back_to_back(dut):
    """Descriptors appended as fast as the host writes: no pauses anywhere, 8-byte slots with
    completion writes, one doorbell each (and then four), the driver waiting for room by
    reading CH_STATUS; every byte and count against the reference model.  (Found the slot
    counters' wrap: a load the cycle after the close of slot 7, with nothing appended after
    it, took ``slot + 1 != tail`` unwrapped and ran seven stale slots.)"""
    harness = DmaHarness(dut, 1)
    await harness.start(pauses=False)
    rng = random.Random(SEED + 43)
    drv = harness.drivers[0]
    for batch in PARAMS.get("queue_batches", (1, 4)):
        dst, seq = harness.arenas(rng, 1, 0)
        src = src_arena(harness, 0, rng)
        ts = [memcpy(src.alloc(8, align=8), harness.tca(0, dst[0].alloc(8, align=8)), 8,
                     seq=(harness.tca(0, seq[0].alloc(4, align=4)), k + 1)) for k in range(64)]
        await drv.dma_queue_start(1, [])
        for k in range(0, len(ts), batch):
            await drv.dma_append(1, ts[k:k + batch])
        await drv.dma_stop(1)
        job = Job(0, 1, ts, queue=True)
        harness.plan(job)
        await harness.wait(job)
        st = await status(harness, 1)
        dut._log.info("batch %d: %s", batch, st)
        await harness.settle()
        check(harness, [job])
        assert not st["append_refused"] and not st["slot_refused"], st
    harness.check_hosts()
