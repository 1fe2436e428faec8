"""The records of point-to-point communication: requests, statuses and message envelopes.

A message matches a receive by (context, source, tag).  The context stands for the one
communicator, ``MPI_COMM_WORLD``, and its two halves: MPI gives every communicator a separate
context for its collectives (MPICH: ``context_id`` + ``MPIR_CONTEXT_INTRA_COLL``), so the point to
point messages of a collective never match a user's receive, wildcards included, nor the reverse.
"""

from dataclasses import dataclass

__all__ = ["Request", "Status", "Envelope", "ANY_SOURCE", "ANY_TAG", "P2P", "COLL", "CONTEXTS"]

ANY_SOURCE = -1
ANY_TAG = -1

P2P = 0                 # context of the user's point-to-point calls
COLL = 1                # context of the collectives' messages (peach2.sim.mpi.collective)
CONTEXTS = (P2P, COLL)


@dataclass(frozen=True)
class Status:
    """What a completed receive reports (``MPI_Status``); for a send, its own envelope.

    Members
    -------
    source, tag : int
        Envelope of the message.
    count : int
        Bytes received (or sent).
    protocol : str
        How it travelled: ``"eager"``, ``"eager-gdr"``, ``"eager-staged"``, ``"rndv"``,
        ``"self"``; with ``"+pipelined"`` when host staging ran in more than one block.
    """

    source: int
    tag: int
    count: int
    protocol: str


class Request:
    """A non-blocking send or receive (``MPI_Request``).

    Members
    -------
    kind : str
        ``"send"`` or ``"recv"``.
    rank : Rank
        The rank that posted it.
    peer : int
        Destination of a send; source of a receive (or :data:`ANY_SOURCE`).
    tag : int
        Tag (or :data:`ANY_TAG` for a receive).
    buf : Buffer
        The user buffer; the data is ``count`` bytes from ``offset``.
    offset, count : int
        Byte range in ``buf``.
    context : int
        :data:`P2P` or :data:`COLL`.
    done : bool
        True once complete (successfully or in error).
    t_done : int or None
        Simulated time of completion.
    status : Status or None
        Set on success.
    error : MPIError or None
        Set when the request failed (e.g. ``MPI_ERR_TRUNCATE``).
    protocol : str or None
        Protocol chosen for the message (see :class:`Status`).
    """

    def __init__(self, kind, rank, peer, tag, buf, offset, count, context=P2P):
        self.kind = kind
        self.rank = rank
        self.peer = peer
        self.tag = tag
        self.buf = buf
        self.offset = offset
        self.count = count
        self.context = context
        self.done = False
        self.t_done = None
        self.status = None
        self.error = None
        self.protocol = None
        # protocol state, used by the rank's Protocol
        self.id = None
        self.staging = None         # host staging block (address) or None
        self.src_addr = None        # where the data to send comes from (user buffer or staging)
        self.block = None           # pipeline block size, None: one block
        self.ready = None           # per block: data staged and ready to write
        self.posted = 0             # blocks whose RDMA write has been posted
        self.target = None          # (address, rkey, receiver request id, receiver block size)
        self.moved = 0              # bytes written (send) / received (recv)
        self.landed = 0             # bytes in the user buffer (recv)
        self.size = None            # message size once matched (recv)
        self.envelope = None        # the matched message (recv)

    def __repr__(self):
        state = "done" if self.done else "pending"
        if self.error is not None:
            state = self.error.code
        where = " (collective)" if self.context == COLL else ""
        return (f"Request({self.kind}, rank {self.rank.rank}, peer {self.peer}, tag {self.tag}"
                f"{where}, {self.count} bytes, {state})")

    @property
    def addr(self):
        """Bus address of the first byte."""
        return self.buf.addr + self.offset

    @property
    def device(self):
        """True when the user buffer is GPU memory."""
        return self.buf.gpu is not None


class Envelope:
    """A message that arrived (or a self-send), waiting to be matched to a receive.

    Members
    -------
    src, tag, size : int
        Envelope and size in bytes.
    context : int
        :data:`P2P` or :data:`COLL`.
    kind : str
        ``"eager"`` (data in the eager buffer ``vbuf``), ``"rts"`` (a rendezvous request to
        send, sender request ``sid``) or ``"self"`` (a send to oneself, request ``sreq``).
    protocol : str
        The sender's protocol name (``"eager-gdr"``, ...).
    """

    __slots__ = ("src", "tag", "size", "kind", "protocol", "vbuf", "sid", "sreq", "context")

    def __init__(self, src, tag, size, kind, protocol, vbuf=None, sid=None, sreq=None,
                 context=P2P):
        self.src = src
        self.tag = tag
        self.size = size
        self.kind = kind
        self.protocol = protocol
        self.vbuf = vbuf
        self.sid = sid
        self.sreq = sreq
        self.context = context

    def matches(self, source, tag, context=P2P):
        """True when a receive for ``(source, tag)`` (wildcards allowed) in ``context`` takes
        this message."""
        return (context == self.context and source in (ANY_SOURCE, self.src)
                and tag in (ANY_TAG, self.tag))

    def __repr__(self):
        where = " (collective)" if self.context == COLL else ""
        return (f"Envelope({self.kind} from {self.src}, tag {self.tag}{where}, "
                f"{self.size} bytes)")
