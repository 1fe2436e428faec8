"""Unit tests of the node model (no simulator): the address map and its bytes, the three kinds
of device path (host, GPUDirect RDMA on the same socket, across QPI) with their rates and
latencies against NodeParams, contention on shared channels, the copy engines, the verbs HCA
running over the node, bad input, and determinism.

::

      host0  gpu0 gpu1 PEACH2          host1  HCA  gpu2 gpu3
        \\     |    |    /                \\     |    |    /
         root complex 0 ======= QPI ======= root complex 1
"""

import math
import random

import pytest

from peach2.sim.infiniband import Fabric
from peach2.sim.node import Channel, Memory, Node, NodeParams
from peach2.sim.verbs import HCA, Access, Opcode, RecvWR, SendWR, Status

P = NodeParams()
MIB = 1 << 20


def ps(nbytes, rate):
    """Service time of ``nbytes`` at ``rate`` bytes/s, as the channels round it."""
    return Channel("x", rate).service_ps(nbytes)


# -- parameters and the address map ----------------------------------------------------------------

def test_params_follow_figure_1():
    assert (P.sockets, P.gpu_sockets, P.hca_socket, P.peach2_socket) == (2, (0, 0, 1, 1), 1, 0)
    assert P.qpi_p2p_bytes_per_s == 290e6
    assert P.gpus == 4


@pytest.mark.parametrize("field, value", [
    ("hca_socket", 2), ("gpu_sockets", (0, 5)), ("gpu_sockets", ()), ("copy_launch_ps", -1),
    ("qpi_p2p_bytes_per_s", 0), ("gpu_read_bytes_per_s", float("nan")), ("host_bytes", 1),
    ("memcpy_ps", 1.5), ("sockets", 0)])
def test_params_refuse_nonsense(field, value):
    with pytest.raises(ValueError, match=field.split("[")[0]):
        NodeParams(**{field: value})


def test_address_map_and_bytes():
    node = Node()
    names = [m.name for m in node.memories]
    assert names == ["host0", "host1", "gpu0", "gpu1", "gpu2", "gpu3"]
    assert [m.socket for m in node.memories] == [0, 1, 0, 0, 1, 1]
    gpu2 = node.memory("gpu2")
    addr = node.alloc("gpu2", 10_000)
    assert node.locate(addr) is gpu2 and gpu2.is_gpu
    assert node.load(addr, 16) == bytes(16)                   # sparse: zeros until written
    data = random.Random(1).randbytes(10_000)
    node.store(addr, data)                                    # crosses page boundaries
    assert node.load(addr, 10_000) == data
    with pytest.raises(ValueError, match="no memory"):
        node.locate(5)
    with pytest.raises(ValueError, match="no memory 'gpu9'"):
        node.memory("gpu9")


def test_allocator_reuses_and_merges():
    m = Memory("t", 1 << 20, 1 << 16, 0)
    a, b, c = m.alloc(100), m.alloc(100), m.alloc(100)
    assert a % 64 == 0 and b >= a + 100 and c >= b + 100
    m.free(b)
    assert m.alloc(64) == b                                   # first fit takes the hole
    m.free(a)
    m.free(b)
    m.free(c)
    assert m.free_bytes() == 1 << 16 and len(m._free) == 1    # merged back into one block
    with pytest.raises(MemoryError):
        m.alloc(1 << 17)
    with pytest.raises(ValueError, match="not an allocated block"):
        m.free(a)


# -- the three kinds of path -----------------------------------------------------------------------

@pytest.mark.parametrize("device, memory, kind", [
    ("hca", "host1", "host"), ("hca", "host0", "host"), ("hca", "gpu2", "gdr"),
    ("hca", "gpu3", "gdr"), ("hca", "gpu0", "qpi"), ("hca", "gpu1", "qpi"),
    ("peach2", "gpu0", "gdr"), ("peach2", "gpu2", "qpi"), ("peach2", "host0", "host")])
def test_route_follows_the_sockets(device, memory, kind):
    node = Node()
    assert node.dma(device).kind(node.memory(memory).base) == kind


