"""cocotb ping-pong between two neighbour nodes of the HDL sub-cluster: the PEACH2 rows of the
calibration table and the TCA curve of 000 Figure 4.

Two chips cabled E -> W (``topology``, default ``line:2``), a host and one GPU model
(``peach2.sim.pcie.gpu``) on each; hard IPs with the calibrated pipeline (``pipeline_ns``).
Each figure is **half a round trip** of a ping-pong, the way the TCA team (and MPI benchmarks)
give an 8-byte latency: node 0 sends, node 1 waits until the message is there and sends it
back, node 0 waits until it is back; one-way = round trip / 2.  One warm-up round trip, then
``iters`` measured ones (the simulation is deterministic: they agree to the nanosecond).

- ``pio``: 8-byte CPU store from host 0 into host 1's memory; host 1 sees the word (event-driven
  poll of its memory) and stores 8 bytes back into host 0's memory.
- ``put``: an 8-byte inline put (docs/put.md) from host 0 into host 1's memory with its
  completion write into host 1's flag; host 1 sees the flag and puts the data back.  Beside the
  half round trip, the one-way time from host 0's store into BAR 4 to host 1 seeing its flag
  (``kick_to_flag_ns``); ``put_stream``: ``stream`` puts back to back (default 64), the rate
  host 1 sees their flags land at (first to last) and how long host 0 took to issue them; the
  same with a flag on the last put only (``put_stream_one_flag``: one TLP a put).
- ``queue_stream`` (last, after the curves): ``stream`` 8-byte register-mode descriptors
  appended to a DMA queue of host 0's chip (docs/dma.md, "Queue mode"), one and then four a
  doorbell (``queue_batches``), each with a completion write into host 1's flag: the rate the
  flags land at, and what one ``CH_STATUS`` read (the driver's wait for a free slot) costs.
- ``dma_host`` / ``dma_gpu`` and the curve: a chained DMA of one descriptor (prepared once, as
  ``tcaDescSet``; started by a register write) from node 0's host memory (or GPU 0) into node 1's,
  ending in a completion write into a flag of node 1's host memory, where its CPU polls it
  (:mod:`peach2.sim.collectives.plan`); node 1 then starts its own DMA back into node 0.

Parameters (``PEACH2_PARAMS``): ``topology``, ``pipeline_ns``; ``curves``: ``[[name, bytes per
second, [sizes]], ...]``, one GPU-to-GPU curve per GPU read rate (the GPU models'
``read_bandwidth`` is set to each in turn; the first also times the 8-byte rows);
``gpu_read_latency_ns``;
``host_read_latency_ns`` (default 0, the cluster's); ``iters``; ``result_file`` (JSON).

Every byte received is compared with what was sent, and every memory of both nodes (host
windows and GPUs) with a shadow after each size: nothing else may change.  Chips' drop counters
must stay zero.
"""

import json
import random

import cocotb

from peach2.routes import Topology, default_address_map
from peach2.sim.collectives import FLAG, PATHS, Collective, Memories, Place, run
from peach2.sim.collectives.paths import unusable
from peach2.sim.collectives.plan import Program, Step
from peach2.sim.driver import memcpy
from peach2.sim.harness import DROP_REASONS as DROPS
from peach2.sim.harness import Cluster
from peach2.sim.pcie import GPU_READ_BANDWIDTH, GPU_READ_LATENCY_NS
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()


def dma_pingpong(mem, window, size, out, back, flag):
    """The ping-pong of ``size`` bytes between nodes 0 and 1 in ``window``: node 0's ``out``
    into node 1's ``out``, then node 1's ``out`` back into node 0's ``back``, each with a
    completion write into the receiver's host flag at ``flag``.  ``Result.time`` of a run is
    the round trip (node 0 sees the pong's flag)."""
    def put(src, dst, src_off, dst_off):
        return memcpy(mem.local(Place(src, window, src_off), size),
                      mem.tca(Place(dst, window, dst_off), size), size,
                      seq=(mem.tca(Place(dst, "host", flag), 4), FLAG))
    mine0, mine1 = Place(0, "host", flag), Place(1, "host", flag)
    programs = [Program(0, [Step(0, [put(0, 1, out, out)])], done=[(mine0, FLAG)]),
                Program(1, [Step(0, [put(1, 0, out, back)], wait=[(mine1, FLAG)])])]
    return Collective("pingpong", programs, [mine0, mine1], {"bytes": size, "window": window})


