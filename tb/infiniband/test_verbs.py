"""Unit tests of the verbs HCA model (no simulator): SEND and RDMA WRITE with and without
immediate, timing against the sum of its parts, bandwidth, RNR, every defined error, flushing,
and determinism.  Every work request must end in exactly one completion: nothing is lost.
"""

import random

import pytest

from peach2.sim.infiniband import Fabric, Params
from peach2.sim.verbs import (
    HCA,
    Access,
    HostMemory,
    Opcode,
    QPState,
    RecvWR,
    SendWR,
    Status,
    WCOpcode,
)

P = Params()
MIB = 1 << 20
FOREVER = 10 ** 13                     # 10 s of simulated time
SRC, DST = 0x1000, 0x100000            # buffers on the two hosts
RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE


class Pair:
    """Two hosts on a 4-port fabric, one connected queue pair each."""

    def __init__(self, params=P, rnr_retry=None, memory=None):
        self.fabric = Fabric(4, params)
        memory = memory or {}
        self.mem = [HostMemory(**memory), HostMemory(**memory)]
        self.hca = [HCA(self.fabric, 0, self.mem[0]), HCA(self.fabric, 1, self.mem[1])]
        self.cq = [h.create_cq() for h in self.hca]
        self.qp = [h.create_qp(cq, cq, rnr_retry) for h, cq in zip(self.hca, self.cq)]
        self.hca[0].connect(self.qp[0], 1, self.qp[1].qp_num)
        self.hca[1].connect(self.qp[1], 0, self.qp[0].qp_num)
        self.src = self.hca[0].reg_mr(SRC, 16 * MIB)
        self.dst = self.hca[1].reg_mr(DST, 16 * MIB, RW)

    def fill(self, nbytes, seed=1):
        data = random.Random(seed).randbytes(nbytes)
        self.mem[0].store(SRC, data)
        return data

    def send(self, t, wr_id, length, opcode=Opcode.SEND, **kw):
        kw.setdefault("lkey", self.src.lkey)
        if opcode is Opcode.RDMA_WRITE:
            kw.setdefault("remote_addr", DST)
            kw.setdefault("rkey", self.dst.rkey)
        self.hca[0].post_send(t, self.qp[0], SendWR(wr_id, opcode, kw.pop("addr", SRC), length,
                                                    **kw))

    def recv(self, t, wr_id, length, addr=DST, lkey=None):
        lkey = self.dst.lkey if lkey is None else lkey
        self.hca[1].post_recv(t, self.qp[1], RecvWR(wr_id, addr, length, lkey))

    def poll(self, side, t=FOREVER):
        return self.hca[side].poll_cq(t, self.cq[side], 1000)


def only(wcs):
    assert len(wcs) == 1, wcs
    return wcs[0]


# -- the operations ------------------------------------------------------------------------------

def test_send_lands_in_the_posted_receive():
    pair = Pair()
    data = pair.fill(5000)
    pair.recv(0, 7, 8192)
    pair.send(0, 1, 5000)
    sent, got = only(pair.poll(0)), only(pair.poll(1))
    assert (sent.wr_id, sent.status, sent.opcode, sent.byte_len) == (1, Status.SUCCESS,
                                                                     WCOpcode.SEND, 5000)
    assert (got.wr_id, got.status, got.opcode, got.byte_len) == (7, Status.SUCCESS,
                                                                 WCOpcode.RECV, 5000)
    assert pair.mem[1].load(DST, 5000) == data
    assert pair.mem[1].load(DST + 5000, 16) == bytes(16)


def test_rdma_write_needs_no_receive_and_immediate_consumes_one():
    pair = Pair()
    data = pair.fill(3000)
    pair.send(0, 1, 3000, Opcode.RDMA_WRITE, remote_addr=DST + 64)
    pair.send(0, 2, 100, Opcode.RDMA_WRITE, remote_addr=DST + 8192, imm=0xDEADBEEF)
    pair.recv(0, 9, 0)
    sent = pair.poll(0)
    assert [(w.wr_id, w.status, w.opcode) for w in sent] == [
        (1, Status.SUCCESS, WCOpcode.RDMA_WRITE), (2, Status.SUCCESS, WCOpcode.RDMA_WRITE)]
    got = only(pair.poll(1))
    assert (got.wr_id, got.opcode, got.byte_len, got.imm) == (
        9, WCOpcode.RECV_RDMA_WITH_IMM, 100, 0xDEADBEEF)
    assert pair.mem[1].load(DST + 64, 3000) == data
    assert pair.mem[1].load(DST + 8192, 100) == data[:100]