def test_host_memory_at_full_rate():
    """(a) HCA -> host memory of its socket: 7.2 GB/s (Gen3 x8) plus the stated latencies."""
    node = Node()
    dma = node.dma("hca")
    addr = node.alloc("host1", MIB)
    t, _ = dma.read(0, addr, MIB)
    assert t == ps(MIB, P.hca_pcie_bytes_per_s) + P.host_read_latency_ps
    node2 = Node()
    t_far, _ = node2.dma("hca").read(0, node2.alloc("host0", MIB), MIB)
    assert t_far == t + P.qpi_host_latency_ps             # across QPI: no rate cap
    t_w = Node().dma("hca").write(0, addr, bytes(MIB))
    assert t_w == ps(MIB, P.hca_pcie_bytes_per_s) + P.host_write_latency_ps


def test_gdr_same_socket_reads_paced_writes_at_pcie_rate():
    """(b) GPU on the HCA's socket: BAR reads at 2.8 GB/s, writes at the PCIe rate."""
    node = Node()
    addr = node.alloc("gpu2", MIB)
    t, _ = node.dma("hca").read(0, addr, MIB)
    assert t == ps(MIB, P.gpu_read_bytes_per_s) + P.gpu_read_latency_ps
    t_w = node.dma("hca").write(0, addr, bytes(MIB))
    rate = min(P.hca_pcie_bytes_per_s, P.gpu_pcie_bytes_per_s)
    assert t_w == ps(MIB, rate) + P.gpu_write_latency_ps


def test_qpi_paced_both_ways():
    """(c) GPU on the other socket: ~290 MB/s each way, whatever the size."""
    node = Node()
    addr = node.alloc("gpu0", MIB)
    t, _ = node.dma("hca").read(0, addr, MIB)
    assert t == ps(MIB, P.qpi_p2p_bytes_per_s) + P.gpu_read_latency_ps + P.qpi_p2p_latency_ps
    t_w = Node().dma("hca").write(0, addr, bytes(MIB))
    assert t_w == (ps(MIB, P.qpi_p2p_bytes_per_s) + P.gpu_write_latency_ps
                   + P.qpi_p2p_latency_ps)
    assert MIB / (t_w * 1e-12) < 290e6


def test_channels_are_shared():
    node = Node()
    dma = node.dma("hca")
    a, b = node.alloc("gpu2", MIB), node.alloc("gpu3", MIB)
    one = ps(MIB, P.gpu_read_bytes_per_s)
    t1, _ = dma.read(0, a, MIB)
    t2, _ = dma.read(0, a, MIB)                 # same GPU BAR: waits for the first
    assert t2 - t1 == one
    t3, _ = dma.read(0, b, MIB)                 # another GPU: only the HCA link is shared
    assert t3 < t2
    assert node.dma("hca").path_for(a).reads == 2


def test_dma_bytes_round_trip_and_bad_addresses():
    node = Node()
    dma = node.dma("hca")
    addr = node.alloc("gpu0", 5000)
    data = random.Random(3).randbytes(5000)
    dma.write(0, addr, data)
    assert dma.read(0, addr, 5000)[1] == data == node.load(addr, 5000)
    with pytest.raises(ValueError, match="no memory"):
        dma.read(0, 123, 8)
    end = node.memory("gpu0").base + P.gpu_bytes
    with pytest.raises(ValueError, match="run past the end"):
        dma.write(0, end - 4, bytes(8))
    with pytest.raises(ValueError, match="no device"):
        node.dma("nic")


# -- copy engines ----------------------------------------------------------------------------------

def test_copy_engine_rate_launch_and_bytes():
    node = Node()
    g, h = node.alloc("gpu2", MIB), node.alloc("host1", MIB)
    data = random.Random(4).randbytes(MIB)
    node.store(g, data)
    t = node.copy(0, h, g, MIB)                                   # device -> host
    assert t == P.copy_launch_ps + ps(MIB, P.copy_bytes_per_s)
    assert node.load(h, MIB) == data
    assert node.copy_engine(2).time_ps(MIB) == t
    node2 = Node()
    g2, h_far = node2.alloc("gpu2", MIB), node2.alloc("host0", MIB)
    assert node2.copy(0, g2, h_far, MIB) == t + P.qpi_host_latency_ps   # other socket's memory


