"""cocotb tests of the HCA endpoint (``peach2.sim.pcie.hca``) on a root complex with two GPU
models and host memory; no HDL takes part (the toplevel is a counter nobody clocks)."""

import os

import cocotb
from cocotb.utils import get_sim_time

from peach2.sim.pcie import (
    CONNECTX3_DEVICE,
    INFINIBAND_CLASS,
    MELLANOX_VENDOR,
    GpuModel,
    HcaModel,
    Host,
    attach_gpu,
    attach_hca,
    enable_hca,
)

GPU_SIZE = 1 << 20
QPI = 290e6
GPU_RATE = 870e6


async def node(**hca_args):
    """GPU0 on the host's main root port, GPU1 beside it, the HCA on a Gen3 x8 root port."""
    gpus = [GpuModel(GPU_SIZE, read_bandwidth=GPU_RATE) for _ in range(2)]
    host = Host(gpus[0])
    attach_gpu(host, gpus[1])
    hca = HcaModel(**hca_args)
    attach_hca(host, hca)
    await host.enumerate()
    for gpu in gpus[1:]:
        await host.rc.find_device(gpu.function.pcie_id).enable_device()
    dev = await enable_hca(host, hca)
    bars = [host.rc.find_device(g.function.pcie_id).bar_addr[0] for g in gpus]
    return host, gpus, bars, hca, dev


def ns():
    return get_sim_time("ns")


@cocotb.test()
async def enumerates_as_a_connectx3_on_gen3_x8(dut):
    host, _, _, hca, dev = await node()
    assert (dev.vendor_id, dev.device_id, dev.class_code) == (MELLANOX_VENDOR, CONNECTX3_DEVICE,
                                                              INFINIBAND_CLASS)
    port = hca.upstream_port
    assert (port.cur_link_speed, port.cur_link_width) == (3, 8)
    assert dev.bar_addr[0] is not None and hca.function.bar[0] & 0x6 == 0x4   # 64-bit BAR
    await dev.bar_window[0].write(0x800, b"\x01\x00\x00\x00")                # a doorbell
    t = ns()
    while hca.function.doorbells == 0 and ns() < t + 1000:
        await cocotb.triggers.Timer(10, "ns")
    assert hca.function.doorbells == 1
    host.check()


@cocotb.test()
async def host_read_pays_the_root_complex_latency(dut):
    host, _, _, hca, _ = await node()
    addr, region = host.alloc(1 << 16)
    data = os.urandom(2048)
    region[0:2048] = data
    took = {}
    for latency in (0.0, 500.0):
        host.configure_reads(latency_ns=latency)
        t0 = ns()
        assert await hca.dma_read(addr, 2048) == data
        took[latency] = ns() - t0
    dut._log.info("2 KiB host read: %.1f ns at RC latency 0, %.1f ns at 500 ns", took[0.0],
                  took[500.0])
    assert 490 <= took[500.0] - took[0.0] <= 510
    assert took[0.0] < 2048 / 7.877 + 100     # the Gen3 x8 wire time of the data, plus hops
    host.check()


@cocotb.test()
async def gpu_read_on_its_socket_is_limited_by_the_gpu_read_path(dut):
    host, gpus, bars, hca, _ = await node()
    data = os.urandom(1 << 16)
    gpus[1].memory[0:1 << 16] = data
    t0 = ns()
    assert await hca.dma_read(bars[1], 1 << 16) == data
    rate = (1 << 16) / (ns() - t0) * 1e9
    dut._log.info("64 KiB GPUDirect read on the HCA's socket: %.0f MB/s", rate / 1e6)
    assert 0.85 * GPU_RATE <= rate <= GPU_RATE
    host.check()