def test_send_with_immediate_and_inline_data():
    pair = Pair()
    pair.recv(0, 5, 64)
    pair.hca[0].post_send(0, pair.qp[0], SendWR(3, Opcode.SEND, inline_data=b"inline!", imm=42))
    assert only(pair.poll(0)).ok
    got = only(pair.poll(1))
    assert (got.byte_len, got.imm) == (7, 42)
    assert pair.mem[1].load(DST, 7) == b"inline!"
    assert pair.mem[0].reads == 0                      # the CPU copied it, no DMA read


def test_unsignaled_success_is_silent_but_errors_are_not():
    pair = Pair()
    pair.send(0, 1, 8, Opcode.RDMA_WRITE, signaled=False)
    pair.send(0, 2, 8, Opcode.RDMA_WRITE, signaled=False, rkey=0xBAD)
    wc = only(pair.poll(0))
    assert (wc.wr_id, wc.status) == (2, Status.REM_ACCESS_ERR)


def test_zero_byte_send():
    pair = Pair()
    pair.recv(0, 1, 0)
    pair.send(0, 1, 0, lkey=0)                          # no buffer, no key needed
    assert only(pair.poll(0)).ok
    got = only(pair.poll(1))
    assert got.ok and got.byte_len == 0


# -- timing ----------------------------------------------------------------------------------------

def test_small_rdma_write_timing_is_the_sum_of_its_parts():
    pair = Pair()
    pair.fill(8)
    t0 = 1_000_000
    pair.send(t0, 1, 8, Opcode.RDMA_WRITE, imm=1)
    pair.recv(0, 2, 0)
    sent, got = only(pair.poll(0)), only(pair.poll(1))
    mem = pair.mem[0]
    executed = t0 + P.doorbell_ps
    data_in_hca = mem.read_time_ps(executed, 8)
    wire = P.wire_bytes(8, P.reth_bytes + P.immdt_bytes)
    arrives = (data_in_hca + P.hca_tx_ps + P.cable_ps + P.switch_ps + P.serialize_ps(wire)
               + P.cable_ps + P.hca_rx_ps)
    data_visible = pair.mem[1].write_time_ps(arrives, 8)
    assert got.t_ps == max(data_visible, arrives + P.cqe_ps)
    ack = P.wire_bytes(0, P.aeth_bytes)
    ack_arrives = (arrives + P.hca_tx_ps + P.cable_ps + P.switch_ps + P.serialize_ps(ack)
                   + P.cable_ps + P.hca_rx_ps)
    assert sent.t_ps == ack_arrives + P.cqe_ps


def test_large_rdma_write_runs_at_the_wire_bound():
    pair = Pair()
    data = pair.fill(8 * MIB)
    pair.send(0, 1, 8 * MIB, Opcode.RDMA_WRITE)
    wc = only(pair.poll(0))
    assert pair.mem[1].load(DST, 8 * MIB) == data
    rate = 8 * MIB / (wc.t_ps / 1e12)
    wire_bound = float(P.data_bytes_per_s * P.payload_efficiency())
    assert 0.99 * wire_bound <= rate <= wire_bound


def test_a_slow_host_path_throttles_the_wire_through_credits():
    """Receive side behind a 290 MB/s path (000: GPU across QPI): the write paces the link."""
    pair = Pair(memory={"bytes_per_s": 290e6})
    data = pair.fill(2 * MIB)
    pair.send(0, 1, 2 * MIB, Opcode.RDMA_WRITE)
    wc = only(pair.poll(0))
    assert pair.mem[1].load(DST, 2 * MIB) == data
    assert 2 * MIB / (wc.t_ps / 1e12) == pytest.approx(290e6, rel=0.02)


# -- receiver not ready ---------------------------------------------------------------------------

