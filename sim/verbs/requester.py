"""The sending side of an HCA's reliable-connected transport.

For each queue pair it executes posted send requests in order (reading their data by DMA and
handing the packets to the fabric), completes them when a cumulative ACK comes back, and
handles NAKs: an RNR NAK rewinds to the refused request and resends from there after the RNR
timer (go-back-N, as IB's PSN sequencing forces: the responder drops the later requests that
were already in flight); any other NAK completes the request with its error and moves the
queue pair to ``ERROR``.

Requests are pipelined: the requester does not wait for an ACK before sending the next one
(no limit on outstanding requests is modelled).  Acknowledgements are coalesced per request
(one ACK per message, not per packet); they travel as urgent fabric messages, ahead of data
queued at the responder's port, as an HCA's responder path does not wait behind its own
requester's data.
"""

from .transfer import Kind, Transfer
from .types import Access, Opcode, QPState, Status

__all__ = ["Requester"]


class Requester:
    """Send-side transport of one :class:`~.hca.HCA`."""

    def __init__(self, hca):
        self.hca = hca

    # -- posting and transmitting -------------------------------------------------------------

    def post(self, qp, wr):
        """Take a send request posted now (scheduled by ``HCA.post_send``)."""
        hca = self.hca
        now = hca.fabric.now
        if qp.state is QPState.ERROR:
            hca.complete(qp.send_cq, wr.wr_id, Status.WR_FLUSH_ERR, wr.opcode.completion, 0,
                         qp, now + hca.params.cqe_ps)
            return
        entry = qp.new_entry(wr, now + hca.params.doorbell_ps)
        hca.fabric.schedule(entry.t_ready, hca.port, self.process, qp)

    def process(self, qp):
        """Transmit, in order, every request of ``qp`` whose doorbell has been seen."""
        now = self.hca.fabric.now
        while qp.state is QPState.RTS and qp.rnr_until is None and qp.next_tx < len(qp.sq):
            entry = qp.sq[qp.next_tx]
            if entry.t_ready > now:
                return                               # its own doorbell event comes later
            if not self._transmit(qp, entry, now):
                return
            qp.next_tx += 1

    def _transmit(self, qp, entry, now):
        hca = self.hca
        p = hca.params
        wr = entry.wr
        if wr.length > p.max_message_bytes:
            self._fail(qp, entry, Status.LOC_LEN_ERR, now + p.cqe_ps)
            return False
        ready = None
        if wr.inline_data is not None:
            data = wr.inline_data
        elif wr.length == 0:
            data = b""
        else:
            if hca.region(wr.lkey, wr.addr, wr.length, Access.LOCAL_READ) is None:
                self._fail(qp, entry, Status.LOC_PROT_ERR, now + p.cqe_ps)
                return False
            ready, chunks = [], []
            for offset in range(0, wr.length, p.mtu):
                n = min(p.mtu, wr.length - offset)
                t_done, chunk = hca.dma.read(now, wr.addr + offset, n)
                ready.append(t_done)
                chunks.append(chunk)
            data = b"".join(chunks)
        first = p.reth_bytes if wr.opcode is Opcode.RDMA_WRITE else 0
        last = p.immdt_bytes if wr.imm is not None else 0
        transfer = Transfer(Kind.REQUEST, qp.qp_num, qp.remote_qpn, entry.msn, wr.opcode, data,
                            wr.remote_addr, wr.rkey, wr.imm)
        hca.fabric.send(now, hca.port, qp.remote_port, len(data), transfer, tag=wr.wr_id,
                        first_extra=first, last_extra=last, ready_ps=ready)
        entry.transmitted = True
        return True

    # -- responses -------------------------------------------------------------------------------

    def on_response(self, t_ps, transfer):
        """Handle an ACK or NAK that arrived at ``t_ps``."""
        qp = self.hca.queue_pair(transfer.dst_qpn)
        if qp is None or qp.state is not QPState.RTS:
            return
        if transfer.kind is Kind.ACK:
            self._ack(qp, transfer.msn, t_ps)
            return
        index = qp.find(transfer.msn)
        if index is None or not qp.sq[index].transmitted:
            return                                   # stale: already flushed or rewound
        entry = qp.sq[index]
        p = self.hca.params
        if transfer.syndrome is Status.RNR_RETRY_EXC_ERR:
            if entry.rnr_left == 0:
                self._fail(qp, entry, Status.RNR_RETRY_EXC_ERR, t_ps + p.cqe_ps)
                return
            if entry.rnr_left is not None:
                entry.rnr_left -= 1
            for later in qp.sq[index:]:
                later.transmitted = False
            qp.next_tx = index
            qp.rnr_until = t_ps + p.rnr_timer_ps
            self.hca.fabric.schedule(qp.rnr_until, self.hca.port, self._resume, qp)
            return
        delay = 0
        if transfer.syndrome is Status.RETRY_EXC_ERR:
            # the peer dropped it: hardware learns only after its transport timer expired
            # retry_count + 1 times; the queue pair is failed at once (simplification)
            delay = p.transport_timeout_ps * (p.retry_count + 1)
        self._fail(qp, entry, transfer.syndrome, t_ps + delay + p.cqe_ps)

    def _ack(self, qp, msn, t_ps):
        hca = self.hca
        t_visible = t_ps + hca.params.cqe_ps
        while qp.sq and qp.sq[0].msn <= msn and qp.sq[0].transmitted:
            entry = qp.sq.pop(0)
            qp.next_tx -= 1
            wr = entry.wr
            if wr.signaled:
                hca.complete(qp.send_cq, wr.wr_id, Status.SUCCESS, wr.opcode.completion,
                             wr.length, qp, t_visible)

    def _resume(self, qp):
        if qp.rnr_until is not None and qp.rnr_until <= self.hca.fabric.now:
            qp.rnr_until = None
            self.process(qp)

    def _fail(self, qp, entry, status, t_visible):
        hca = self.hca
        qp.sq.remove(entry)
        hca.complete(qp.send_cq, entry.wr.wr_id, status, entry.wr.opcode.completion, 0, qp,
                     t_visible)
        hca.fail(qp, t_visible)