@cocotb.test()
async def gpu_across_qpi_runs_at_the_qpi_rate(dut):
    host, gpus, bars, hca, _ = await node(qpi_p2p_bytes_per_s=QPI, qpi_p2p_latency_ns=300.0,
                                          qpi_host_latency_ns=100.0)
    hca.function.add_range(bars[0], bars[0] + GPU_SIZE, "qpi-peer")
    data = os.urandom(1 << 16)
    gpus[0].memory[0:1 << 16] = data
    t0 = ns()
    assert await hca.dma_read(bars[0], 1 << 16) == data
    rd = (1 << 16) / (ns() - t0) * 1e9
    t0 = ns()
    visible = await hca.dma_write(bars[0] + (1 << 17), data)
    wr = (1 << 16) / (visible - t0) * 1e9
    while bytes(gpus[0].memory[1 << 17:(1 << 17) + (1 << 16)]) != data and ns() < t0 + 1e6:
        await cocotb.triggers.Timer(1, "ns")
    dut._log.info("64 KiB write across QPI: landed after %.1f ns, visible claimed at %.1f",
                  ns() - t0, visible - t0)
    assert ns() <= visible + 1
    dut._log.info("64 KiB across QPI: read %.0f MB/s, write %.0f MB/s", rd / 1e6, wr / 1e6)
    assert 0.9 * QPI <= rd <= QPI and 0.9 * QPI <= wr <= QPI
    host.check()


@cocotb.test()
async def writes_land_byte_exact_when_visible(dut):
    host, gpus, bars, hca, _ = await node(qpi_host_latency_ns=100.0)
    addr, region = host.alloc(1 << 16)
    hca.function.add_range(addr, addr + (1 << 16), "qpi-memory")
    hca.function.add_range(bars[1], bars[1] + GPU_SIZE, "peer")
    for target, memory, base in ((addr, region, 0), (bars[1], gpus[1].memory, 0)):
        data = os.urandom(5000)
        t0 = ns()
        visible = await hca.dma_write(target + 3, data)      # unaligned, crosses 4 KiB
        assert visible > t0
        while bytes(memory[base + 3:base + 3 + 5000]) != data and ns() < t0 + 20_000:
            await cocotb.triggers.Timer(1, "ns")
        landed = ns()
        dut._log.info("5000-byte write to %#x: landed after %.1f ns, visible claimed at %.1f",
                      target, landed - t0, visible - t0)
        assert landed <= visible + 1 and visible - landed < 60       # an upper bound, tight
        assert bytes(memory[base + 3:base + 3 + 5000]) == data
        assert bytes(memory[base:base + 3]) == bytes(3)
    host.check()


@cocotb.test()
async def reads_nobody_serves_fail_without_hanging(dut):
    host, _, _, hca, _ = await node()
    addr, region = host.alloc(1 << 16)
    t0 = ns()
    assert await hca.dma_read(0x7000_0000_0000, 256) is None        # no memory, no BAR: UR
    host.rc.fail_reads(addr, addr + 4096, "CA")
    assert await hca.dma_read(addr, 512) is None                    # completer abort
    assert await hca.dma_read(addr + 4096, 64) == bytes(region[4096:4160])   # still works
    assert hca.function.failed_reads == 2
    assert ns() - t0 < 10_000
    host.check()