def test_rnr_retries_after_the_timer_and_resends_later_requests_in_order():
    pair = Pair()
    data = pair.fill(64)
    pair.send(0, 1, 32)
    pair.send(0, 2, 32, addr=SRC + 32)
    late = 100_000_000                                 # receives posted 100 us later
    pair.recv(late, 10, 32)
    pair.recv(late, 11, 32, addr=DST + 32)
    sent, got = pair.poll(0), pair.poll(1)
    assert [w.wr_id for w in sent] == [1, 2] and all(w.ok for w in sent)
    assert [w.wr_id for w in got] == [10, 11] and all(w.ok for w in got)
    assert got[0].t_ps > P.rnr_timer_ps > late         # waited out the RNR timer
    assert pair.mem[1].load(DST, 64) == data


def test_rnr_retry_exhausted_is_an_error_and_flushes_the_rest():
    pair = Pair(rnr_retry=1)
    pair.send(0, 1, 8)
    pair.send(0, 2, 8)
    wcs = pair.poll(0)
    assert [(w.wr_id, w.status) for w in wcs] == [(1, Status.RNR_RETRY_EXC_ERR),
                                                  (2, Status.WR_FLUSH_ERR)]
    assert P.rnr_timer_ps < wcs[0].t_ps < 2 * P.rnr_timer_ps   # one retry, then the error
    assert pair.qp[0].state is QPState.ERROR
    assert pair.poll(1) == []


# -- errors: each gives its completion, nothing written, nothing lost ------------------------------

def test_receive_too_small_errors_on_both_sides():
    pair = Pair()
    pair.fill(100)
    pair.recv(0, 10, 64)
    pair.recv(0, 11, 4096)                             # flushed when the QP fails
    pair.send(0, 1, 100)
    pair.send(0, 2, 8)                                 # flushed at the requester
    sent, got = pair.poll(0), pair.poll(1)
    assert [(w.wr_id, w.status) for w in got] == [(10, Status.LOC_LEN_ERR),
                                                  (11, Status.WR_FLUSH_ERR)]
    assert [(w.wr_id, w.status) for w in sent] == [(1, Status.REM_INV_REQ_ERR),
                                                   (2, Status.WR_FLUSH_ERR)]
    assert pair.mem[1].load(DST, 100) == bytes(100)
    assert pair.qp[0].state is pair.qp[1].state is QPState.ERROR


def test_unregistered_local_buffer_sends_nothing():
    pair = Pair()
    pair.recv(0, 10, 64)
    pair.send(0, 1, 16, lkey=0x12345)                  # no such region
    pair.send(0, 2, 16, addr=SRC + 16 * MIB - 8)       # runs past the region's end
    wcs = pair.poll(0)
    assert [(w.wr_id, w.status) for w in wcs] == [(1, Status.LOC_PROT_ERR),
                                                  (2, Status.WR_FLUSH_ERR)]
    assert pair.mem[0].reads == 0
    assert pair.poll(1) == [] and len(pair.qp[1].rq) == 1     # the receive is still posted


@pytest.mark.parametrize("how", ["bad rkey", "out of bounds", "not remote-writable"])
def test_rdma_write_outside_registered_memory_is_refused(how):
    pair = Pair()
    pair.fill(64)
    kw = {"bad rkey": {"rkey": 0xBAD},
          "out of bounds": {"remote_addr": DST + 16 * MIB - 32},
          "not remote-writable": {"rkey": pair.hca[1].reg_mr(0x9000_0000, 4096).rkey,
                                  "remote_addr": 0x9000_0000}}[how]
    pair.send(0, 1, 64, Opcode.RDMA_WRITE, **kw)
    assert only(pair.poll(0)).status is Status.REM_ACCESS_ERR
    assert pair.mem[1].writes == 0
    assert pair.poll(1) == []


def test_receive_into_unregistered_memory():
    pair = Pair()
    pair.recv(0, 10, 64, addr=0x7000_0000)             # outside the registered region
    pair.send(0, 1, 16)
    assert only(pair.poll(1)).status is Status.LOC_PROT_ERR
    assert only(pair.poll(0)).status is Status.REM_OP_ERR
    assert pair.mem[1].writes == 0