def test_two_engines_overlap_one_engine_serialises():
    node = Node()
    g, h = node.alloc("gpu2", 2 * MIB), node.alloc("host1", 2 * MIB)
    one = P.copy_launch_ps + ps(MIB, P.copy_bytes_per_s)
    d2h = node.copy(0, h, g, MIB)
    h2d = node.copy(0, g + MIB, h + MIB, MIB)                 # other direction: own engine
    assert d2h == h2d == one
    again = node.copy(0, h + MIB, g + MIB, MIB)               # same direction: queued
    assert again == one + ps(MIB, P.copy_bytes_per_s)


def test_memcpy_and_device_to_device():
    node = Node()
    a, b = node.alloc("host1", 4096), node.alloc("host1", 4096)
    node.store(a, b"x" * 4096)
    assert node.copy(0, b, a, 4096) == P.memcpy_ps + ps(4096, P.memcpy_bytes_per_s)
    assert node.load(b, 4096) == b"x" * 4096
    g0, g2 = node.alloc("gpu0", 4096), node.alloc("gpu2", 4096)
    node.store(g0, b"y" * 4096)
    t = node.copy(0, g2, g0, 4096)                             # across QPI
    assert node.load(g2, 4096) == b"y" * 4096
    assert t >= P.copy_launch_ps + ps(4096, P.qpi_p2p_bytes_per_s)
    with pytest.raises(ValueError, match="cannot touch GPU"):
        node.memcpy(0, g2, a, 16)


# -- the verbs HCA over the node -------------------------------------------------------------------

def _pair(where):
    fabric = Fabric(2)
    nodes = [Node(), Node()]
    hcas = [HCA(fabric, i, n.dma("hca")) for i, n in enumerate(nodes)]
    cqs = [h.create_cq() for h in hcas]
    qps = [h.create_qp(c, c) for h, c in zip(hcas, cqs)]
    hcas[0].connect(qps[0], 1, qps[1].qp_num)
    hcas[1].connect(qps[1], 0, qps[0].qp_num)
    src, dst = nodes[0].alloc(where, MIB), nodes[1].alloc(where, MIB)
    rw = Access.LOCAL_WRITE | Access.REMOTE_WRITE
    mrs = [hcas[0].reg_mr(src, MIB), hcas[1].reg_mr(dst, MIB, rw)]
    return fabric, nodes, hcas, cqs, qps, (src, dst), mrs


@pytest.mark.parametrize("where", ["host1", "gpu2", "gpu0"])
def test_rdma_write_gpu_to_gpu_through_the_node(where):
    fabric, nodes, hcas, cqs, qps, (src, dst), mrs = _pair(where)
    n = 256 << 10
    data = random.Random(5).randbytes(n)
    nodes[0].store(src, data)
    hcas[1].post_recv(0, qps[1], RecvWR(1, dst, 0, mrs[1].lkey))
    hcas[0].post_send(0, qps[0], SendWR(2, Opcode.RDMA_WRITE, src, n, mrs[0].lkey,
                                        remote_addr=dst, rkey=mrs[1].rkey, imm=7))
    wc = hcas[1].poll_cq(10 ** 10, cqs[1])[0]
    assert wc.status is Status.SUCCESS and wc.imm == 7
    assert nodes[1].load(dst, n) == data
    rate = n / (wc.t_ps * 1e-12)
    if where == "gpu0":                         # both ends across QPI
        assert rate < 290e6
    elif where == "gpu2":                       # paced by the source GPU's BAR reads
        assert rate < P.gpu_read_bytes_per_s
    else:
        assert rate > 3e9                       # the link (4 GB/s) is the limit


def test_deterministic():
    def run():
        fabric, nodes, hcas, cqs, qps, (src, dst), mrs = _pair("gpu0")
        nodes[0].store(src, bytes(range(256)) * 64)
        for k in range(4):
            hcas[0].post_send(k * 1000, qps[0], SendWR(k, Opcode.RDMA_WRITE, src, 16384,
                                                       mrs[0].lkey, remote_addr=dst,
                                                       rkey=mrs[1].rkey))
        return [(wc.wr_id, wc.t_ps) for wc in hcas[0].poll_cq(10 ** 10, cqs[0])]
    assert run() == run()
    assert math.isfinite(run()[-1][1])
