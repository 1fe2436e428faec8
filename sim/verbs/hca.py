"""A host channel adapter with a verbs interface, on one port of a :class:`~.fabric.Fabric`.

::

    host software --post_send/post_recv/poll_cq--> HCA --fabric.send--> switch --> peer HCA
                                                    |  ^
                           DMA.read (source data) --+  +-- DMA.write (received data)

The HCA reaches host (or GPU) memory only through a :class:`~.dma.DMA` object, so the same
verbs run over the in-memory stand-in of the tests, the node model's paths or a PCIe endpoint
answering in another simulator's time.  Its transport
is the reliable-connected service: the :class:`~.requester.Requester` sends requests and
handles ACKs and NAKs, the :class:`~.responder.Responder` checks and places incoming requests.

Timing of one request (each term a :class:`Params` field or a DMA call):
``post_send`` at ``t`` -> executed at ``t + doorbell_ps`` -> source data read by DMA (one read
per MTU, pipelined by the DMA's own pacing) -> packets on the fabric -> at the peer, each packet
written by DMA as it arrives -> ACK at the last packet -> the sender's completion visible
``cqe_ps`` after the ACK arrives; the receiver's completion visible ``cqe_ps`` after the last
packet, and not before the data.

Errors follow InfiniBand: a bad lkey gives ``LOC_PROT_ERR`` and nothing is sent; a receive buffer
too small gives ``LOC_LEN_ERR`` at the receiver and ``REM_INV_REQ_ERR`` at the sender; an RDMA
write outside the peer's registered, remotely writable memory gives ``REM_ACCESS_ERR`` and
nothing is written.  An error completion moves the queue pair to ``ERROR``; every other request
it holds completes with ``WR_FLUSH_ERR``, so nothing is lost silently.  A request that finds no
receive posted gets an RNR NAK and is sent again after ``rnr_timer_ps`` (go-back-N: later
requests are resent after it), up to ``rnr_retry`` times (7: for ever).
"""


from .cq import CompletionQueue
from .dma import DMA
from .qp import QueuePair
from .region import MemoryRegion
from .requester import Requester
from .responder import Responder
from .transfer import Kind
from .types import Access, QPState, RecvWR, SendWR, Status, WCOpcode, WorkCompletion

__all__ = ["HCA"]


