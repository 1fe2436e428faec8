"""cocotb: 8-byte puts from a GPU kernel to the neighbour's GPU, directly and through GMPI's
host daemon (docs/put.md, "Puts from a GPU kernel").

Two chips of the calibrated sub-cluster (``line:2``, the calibration ping-pongs' build), a host
and one GPU model on each.  GPU 0's kernel puts 8 bytes into GPU 1's memory with a completion
write into a flag there; GPU 1's kernel polls the flag.  Directly: the kernel stores the put
descriptor into its chip's BAR 4 peer to peer (:class:`~peach2.sim.driver.DevicePut`).  GMPI:
the kernel's request goes through the host daemon (:class:`~peach2.sim.driver.GmpiDaemon`,
001's 10 us a call), which makes the same put.  Each path: one-way times (GPU 0's store or
request to GPU 1 seeing its flag), after a warm-up; every byte of both GPUs and hosts checked.
Then a kernel stores a malformed descriptor: refused (PUT_STATUS, read by the host), nothing
of it sent, and the kernel's next put goes.
"""

import json
import random

import cocotb
from cocotb.utils import get_sim_time

from peach2.params import PUT_BAR, PutError
from peach2.put.descriptor import pack
from peach2.routes import Topology, default_address_map
from peach2.sim.collectives import Memories, Place
from peach2.sim.driver import DevicePut, GmpiDaemon
from peach2.sim.harness import DROP_REASONS, Cluster
from peach2.sim.pcie.gpu import enable_kernel_stores
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
GPU = ("gpu", 0)
FLAG, DATA = 0x100, 0x200


@cocotb.test()
async def gpu_puts(dut):
    topology = Topology.parse("line:2")
    amap = default_address_map(2, host_size=1 << 20, n_gpus=1, gpu_size=1 << 20)
    cluster = Cluster(dut, topology, amap, seed=SEED, hdl_cables=True, routes="safe",
                      hardip_pipeline_ns=PARAMS["pipeline_ns"], n_gpus=1)
    await cluster.reset_and_start()
    mem = Memories(cluster)
    rng = random.Random(SEED)
    shadow = {}
    for node in (0, 1):
        for window in ("host", GPU):
            data = rng.randbytes(amap.window(node, window)[1])
            mem.write(Place(node, window, 0), data)
            shadow[(node, window)] = bytearray(data)
    gpus = [cluster.gpus[n][0].function for n in (0, 1)]
    await enable_kernel_stores(cluster.chips[0].host, cluster.gpus[0][0])
    device = DevicePut(gpus[0], cluster.chips[0].host.dev.bar_addr[PUT_BAR])
    daemon = GmpiDaemon(cluster.drivers[0])
    out = {"pipeline_ns": cluster.hardip_pipeline_ns}
    value = 0
    for path in ("direct", "gmpi"):
        times = []
        for r in range(1 + PARAMS.get("iters", 2)):
            value += 1
            data = rng.randbytes(8)
            dst, flag = mem.tca(Place(1, GPU, DATA + 8 * value), 8), mem.tca(Place(1, GPU, FLAG), 4)
            t0 = get_sim_time("ns")
            if path == "direct":
                await device.put(dst, data, seq_addr=flag, seq_value=value)
            else:
                await daemon.request(dst, data, seq_addr=flag, seq_value=value)
            t1 = await gpus[1].wait_word(FLAG, value, 100_000)
            times.append(t1 - t0)
            await cluster.quiet()
            shadow[(1, GPU)][DATA + 8 * value:DATA + 8 * value + 8] = data
            shadow[(1, GPU)][FLAG:FLAG + 4] = value.to_bytes(4, "little")
            for (node, window), want in shadow.items():
                mem.assert_equal(Place(node, window, 0), want, f"{path} put {r}")
        out[path] = {"one_way_ns": sorted(times[1:])[len(times[1:]) // 2], "warmup_ns": times[0],
                     "times_ns": times}
        dut._log.info("GPU put, %s: %.0f ns from the kernel's store to the flag seen", path,
                      out[path]["one_way_ns"])
    # A kernel's malformed descriptor (length 0): refused, readable by the host, nothing sent;
    # the next put goes.
    value += 1
    await gpus[0].store(device.put_bar, pack(dst=mem.tca(Place(1, GPU, DATA), 8), data=b"",
                                             length=0, seq_addr=mem.tca(Place(1, GPU, FLAG), 4),
                                             seq_value=value))
    value += 1
    data = rng.randbytes(8)
    await device.put(mem.tca(Place(1, GPU, DATA), 8), data,
                     seq_addr=mem.tca(Place(1, GPU, FLAG), 4), seq_value=value)
    await gpus[1].wait_word(FLAG, value, 100_000)
    await cluster.quiet()
    shadow[(1, GPU)][DATA:DATA + 8] = data
    shadow[(1, GPU)][FLAG:FLAG + 4] = value.to_bytes(4, "little")
    for (node, window), want in shadow.items():
        mem.assert_equal(Place(node, window, 0), want, "after a malformed put")
    status = await cluster.drivers[0].put_status()
    assert status["error"] == PutError.DESC_MALFORMED and status["refused"] == 1, status
    out["refused"] = status["refused"]
    daemon.stop()
    await cluster.assert_no_drops(DROP_REASONS)
    cluster.check()
    if PARAMS.get("result_file"):
        with open(PARAMS["result_file"], "w") as f:
            json.dump(out, f, indent=1)
