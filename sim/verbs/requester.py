"""The sending side of an HCA's reliable-connected transport.

For each queue pair it executes posted send requests in order (reading their data by DMA and
handing the packets to the fabric), completes them when a cumulative ACK comes back, and
handles NAKs: an RNR NAK rewinds to the refused request and resends from there after the RNR
timer (go-back-N, as IB's PSN sequencing forces: the responder drops the later requests that
were already in flight); any other NAK completes the request with its error and moves the
queue pair to ``ERROR``.

Requests are pipelined: the requester does not wait for an ACK before sending the next one
(no limit on outstanding requests is modelled), nor for one request's DMA reads before issuing
the next one's; requests go to the fabric in posting order as their data comes in (at once
with a synchronous DMA, see :mod:`.dma`).  Acknowledgements are coalesced per request
(one ACK per message, not per packet); they travel as urgent fabric messages, ahead of data
queued at the responder's port, as an HCA's responder path does not wait behind its own
requester's data.
"""

from .transfer import Kind, Transfer
from .types import Access, Opcode, QPState, Status

__all__ = ["Requester"]


class _Started:
    """A started request until it goes to the fabric: its data, or the DMA reads that fetch
    it (one per MTU), or the error it will fail with once the requests before it have gone."""

    __slots__ = ("entry", "left", "ready", "chunks", "issued", "data", "error")

    def __init__(self, entry, n=0, data=b"", error=None):
        self.entry = entry
        self.left = n                               # reads not yet answered
        self.ready = [None] * n if n else None      # completion time of each read
        self.chunks = [None] * n                    # their data (None: refused by the bus)
        self.issued = n == 0                        # every read has been asked for
        self.data = data
        self.error = error


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
        """Start ``entry``: check it and issue its DMA reads.  It goes to the fabric once its
        data is in and every request started before it has gone (at once with a synchronous
        DMA, so then exactly when it is started).  Return False if the queue pair failed."""
        hca = self.hca
        p = hca.params
        wr = entry.wr
        if wr.length > p.max_message_bytes:
            started = _Started(entry, error=Status.LOC_LEN_ERR)
        elif wr.inline_data is not None:
            started = _Started(entry, data=wr.inline_data)
        elif wr.length == 0:
            started = _Started(entry)
        elif hca.region(wr.lkey, wr.addr, wr.length, Access.LOCAL_READ) is None:
            started = _Started(entry, error=Status.LOC_PROT_ERR)
        else:
            started = _Started(entry, -(-wr.length // p.mtu))
            qp.reading.append(started)
            for k, offset in enumerate(range(0, wr.length, p.mtu)):
                n = min(p.mtu, wr.length - offset)
                hca.dma.start_read(now, wr.addr + offset, n,
                                   lambda t, chunk, k=k: self._chunk(qp, started, k, t, chunk))
            started.issued = True
            return self._drain(qp, now)
        qp.reading.append(started)
        return self._drain(qp, now)

    def _chunk(self, qp, started, k, t_done, chunk):
        """One DMA read of ``started`` has completed (at once, or from a fabric event)."""
        started.ready[k] = t_done
        started.chunks[k] = chunk
        started.left -= 1
        if started.left == 0 and started.issued and started in qp.reading:
            self._drain(qp, self.hca.fabric.now)

    def _drain(self, qp, now):
        """Hand to the fabric, in posting order, every started request whose data is in.
        Return False if one failed (its queue pair is then in error)."""
        while qp.reading and qp.reading[0].left == 0 and qp.reading[0].issued:
            started = qp.reading.popleft()
            entry = started.entry
            if started.ready is not None and any(c is None for c in started.chunks):
                # the bus refused a read (UR/CA): the HCA cannot execute the request
                started.error = Status.LOC_QP_OP_ERR
            if started.error is not None:
                self._fail(qp, entry, started.error, now + self.hca.params.cqe_ps)
                return False
            if started.ready is None:                # inline or empty: no DMA
                self._send(qp, entry, now, started.data, None)
            else:
                self._send(qp, entry, now, b"".join(started.chunks), started.ready)
        return True

    def _send(self, qp, entry, now, data, ready):
        hca = self.hca
        p = hca.params
        wr = entry.wr
        first = p.reth_bytes if wr.opcode is Opcode.RDMA_WRITE else 0
        last = p.immdt_bytes if wr.imm is not None else 0
        transfer = Transfer(Kind.REQUEST, qp.qp_num, qp.remote_qpn, entry.msn, wr.opcode, data,
                            wr.remote_addr, wr.rkey, wr.imm)
        hca.fabric.send(now, hca.port, qp.remote_port, len(data), transfer, tag=wr.wr_id,
                        first_extra=first, last_extra=last, ready_ps=ready)
        entry.transmitted = True

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
            qp.reading.clear()                       # requests still reading are resent too
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