class TB:
    def __init__(self, dut):
        self.dut = dut
        self.topology = Topology.parse(PARAMS.get("topology", "line:2"))
        sizes = [n for curve in PARAMS.get("curves", []) for n in curve[2]] or [8]
        # a GPU BAR is aligned to its size and at least 1 MiB; it follows the host window
        self.gpu_size = max(1 << 20, 1 << (2 * max(sizes) - 1).bit_length())
        self.amap = default_address_map(self.topology.n_nodes, host_size=self.gpu_size, n_gpus=1,
                                        gpu_size=self.gpu_size)
        self.cluster = Cluster(dut, self.topology, self.amap, seed=SEED, hdl_cables=True,
                               routes="safe", hardip_pipeline_ns=PARAMS.get("pipeline_ns", 0.0),
                               n_gpus=1,
                               gpu_read_latency_ns=PARAMS.get("gpu_read_latency_ns",
                                                              GPU_READ_LATENCY_NS))
        self.rng = random.Random(SEED + 7)
        self.shadow = {}
        self.mem = None

    async def start(self):
        await self.cluster.reset_and_start()
        latency = PARAMS.get("host_read_latency_ns")
        if latency is not None:
            for chip in self.cluster.chips:
                chip.host.configure_reads(latency_ns=latency)
        self.mem = Memories(self.cluster)
        for node in (0, 1):
            for window in ("host", ("gpu", 0)):
                size = self.amap.window(node, window)[1]
                data = self.rng.randbytes(size)
                self.mem.write(Place(node, window, 0), data)
                self.shadow[(node, window)] = bytearray(data)

    def put(self, place, data):
        self.mem.write(place, data)
        self.expect(place, data)

    def expect(self, place, data):
        self.shadow[(place.node, place.window)][place.offset:place.offset + len(data)] = data

    def check(self, what):
        for (node, window), want in self.shadow.items():
            self.mem.assert_equal(Place(node, window, 0), want, what)

    async def counters_clean(self):
        await self.cluster.assert_no_drops(DROPS)

    async def dma(self, window, size, rounds):
        """Round trips (ns) of ``rounds`` ping-pongs of ``size`` bytes in ``window``; checked."""
        flag = 0x100 if window == "host" else 0x80
        out, back = (0x1000, 0x1000 + max(size, 64)) if window == "host" else (0, self.gpu_size
                                                                                // 2)
        if window != "host" and size > self.gpu_size // 2:
            raise ValueError(f"{size} bytes do not fit half of the {self.gpu_size}-byte GPU")
        coll = dma_pingpong(self.mem, window, size, out, back, flag)
        times = []
        for r in range(rounds):
            data = self.rng.randbytes(size)
            self.put(Place(0, window, out), data)
            result = await run(self.mem, coll)
            times.append(result.time)
            self.expect(Place(1, window, out), data)
            self.expect(Place(0, window, back), data)
            for place in coll.flags:
                self.expect(place, FLAG.to_bytes(4, "little"))
            self.check(f"DMA ping-pong of {size} B in {window}, round {r}")
        return times

    async def pio(self, rounds, size=8):
        """Round trips (ns) of ``rounds`` PIO ping-pongs of ``size`` bytes between the hosts'
        memories (the first word is the flag: never zero); checked."""
        from cocotb.utils import get_sim_time
        at = 0x200
        times = []
        for r in range(rounds):
            ping = (r + 1).to_bytes(4, "little") + self.rng.randbytes(size - 4)
            pong = (r + 1 << 16).to_bytes(4, "little") + self.rng.randbytes(size - 4)
            for node in (0, 1):
                self.put(Place(node, "host", at), bytes(size))

            async def node1(ping=ping, pong=pong):
                await self.mem.wait_word(Place(1, "host", at), int.from_bytes(ping[:4], "little"),
                                         100_000)
                await self.cluster.pio_write(1, 0, at, pong)

            echo = cocotb.start_soon(node1())
            t0 = get_sim_time("ns")
            await self.cluster.pio_write(0, 1, at, ping)
            t1 = await self.mem.wait_word(Place(0, "host", at), int.from_bytes(pong[:4], "little"),
                                          100_000)
            await echo
            times.append(t1 - t0)
            await self.cluster.quiet()
            self.expect(Place(1, "host", at), ping)
            self.expect(Place(0, "host", at), pong)
            self.check(f"PIO ping-pong round {r}")
        return times


    async def inline_put(self, rounds, size=8):
        """Round trips (ns) of ``rounds`` ping-pongs of inline puts (docs/put.md): node 0 puts
        ``size`` bytes into node 1's host memory with a completion write into node 1's flag;
        node 1's CPU sees the flag and puts the data back the same way.  Also returns the
        one-way times from node 0's store into BAR 4 (the kick) to node 1 seeing its flag."""
        from cocotb.utils import get_sim_time
        flag, out, back = 0x300, 0x340, 0x380
        mem = self.mem
        times, one_way = [], []
        for r in range(rounds):
            data = self.rng.randbytes(size)
            value = 0x1000 + r
            for node in (0, 1):
                self.put(Place(node, "host", flag), bytes(4))

            async def node1(data=data, value=value):
                await mem.wait_word(Place(1, "host", flag), value, 100_000)
                await self.cluster.drivers[1].put(
                    mem.tca(Place(0, "host", back), size), mem.read(Place(1, "host", out), size),
                    seq_addr=mem.tca(Place(0, "host", flag), 4), seq_value=value)
                return get_sim_time("ns")

            echo = cocotb.start_soon(node1())
            t0 = get_sim_time("ns")
            await self.cluster.drivers[0].put(
                mem.tca(Place(1, "host", out), size), data,
                seq_addr=mem.tca(Place(1, "host", flag), 4), seq_value=value)
            t1 = await mem.wait_word(Place(0, "host", flag), value, 100_000)
            seen = await echo
            times.append(t1 - t0)
            one_way.append(seen - t0)
            await self.cluster.quiet()
            for place, raw in ((Place(1, "host", out), data), (Place(0, "host", back), data),
                               (Place(0, "host", flag), value.to_bytes(4, "little")),
                               (Place(1, "host", flag), value.to_bytes(4, "little"))):
                self.expect(place, raw)
            self.check(f"inline put ping-pong round {r}")
        return times, one_way

    async def put_stream(self, count, size=8, flags="each"):
        """``count`` inline puts of ``size`` bytes from host 0 to host 1, issued back to back,
        each with a completion write of its index + 1 into one flag (``flags="each"``), or only
        the last one (``"last"``: one TLP a put instead of two).  Returns the times (ns) from the
        first store into BAR 4: host 0 done issuing, host 1 seeing the first put (its flag, or
        with ``"last"`` its data) and the last flag."""
        from cocotb.utils import get_sim_time
        flag, out = 0x400, 0x800
        mem = self.mem
        self.put(Place(1, "host", flag), bytes(4))
        data = [(k + 1).to_bytes(4, "little") + self.rng.randbytes(size - 4)
                for k in range(count)]
        self.put(Place(1, "host", out), bytes(4))
        first = cocotb.start_soon(mem.wait_word(Place(1, "host", flag if flags == "each" else out),
                                                1, 100_000))
        t0 = get_sim_time("ns")
        for k, raw in enumerate(data):
            seq = flags == "each" or k == count - 1
            await self.cluster.drivers[0].put(
                mem.tca(Place(1, "host", out + size * k), size), raw,
                seq_addr=mem.tca(Place(1, "host", flag), 4) if seq else None, seq_value=k + 1,
                slot=k % 64)
        issued = get_sim_time("ns")
        last = await mem.wait_word(Place(1, "host", flag), count, 100_000)
        await self.cluster.quiet()
        for k, raw in enumerate(data):
            self.expect(Place(1, "host", out + size * k), raw)
        self.expect(Place(1, "host", flag), count.to_bytes(4, "little"))
        self.check(f"{count} inline puts back to back")
        return {"count": count, "size": size, "flags": flags, "issued_ns": issued - t0,
                "first_ns": await first - t0, "last_ns": last - t0,
                "per_us": (count - 1) / (last - await first) * 1e3}

    async def queue_stream(self, count, batch=1, size=8, channel=3):
        """``count`` register-mode descriptors of ``size`` bytes appended to a DMA queue of
        host 0's chip (docs/dma.md, "Queue mode"), ``batch`` to a doorbell (one
        ``CH_CTRL.append``), each from host 0's memory into host 1's with a completion write
        of its index + 1 into one flag.  The queue is started empty first; the times (ns) run
        from the first slot write: host 0 done appending (the driver waits for free slots by
        reading ``CH_STATUS.held``), host 1 seeing the first flag and the last, and the rate
        the flags land at (first to last); and how long one read of ``CH_STATUS`` takes host 0
        (each wait for room is one)."""
        from cocotb.utils import get_sim_time
        flag, at = 0x700, 0x20000
        mem, drv = self.mem, self.cluster.drivers[0]
        self.put(Place(1, "host", flag), bytes(4))
        data = [self.rng.randbytes(size) for _ in range(count)]
        for k, raw in enumerate(data):
            self.put(Place(0, "host", at + size * k), raw)
        seq = mem.tca(Place(1, "host", flag), 4)
        descs = [memcpy(mem.local(Place(0, "host", at + size * k), size),
                        mem.tca(Place(1, "host", at + size * k), size), size, seq=(seq, k + 1))
                 for k in range(count)]
        t = get_sim_time("ns")
        await drv.read_fields("CH_STATUS", channel)           # what one wait for room costs
        status_read = get_sim_time("ns") - t
        await drv.dma_queue_start(channel)
        first = cocotb.start_soon(mem.wait_word(Place(1, "host", flag), 1, 100_000))
        t0 = get_sim_time("ns")
        for k in range(0, count, batch):
            await drv.dma_append(channel, descs[k:k + batch])
        issued = get_sim_time("ns")
        last = await mem.wait_word(Place(1, "host", flag), count, 100_000)
        await drv.dma_stop(channel)
        st = await drv.dma_wait(channel)
        await self.cluster.quiet()
        for k, raw in enumerate(data):
            self.expect(Place(1, "host", at + size * k), raw)
        self.expect(Place(1, "host", flag), count.to_bytes(4, "little"))
        self.check(f"{count} descriptors appended to a DMA queue, {batch} a doorbell")
        assert st["desc_done"] == count, st
        return {"count": count, "batch": batch, "size": size, "status_read_ns": status_read,
                "issued_ns": issued - t0,
                "first_ns": await first - t0, "last_ns": last - t0,
                "per_us": (count - 1) / (last - await first) * 1e3}

    async def paths(self, sizes, rounds=2):
        """Kick-to-flag times (ns) of one step from host 0's memory into host 1's, ``size``
        bytes and a completion write into host 1's flag, by every path of
        :mod:`peach2.sim.collectives.paths` that can take it (the chain and the register slots
        set before the kick); the last of ``rounds`` runs (the first warms up).  Returns
        ``[{"size", "path", "ns"}, ...]``; every byte checked."""
        flag, at = 0x600, 0x10000
        mem, rows = self.mem, []
        mine = Place(1, "host", flag)
        for size in sizes:
            t = memcpy(mem.local(Place(0, "host", at), size), mem.tca(Place(1, "host", at), size),
                       size, seq=(mem.tca(mine, 4), FLAG))
            step = Step(0, [t])
            for path in PATHS:
                if path == "auto" or unusable(mem, 0, step, path):
                    continue
                coll = Collective("path", [Program(0, [step]), Program(1, [], done=[(mine, FLAG)])],
                                  [mine], {"bytes": size})
                for r in range(rounds):
                    data = self.rng.randbytes(size)
                    self.put(Place(0, "host", at), data)
                    ns = (await run(mem, coll, paths=path)).time
                    await self.cluster.quiet()
                    self.expect(Place(1, "host", at), data)
                    self.expect(mine, FLAG.to_bytes(4, "little"))
                    self.check(f"{size} B by {path}, round {r}")
                rows.append({"size": size, "path": path, "ns": ns})
        return rows


def _row(times, size):
    measured = times[1:]
    one_way = sorted(measured)[len(measured) // 2] / 2
    return {"size": size, "one_way_ns": one_way, "round_trips_ns": measured,
            "warmup_ns": times[0], "mb_s": size / one_way * 1e3}


@cocotb.test()
async def pingpong(dut):
    """PIO and DMA 8-byte ping-pongs, then the GPU-to-GPU curve for each GPU read rate."""
    tb = TB(dut)
    await tb.start()
    iters = PARAMS.get("iters", 1)
    out = {"topology": PARAMS.get("topology", "line:2"),
           "pipeline_ns": tb.cluster.hardip_pipeline_ns,
           "host_read_latency_ns": tb.cluster.chips[0].host.read_latency_ns,
           "gpu_read_latency_ns": tb.cluster.gpus[0][0].function.read_latency_ns,
           "definition": "half a round trip of a ping-pong, one warm-up round trip first"}

    def save():
        if PARAMS.get("result_file"):
            with open(PARAMS["result_file"], "w") as f:
                json.dump(out, f, indent=1)

    def log(what, row):
        dut._log.info("%s %d B: %.0f ns one way (%.1f MB/s)", what, row["size"],
                      row["one_way_ns"], row["mb_s"])
        if PARAMS.get("progress_file"):
            with open(PARAMS["progress_file"], "a") as f:
                f.write(f"calibration: {what} {row['size']} B: {row['one_way_ns']:.0f} ns one "
                        f"way, {row['mb_s']:.1f} MB/s\n")

    gpu_reads = PARAMS.get("curves") or [["default", GPU_READ_BANDWIDTH, []]]
    functions = [tb.cluster.gpus[node][0].function for node in (0, 1)]
    for f in functions:
        f.read_bandwidth = gpu_reads[0][1]
    out["pio"] = _row(await tb.pio(1 + iters), 8)
    log("PIO CPU -> CPU", out["pio"])
    out["dma_host"] = _row(await tb.dma("host", 8, 1 + iters), 8)
    log("DMA CPU -> CPU", out["dma_host"])
    times, one_way = await tb.inline_put(1 + iters)
    out["put"] = {**_row(times, 8), "kick_to_flag_ns": sorted(one_way[1:])[len(one_way[1:]) // 2]}
    log("inline put CPU -> CPU", out["put"])
    count = PARAMS.get("stream", 64)
    for key, flags in (("put_stream", "each"), ("put_stream_one_flag", "last")):
        out[key] = row = await tb.put_stream(count, flags=flags)
        dut._log.info("%d inline puts back to back, a flag on %s: issued in %.0f ns, first "
                      "%.0f ns, last %.0f ns: %.1f per us at the receiver", count, flags,
                      row["issued_ns"], row["first_ns"], row["last_ns"], row["per_us"])
    out["paths"] = await tb.paths(PARAMS.get("path_sizes", [8]), PARAMS.get("path_rounds", 2))
    for row in out["paths"]:
        dut._log.info("%d B by %s: %.0f ns from the kick to the flag", row["size"], row["path"],
                      row["ns"])
    out["dma_gpu"] = _row(await tb.dma(("gpu", 0), 8, 1 + iters), 8)
    out["dma_gpu"]["gpu_read"] = gpu_reads[0][0]
    log("DMA GPU -> GPU", out["dma_gpu"])
    save()
    out["curves"] = {}
    for name, bandwidth, sizes in gpu_reads:
        for f in functions:
            f.read_bandwidth = bandwidth
        rows = out["curves"][name] = []
        for size in sizes:
            # a warm-up round trip only at the first size (the model is deterministic)
            rounds = 1 + (not rows)
            times = await tb.dma(("gpu", 0), size, rounds)
            rows.append(_row(times if rounds == 2 else [None, *times], size))
            rows[-1]["gpu_read_bytes_per_s"] = bandwidth
            log(f"DMA GPU -> GPU ({name})", rows[-1])
            save()
    out["queue_stream"] = []
    for batch in PARAMS.get("queue_batches", (1, 4)):
        out["queue_stream"].append(row := await tb.queue_stream(count, batch))
        dut._log.info("%d 8-byte descriptors appended to a DMA queue, %d a doorbell: appended "
                      "in %.0f ns, first flag %.0f ns, last %.0f ns: %.1f per us at the "
                      "receiver (a CH_STATUS read: %.0f ns)", count, batch, row["issued_ns"],
                      row["first_ns"], row["last_ns"], row["per_us"], row["status_read_ns"])
    save()
    await tb.counters_clean()
    tb.cluster.check()
    out["complete"] = True
    save()
