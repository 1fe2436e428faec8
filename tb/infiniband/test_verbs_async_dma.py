"""The verbs HCA over an asynchronous DMA (``DMA.start_read`` / ``start_write`` answered later,
from fabric events), as a PCIe endpoint in another simulator answers it: the same times as the
synchronous DMA when the answers come at the same times, in-order execution while reads are
outstanding, the receive completion after the data, and an error completion (not a hang) for
a read the bus refuses.
"""

import random

from peach2.sim.infiniband import Fabric
from peach2.sim.verbs import HCA, Access, HostMemory, Opcode, QPState, RecvWR, SendWR, Status

SRC, DST = 0x1000, 0x100000
RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE
FOREVER = 10 ** 13


class LaterMemory(HostMemory):
    """A :class:`HostMemory` that answers through fabric events at the completion time (as an
    asynchronous DMA does), ``extra_ps`` later than the synchronous model would; reads touching
    ``[bad_lo, bad_hi)`` are refused (``data = None``)."""

    def __init__(self, fabric, port, extra_ps=0, bad=(0, 0)):
        super().__init__()
        self.fabric, self.port, self.extra_ps, self.bad = fabric, port, extra_ps, bad
        self.late = 0

    def start_read(self, t_ps, addr, nbytes, done):
        t, data = self.read(t_ps, addr, nbytes)
        if self.bad[0] < addr + nbytes and addr < self.bad[1]:
            data = None
        self.late += 1
        self.fabric.schedule(t + self.extra_ps, self.port, done, t + self.extra_ps, data)

    def start_write(self, t_ps, addr, data, done=None):
        t = self.write(t_ps, addr, data)
        self.late += 1
        if done is not None:
            self.fabric.schedule(t + self.extra_ps, self.port, done, t + self.extra_ps)
        return t_ps                                  # handed over at once


def pair(later=False, **kw):
    fabric = Fabric(4)
    mem = [LaterMemory(fabric, i, **kw) if later else HostMemory() for i in range(2)]
    hca = [HCA(fabric, i, mem[i]) for i in range(2)]
    cq = [h.create_cq() for h in hca]
    qp = [h.create_qp(c, c) for h, c in zip(hca, cq)]
    hca[0].connect(qp[0], 1, qp[1].qp_num)
    hca[1].connect(qp[1], 0, qp[0].qp_num)
    src = hca[0].reg_mr(SRC, 1 << 20)
    dst = hca[1].reg_mr(DST, 1 << 20, RW)
    return fabric, mem, hca, cq, qp, src, dst


def run(later, sizes, **kw):
    _, mem, hca, cq, qp, src, dst = pair(later, **kw)
    data = random.Random(5).randbytes(1 << 16)
    mem[0].store(SRC, data)
    for i, n in enumerate(sizes):
        hca[1].post_recv(0, qp[1], RecvWR(100 + i, DST + 4096 * i, 4096, dst.lkey))
        hca[0].post_send(1000 * i, qp[0], SendWR(i, Opcode.SEND, SRC + 64 * i, n, src.lkey))
    sent = hca[0].poll_cq(FOREVER, cq[0], 100)
    got = hca[1].poll_cq(FOREVER, cq[1], 100)
    for i, n in enumerate(sizes):
        assert mem[1].load(DST + 4096 * i, n) == data[64 * i:64 * i + n]
    return mem, [(w.wr_id, w.status, w.t_ps) for w in sent], \
        [(w.wr_id, w.status, w.byte_len, w.t_ps) for w in got]


def test_asynchronous_answers_at_the_same_times_give_the_same_completions():
    sizes = [8, 2048, 100, 0, 1500]                  # each at most one MTU: one read each
    sync = run(False, sizes)
    later = run(True, sizes)
    assert later[0][0].late > 0 and later[0][1].late > 0   # really answered from events
    assert later[1:] == sync[1:]
    assert all(s == Status.SUCCESS for _, s, _ in later[1])


def test_late_answers_delay_every_request_in_order():
    sizes = [4096, 8, 8]                             # two reads for the first
    _, sent0, got0 = run(False, sizes)
    _, sent, got = run(True, sizes, extra_ps=3_000_000)
    assert [w[0] for w in sent] == [0, 1, 2] and [w[0] for w in got] == [100, 101, 102]
    assert all(a[2] >= b[2] + 3_000_000 for a, b in zip(sent, sent0))
    assert all(a[3] >= b[3] + 3_000_000 for a, b in zip(got, got0))


def test_receive_completion_waits_for_the_last_write():
    _, sent, got = run(True, [2048], extra_ps=50_000_000)     # writes visible 50 us late
    (_, _, t_sent), = sent
    (_, _, _, t_got), = got
    assert t_got > t_sent                             # the ACK does not wait, the data does


def test_a_read_the_bus_refuses_is_an_error_completion_and_flushes():
    fabric, mem, hca, cq, qp, src, dst = pair(True, bad=(SRC + 4096, SRC + 8192))
    hca[1].post_recv(0, qp[1], RecvWR(7, DST, 8192, dst.lkey))
    hca[0].post_send(0, qp[0], SendWR(1, Opcode.SEND, SRC + 2048, 4096, src.lkey))
    hca[0].post_send(0, qp[0], SendWR(2, Opcode.SEND, SRC, 8, src.lkey))
    sent = hca[0].poll_cq(FOREVER, cq[0], 100)
    assert [(w.wr_id, w.status) for w in sent] == [(1, Status.LOC_QP_OP_ERR),
                                                   (2, Status.WR_FLUSH_ERR)]
    assert qp[0].state is QPState.ERROR
    assert hca[1].poll_cq(FOREVER, cq[1], 100) == []  # nothing sent, nothing received
    assert mem[1].writes == 0 and fabric.idle()
