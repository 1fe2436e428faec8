"""The receiving side of an HCA's reliable-connected transport.

At the first packet of a request the responder decides, as an IB responder does at the first
packet of a message:

- the queue pair is unknown or not ready: the request is dropped (the requester will report
  ``RETRY_EXC_ERR`` after its transport timer; here a NAK carries that outcome at once);
- the message sequence number is not the expected one: dropped silently (requests sent after
  one refused by an RNR NAK; the requester resends them);
- an RDMA write outside a region registered with ``REMOTE_WRITE`` (bad rkey, out of bounds):
  NAK, ``REM_ACCESS_ERR`` at the requester, nothing written (the responder's queue pair stays
  usable: a simplification, hardware may move it to error);
- a SEND or a write with immediate and no receive posted: RNR NAK, nothing consumed;
- a SEND longer than the receive buffer: ``LOC_LEN_ERR`` on the receive, NAK with
  ``REM_INV_REQ_ERR`` for the requester, queue pair to ``ERROR``, nothing written;
- a SEND into a receive buffer outside a locally writable region: ``LOC_PROT_ERR`` on the
  receive, ``REM_OP_ERR`` at the requester, queue pair to ``ERROR``, nothing written.

Otherwise every packet is written by DMA as it arrives (its buffer drains when the write
completes, which is how a slow host path throttles the link through credits), and at the last
packet the responder sends the ACK and, if a receive was consumed, its completion.
"""

from .transfer import Kind, Transfer
from .types import Access, Opcode, QPState, Status, WCOpcode

__all__ = ["Responder"]


class _Incoming:
    __slots__ = ("message", "base", "recv", "t_done", "writing", "done")

    def __init__(self, message, base, recv, t_done):
        self.message = message
        self.base = base
        self.recv = recv
        self.t_done = t_done        # latest time a DMA write of it became visible
        self.writing = 0            # DMA writes whose visibility is not known yet
        self.done = None            # the receive completion, waiting for those writes


class Responder:
    """Receive-side transport of one :class:`~.hca.HCA`."""

    def __init__(self, hca):
        self.hca = hca

    def on_packet(self, t_ps, packet, transfer):
        """Place one request packet that arrived at ``t_ps``; return when its buffer drains."""
        qp = self.hca.queue_pair(transfer.dst_qpn)
        if packet.first:
            self._begin(t_ps, qp, packet, transfer)
        incoming = qp.incoming if qp is not None else None
        if incoming is None or incoming.message is not packet.message:
            return None                              # dropped: drains at once
        t_free = None
        if packet.payload_bytes:
            data = transfer.data[packet.offset:packet.offset + packet.payload_bytes]
            incoming.writing += 1
            t_free = self.hca.dma.start_write(t_ps, incoming.base + packet.offset, data,
                                              lambda t: self._written(incoming, t))
        if packet.last:
            self._finish(t_ps, qp, packet, transfer, incoming)
        return t_free

    def _begin(self, t_ps, qp, packet, transfer):
        hca = self.hca
        src = packet.message.src
        if qp is None or qp.state is not QPState.RTS:
            self._nak(t_ps, src, transfer, Status.RETRY_EXC_ERR)
            return
        qp.incoming = None
        if transfer.msn != qp.expected_msn:
            return
        length = len(transfer.data)
        needs_recv = transfer.opcode is Opcode.SEND or transfer.imm is not None
        if transfer.opcode is Opcode.RDMA_WRITE and hca.region(
                transfer.rkey, transfer.remote_addr, length, Access.REMOTE_WRITE) is None:
            self._nak(t_ps, src, transfer, Status.REM_ACCESS_ERR)
            return
        if needs_recv and not qp.rq:
            self._nak(t_ps, src, transfer, Status.RNR_RETRY_EXC_ERR)
            return
        recv = qp.rq.popleft() if needs_recv else None
        base = transfer.remote_addr
        if transfer.opcode is Opcode.SEND:
            local, remote = None, None
            if length > recv.length:
                local, remote = Status.LOC_LEN_ERR, Status.REM_INV_REQ_ERR
            elif hca.region(recv.lkey, recv.addr, length, Access.LOCAL_WRITE) is None:
                local, remote = Status.LOC_PROT_ERR, Status.REM_OP_ERR
            if local is not None:
                t_visible = t_ps + hca.params.cqe_ps
                hca.complete(qp.recv_cq, recv.wr_id, local, WCOpcode.RECV, 0, qp, t_visible)
                self._nak(t_ps, src, transfer, remote)
                hca.fail(qp, t_visible)
                return
            base = recv.addr
        qp.incoming = _Incoming(packet.message, base, recv, t_ps)

    def _finish(self, t_ps, qp, packet, transfer, incoming):
        hca = self.hca
        qp.incoming = None
        qp.expected_msn += 1
        ack = Transfer(Kind.ACK, qp.qp_num, transfer.src_qpn, transfer.msn)
        hca.fabric.send(t_ps, hca.port, packet.message.src, 0, ack,
                        first_extra=hca.params.aeth_bytes, urgent=True)
        if incoming.recv is not None:
            incoming.done = (qp, transfer, t_ps + hca.params.cqe_ps)
            if incoming.writing == 0:
                self._complete(incoming)

    def _written(self, incoming, t_visible):
        """A DMA write of ``incoming`` is visible at ``t_visible`` (at once for a synchronous
        DMA; from a fabric event for an asynchronous one)."""
        incoming.t_done = max(incoming.t_done, t_visible)
        incoming.writing -= 1
        if incoming.writing == 0 and incoming.done is not None:
            self._complete(incoming)

    def _complete(self, incoming):
        """The receive completion: ``cqe_ps`` after the last packet, not before the data."""
        qp, transfer, t_cqe = incoming.done
        incoming.done = None
        opcode = (WCOpcode.RECV if transfer.opcode is Opcode.SEND
                  else WCOpcode.RECV_RDMA_WITH_IMM)
        self.hca.complete(qp.recv_cq, incoming.recv.wr_id, Status.SUCCESS, opcode,
                          len(transfer.data), qp, max(incoming.t_done, t_cqe),
                          imm=transfer.imm)

    def _nak(self, t_ps, dst_port, transfer, syndrome):
        hca = self.hca
        nak = Transfer(Kind.NAK, transfer.dst_qpn, transfer.src_qpn, transfer.msn,
                       syndrome=syndrome)
        hca.fabric.send(t_ps, hca.port, dst_port, 0, nak, first_extra=hca.params.aeth_bytes,
                        urgent=True)