class HCA:
    """A ConnectX-3-class HCA on ``fabric`` port ``port``, with host memory behind ``dma``.

    Members
    -------
    fabric : Fabric
        The switch it is cabled to (shared by all HCAs and the event clock).
    port : int
        Its port number, which is also its address (LID) for peers.
    dma : DMA
        How it reads and writes host memory.
    params : Params
        The fabric's parameters (HCA timings included).
    """

    def __init__(self, fabric, port, dma):
        if not all(callable(getattr(fabric, m, None)) for m in ("attach", "send", "schedule")):
            raise TypeError(f"fabric must offer Fabric's interface (attach, send, schedule), "
                            f"not {type(fabric).__name__}")
        if not isinstance(dma, DMA):
            raise TypeError(f"dma must implement DMA (read/write), not {type(dma).__name__}")
        fabric.attach(port, on_packet=self._on_packet)
        self.fabric = fabric
        self.port = port
        self.dma = dma
        self.params = fabric.params
        self._regions = {}
        self._next_key = 1
        self._qps = {}
        self._cqs = 0
        self._requester = Requester(self)
        self._responder = Responder(self)

    # -- resources ------------------------------------------------------------------------------

    def reg_mr(self, addr, length, access=Access.LOCAL_WRITE):
        """Register ``[addr, addr + length)`` with ``access``; return its :class:`MemoryRegion`."""
        for name, value, bits in (("addr", addr, 64), ("length", length, 64)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
                raise ValueError(f"{name} must be a 64-bit unsigned integer, not {value!r}")
        if addr + length > 1 << 64:
            raise ValueError(f"region of {length} bytes at {addr:#x} leaves the address space")
        if not isinstance(access, Access):
            raise ValueError(f"access must be an Access flag, not {access!r}")
        key = (self._next_key << 8) | (self.port & 0xFF)
        self._next_key += 1
        region = MemoryRegion(addr, length, access, key, key)
        self._regions[key] = region
        return region

    def dereg_mr(self, region):
        """Deregister ``region``; later requests naming its keys fail as unregistered."""
        if self._regions.get(getattr(region, "lkey", None)) is not region:
            raise ValueError(f"{region!r} is not registered on the HCA at port {self.port}")
        del self._regions[region.lkey]

    def create_cq(self):
        """Create and return a :class:`CompletionQueue`."""
        self._cqs += 1
        return CompletionQueue(self._cqs - 1)

    def create_qp(self, send_cq, recv_cq, rnr_retry=None):
        """Create an RC :class:`QueuePair` reporting to ``send_cq`` and ``recv_cq``."""
        for cq in (send_cq, recv_cq):
            if not isinstance(cq, CompletionQueue):
                raise TypeError(f"expected a CompletionQueue, not {type(cq).__name__}")
        rnr_retry = self.params.rnr_retry if rnr_retry is None else rnr_retry
        if isinstance(rnr_retry, bool) or not isinstance(rnr_retry, int) \
                or not 0 <= rnr_retry <= 7:
            raise ValueError(f"rnr_retry must be 0..7 (7: for ever), not {rnr_retry!r}")
        qp = QueuePair(len(self._qps), send_cq, recv_cq, rnr_retry)
        self._qps[qp.qp_num] = qp
        return qp

    def connect(self, qp, remote_port, remote_qpn):
        """Connect ``qp`` to queue pair ``remote_qpn`` of the HCA at ``remote_port``."""
        self._own(qp)
        if isinstance(remote_port, bool) or not isinstance(remote_port, int) \
                or not 0 <= remote_port < self.fabric.n_ports or remote_port == self.port:
            raise ValueError(f"remote_port must be another port of the fabric "
                             f"(0..{self.fabric.n_ports - 1}, not {self.port}), "
                             f"not {remote_port!r}")
        qp.connect(remote_port, remote_qpn)

    # -- work ------------------------------------------------------------------------------------

    def post_send(self, t_ps, qp, wr):
        """Post a send request at ``t_ps``; its completion arrives on ``qp.send_cq``."""
        self._check_time(t_ps)
        self._own(qp)
        if not isinstance(wr, SendWR):
            raise TypeError(f"post_send takes a SendWR, not {type(wr).__name__}")
        if qp.state is QPState.INIT:
            raise ValueError(f"queue pair {qp.qp_num} is not connected")
        self.fabric.schedule(t_ps, self.port, self._requester.post, qp, wr)

    def post_recv(self, t_ps, qp, wr):
        """Post a receive buffer at ``t_ps``; it is available to requests arriving later."""
        self._check_time(t_ps)
        self._own(qp)
        if not isinstance(wr, RecvWR):
            raise TypeError(f"post_recv takes a RecvWR, not {type(wr).__name__}")
        self.fabric.schedule(t_ps, self.port, self._add_recv, qp, wr)

    def poll_cq(self, t_ps, cq, max_entries=16):
        """Run the fabric to ``t_ps`` and return up to ``max_entries`` completions visible then."""
        self._check_time(t_ps)
        self.fabric.run_until(t_ps)
        return cq.poll(t_ps, max_entries)

    # -- used by the requester and the responder -----------------------------------------------

    def region(self, key, addr, length, access):
        """Return the region of ``key`` covering the range with ``access``, or ``None``."""
        region = self._regions.get(key)
        if region is None or not region.covers(addr, length, access):
            return None
        return region

    def queue_pair(self, qp_num):
        """Return queue pair ``qp_num`` of this HCA, or ``None``."""
        return self._qps.get(qp_num)

    def complete(self, cq, wr_id, status, opcode, byte_len, qp, t_ps, imm=None):
        """Add a completion visible at ``t_ps`` to ``cq``."""
        cq.push(WorkCompletion(wr_id, status, opcode, byte_len, qp.qp_num, t_ps, imm))

    def fail(self, qp, t_ps):
        """Move ``qp`` to ``ERROR``: flush every request it still holds, visible at ``t_ps``."""
        if qp.state is QPState.ERROR:
            return
        qp.state = QPState.ERROR
        for entry in qp.sq:
            self.complete(qp.send_cq, entry.wr.wr_id, Status.WR_FLUSH_ERR,
                          entry.wr.opcode.completion, 0, qp, t_ps)
        for wr in qp.rq:
            self.complete(qp.recv_cq, wr.wr_id, Status.WR_FLUSH_ERR, WCOpcode.RECV, 0, qp, t_ps)
        qp.sq.clear()
        qp.rq.clear()
        qp.next_tx = 0
        qp.incoming = None
        qp.rnr_until = None
        qp.reading.clear()

    # -- internals -----------------------------------------------------------------------------

    def _add_recv(self, qp, wr):
        if qp.state is QPState.ERROR:
            self.complete(qp.recv_cq, wr.wr_id, Status.WR_FLUSH_ERR, WCOpcode.RECV, 0, qp,
                          self.fabric.now + self.params.cqe_ps)
        else:
            qp.rq.append(wr)

    def _on_packet(self, t_ps, packet):
        transfer = packet.message.payload
        if transfer.kind is Kind.REQUEST:
            return self._responder.on_packet(t_ps, packet, transfer)
        self._requester.on_response(t_ps, transfer)
        return None

    def _own(self, qp):
        if self._qps.get(getattr(qp, "qp_num", None)) is not qp:
            raise ValueError(f"{qp!r} does not belong to the HCA at port {self.port}")

    def _check_time(self, t_ps):
        if isinstance(t_ps, bool) or not isinstance(t_ps, int):
            raise ValueError(f"t_ps must be an integer number of picoseconds, not {t_ps!r}")
        if t_ps < self.fabric.now:
            raise ValueError(f"t_ps = {t_ps} is before the fabric's time {self.fabric.now} ps")
