"""A reliable-connected queue pair: its queues, state and sequence numbers."""

from collections import deque

from .types import QPState

__all__ = ["QueuePair"]


class SendEntry:
    """A posted send request while the HCA works on it (requester side)."""

    __slots__ = ("wr", "msn", "t_ready", "rnr_left", "transmitted")

    def __init__(self, wr, msn, t_ready, rnr_left):
        self.wr = wr
        self.msn = msn
        self.t_ready = t_ready          # doorbell seen: the HCA may execute it from here
        self.rnr_left = rnr_left        # RNR retries left (None: for ever)
        self.transmitted = False


class QueuePair:
    """State of one RC queue pair; work is posted and polled through its HCA.

    Members
    -------
    qp_num : int
        Number of the queue pair on its HCA.
    send_cq, recv_cq : CompletionQueue
        Where send and receive completions go.
    state : QPState
        ``INIT`` until :meth:`connect`, then ``RTS``; ``ERROR`` after a fatal completion.
    remote_port, remote_qpn : int or None
        The connected peer.
    rnr_retry : int
        RNR retries per request (7: for ever, as ``MV2_DEFAULT_RNR_RETRY``).
    """

    def __init__(self, qp_num, send_cq, recv_cq, rnr_retry):
        self.qp_num = qp_num
        self.send_cq = send_cq
        self.recv_cq = recv_cq
        self.rnr_retry = rnr_retry
        self.state = QPState.INIT
        self.remote_port = None
        self.remote_qpn = None
        # requester
        self.sq = []                    # SendEntry, oldest first, until acknowledged
        self.next_tx = 0                # index in sq of the next entry to transmit
        self.next_msn = 0
        self.rnr_until = None           # waiting out an RNR NAK until this time
        self.reading = deque()          # started requests not yet handed to the fabric,
                                        # waiting for their DMA reads (oldest first)
        # responder
        self.rq = deque()               # posted RecvWR
        self.expected_msn = 0
        self.incoming = None            # state of the request being received

    def connect(self, remote_port, remote_qpn):
        """Connect to queue pair ``remote_qpn`` on the HCA at ``remote_port`` (INIT -> RTS).

        The peer must connect back to this one; connection management is out of scope.
        """
        for name, value in (("remote_port", remote_port), ("remote_qpn", remote_qpn)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
        if self.state is not QPState.INIT:
            raise ValueError(f"queue pair {self.qp_num} is {self.state.value}, not init")
        self.remote_port = remote_port
        self.remote_qpn = remote_qpn
        self.state = QPState.RTS

    def new_entry(self, wr, t_ready):
        """Append a send request with the next message sequence number; return its entry."""
        rnr_left = None if self.rnr_retry == 7 else self.rnr_retry
        entry = SendEntry(wr, self.next_msn, t_ready, rnr_left)
        self.next_msn += 1
        self.sq.append(entry)
        return entry

    def find(self, msn):
        """Index in :attr:`sq` of the entry with ``msn``, or ``None``."""
        for i, entry in enumerate(self.sq):
            if entry.msn == msn:
                return i
        return None

    def __repr__(self):
        return (f"QueuePair({self.qp_num}, {self.state.value}, peer="
                f"{self.remote_port}/{self.remote_qpn}, sq={len(self.sq)}, rq={len(self.rq)})")