def test_request_to_a_failed_peer_times_out():
    pair = Pair()
    pair.hca[1].post_send(0, pair.qp[1], SendWR(9, Opcode.SEND, 0, 8, 0xBAD))
    pair.send(1_000_000, 1, 8, Opcode.RDMA_WRITE)
    assert only(pair.poll(1)).status is Status.LOC_PROT_ERR
    wc = only(pair.poll(0, 100 * FOREVER))
    assert wc.status is Status.RETRY_EXC_ERR
    assert wc.t_ps > P.transport_timeout_ps * (P.retry_count + 1)    # about 34 s
    assert pair.mem[1].writes == 0


def test_deregistered_region_is_unregistered():
    pair = Pair()
    pair.hca[1].dereg_mr(pair.dst)
    pair.send(0, 1, 8, Opcode.RDMA_WRITE)
    assert only(pair.poll(0)).status is Status.REM_ACCESS_ERR
    with pytest.raises(ValueError, match="not registered"):
        pair.hca[1].dereg_mr(pair.dst)


def test_posting_to_a_failed_queue_pair_flushes():
    pair = Pair()
    pair.send(0, 1, 8, lkey=0xBAD)
    pair.poll(0)
    t = pair.fabric.now
    pair.send(t, 2, 8)
    pair.hca[0].post_recv(t, pair.qp[0], RecvWR(3, SRC, 8, pair.src.lkey))
    assert sorted((w.wr_id, w.status) for w in pair.poll(0, t + P.cqe_ps)) == [
        (2, Status.WR_FLUSH_ERR), (3, Status.WR_FLUSH_ERR)]


def test_programming_errors_raise():
    pair = Pair()
    hca, qp = pair.hca[0], pair.qp[0]
    with pytest.raises(ValueError, match="not connected"):
        hca.post_send(0, hca.create_qp(pair.cq[0], pair.cq[0]), SendWR(1, Opcode.SEND))
    with pytest.raises(ValueError, match="does not belong"):
        hca.post_send(0, pair.qp[1], SendWR(1, Opcode.SEND))
    with pytest.raises(ValueError, match="another port"):
        hca.connect(hca.create_qp(pair.cq[0], pair.cq[0]), 0, 0)
    with pytest.raises(ValueError, match="imm"):
        SendWR(1, Opcode.SEND, imm=1 << 32)
    with pytest.raises(ValueError, match="length"):
        RecvWR(1, 0, -1)
    with pytest.raises(ValueError, match="addr"):
        hca.reg_mr(-1, 10)
    pair.poll(0, 1_000)
    with pytest.raises(ValueError, match="before the fabric's time"):
        hca.post_send(999, qp, SendWR(1, Opcode.SEND))


# -- determinism and accounting ----------------------------------------------------------------

def _traffic(seed):
    rng = random.Random(seed)
    pair = Pair()
    pair.fill(1 << 16, seed)
    posted = 0
    for k in range(60):
        t = rng.randrange(0, 200_000_000)
        n = rng.choice([0, 8, 100, 2048, 5000, 20000])
        off = rng.randrange(0, 1 << 15)
        if rng.random() < 0.5:
            pair.recv(t, 1000 + k, 32768, addr=DST + off)
            pair.send(t, k, n, addr=SRC + off)
        else:
            imm = k if rng.random() < 0.3 else None
            pair.send(t, k, n, Opcode.RDMA_WRITE, addr=SRC + off, remote_addr=DST + off,
                      imm=imm)
            if imm is not None:
                pair.recv(t + rng.randrange(0, 2_000_000), 1000 + k, 32768)   # maybe RNR
        posted += 1
    pair.fabric.run_until(5 * 10 ** 9)
    wcs = [(w.wr_id, w.status, w.opcode, w.byte_len, w.t_ps, w.imm)
           for side in (0, 1) for w in pair.poll(side)]
    return wcs, posted, pair.mem[1].load(DST, 1 << 16)


def test_same_inputs_same_outputs_and_every_send_completes():
    first = _traffic(5)
    assert first == _traffic(5)
    wcs, posted, _ = first
    sends = [w for w in wcs if w[2] in (WCOpcode.SEND, WCOpcode.RDMA_WRITE)]
    assert sorted(w[0] for w in sends) == list(range(posted))
    assert all(w[1] is Status.SUCCESS for w in wcs)