@cocotb.test()
async def verbs_over_the_endpoint(dut):
    """The verbs HCA with its DMA served by the endpoint (``peach2.sim.system.EndpointDMA``),
    the fabric stepped behind cocotb in 112 ns windows as the machine is: a SEND from host
    memory, an RDMA write into a GPU, both byte-exact; a SEND whose source the bus refuses ends
    in an error completion and nothing hangs."""
    from peach2.sim.infiniband import Fabric
    from peach2.sim.system import EndpointDMA
    from peach2.sim.verbs import HCA, Access, HostMemory, Opcode, RecvWR, SendWR, Status

    host, gpus, bars, hca, _ = await node()
    addr, region = host.alloc(1 << 16)
    base, gbase, nowhere = 0x1000_0000, 0x2000_0000, 0x3000_0000
    hca.function.add_range(bars[1], bars[1] + GPU_SIZE, "peer")
    fabric = Fabric(2)
    dma = EndpointDMA(hca, fabric, 0, HostMemory(), [(base, base + (1 << 16), addr),
                                                     (gbase, gbase + GPU_SIZE, bars[1]),
                                                     (nowhere, nowhere + 4096, 0x7000_0000_0000)])
    peer_mem = HostMemory()
    hcas = [HCA(fabric, 0, dma), HCA(fabric, 1, peer_mem)]
    cqs = [h.create_cq() for h in hcas]
    qps = [h.create_qp(c, c) for h, c in zip(hcas, cqs)]
    hcas[0].connect(qps[0], 1, qps[1].qp_num)
    hcas[1].connect(qps[1], 0, qps[0].qp_num)
    rw = Access.LOCAL_WRITE | Access.REMOTE_WRITE
    mr0 = [hcas[0].reg_mr(base, 1 << 16), hcas[0].reg_mr(gbase, GPU_SIZE, rw),
           hcas[0].reg_mr(nowhere, 4096)]
    mr1 = hcas[1].reg_mr(0x8000, 1 << 16, rw)
    data = os.urandom(6000)
    region[0:6000] = data
    peer_mem.store(0x9000, data[::-1])
    window = 112_000

    async def until(cond, limit_ps=200_000_000):
        limit_ps += int(get_sim_time("ps"))
        while not cond():
            await cocotb.triggers.Timer(window, "ps")
            now = int(get_sim_time("ps"))
            fabric.run_until(now - 1)
            assert now < limit_ps, "the verbs traffic over the endpoint did not finish"

    start = -(-int(get_sim_time("ps")) // window) * window
    await cocotb.triggers.Timer(start - int(get_sim_time("ps")), "ps")
    fabric.run_until(start - 1)
    hcas[1].post_recv(start, qps[1], RecvWR(7, 0x8000, 8192, mr1.lkey))
    hcas[0].post_send(start, qps[0], SendWR(1, Opcode.SEND, base, 6000, mr0[0].lkey))
    hcas[1].post_send(start, qps[1], SendWR(2, Opcode.RDMA_WRITE, 0x9000, 6000, mr1.lkey,
                                            remote_addr=gbase + 64, rkey=mr0[1].rkey))
    got = {0: [], 1: []}

    def polled():
        for side in (0, 1):
            got[side] += hcas[side].poll_cq(fabric.now, cqs[side], 16)
        return len(got[0]) == 1 and len(got[1]) == 2

    await until(polled)
    assert [(w.wr_id, w.status) for w in got[0]] == [(1, Status.SUCCESS)]
    assert sorted((w.wr_id, w.status) for w in got[1]) == [(2, Status.SUCCESS),
                                                          (7, Status.SUCCESS)]
    assert peer_mem.load(0x8000, 6000) == data
    write_done = next(w.t_ps for w in got[1] if w.wr_id == 2)
    while int(get_sim_time("ps")) < write_done:
        await cocotb.triggers.Timer(window, "ps")
    assert bytes(gpus[1].memory[64:6064]) == data[::-1]
    assert dma.reads == 3 and dma.writes == 3         # one read per MTU, one write per packet
    dut._log.info("SEND of 6000 B over the endpoint completed at %.3f us after posting",
                  (got[0][0].t_ps - start) / 1e6)

    hcas[0].post_send(int(get_sim_time("ps")), qps[0],
                      SendWR(3, Opcode.SEND, nowhere, 64, mr0[2].lkey))
    await until(lambda: bool(got[0].__iadd__(hcas[0].poll_cq(fabric.now, cqs[0], 16))[1:]))
    assert [(w.wr_id, w.status) for w in got[0][1:]] == [(3, Status.LOC_QP_OP_ERR)]
    assert dma.failed == 1
    host.check()
