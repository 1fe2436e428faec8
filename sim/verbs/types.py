"""The verbs vocabulary: opcodes, access flags, completion status, work requests, completions.

Names follow libibverbs (``IBV_WR_SEND`` -> :attr:`Opcode.SEND`, ``IBV_WC_LOC_LEN_ERR`` ->
:attr:`Status.LOC_LEN_ERR`, ...) so that code written against this model reads like verbs code.
Declared once here, as the TLP layouts are, and used by the HCA, its queue pairs and tests.
Work requests carry one scatter/gather element, as MVAPICH2 posts them
(``MV2_DEFAULT_MAX_SG_LIST`` = 1).
"""

import enum
from dataclasses import dataclass

__all__ = ["Opcode", "WCOpcode", "Access", "Status", "QPState", "SendWR", "RecvWR",
           "WorkCompletion"]


class Opcode(enum.Enum):
    """Send work request opcodes (reliable connected); immediate data is a field of the WR."""
    SEND = "send"
    RDMA_WRITE = "rdma_write"

    @property
    def completion(self):
        """The :class:`WCOpcode` a completion of this request reports."""
        return WCOpcode(self.value)


class WCOpcode(enum.Enum):
    """What a completion reports."""
    SEND = "send"
    RDMA_WRITE = "rdma_write"
    RECV = "recv"
    RECV_RDMA_WITH_IMM = "recv_rdma_with_imm"


class Access(enum.IntFlag):
    """Memory region access rights (local read is always allowed, as in verbs)."""
    LOCAL_READ = 0
    LOCAL_WRITE = 1
    REMOTE_WRITE = 2
    REMOTE_READ = 4


class Status(enum.Enum):
    """Completion status, as ``enum ibv_wc_status``."""
    SUCCESS = "success"
    LOC_LEN_ERR = "local length error"
    LOC_PROT_ERR = "local protection error"
    LOC_QP_OP_ERR = "local QP operation error"
    WR_FLUSH_ERR = "flushed (queue pair in error)"
    REM_INV_REQ_ERR = "remote invalid request"
    REM_ACCESS_ERR = "remote access error"
    REM_OP_ERR = "remote operation error"
    RETRY_EXC_ERR = "transport retry counter exceeded"
    RNR_RETRY_EXC_ERR = "RNR retry counter exceeded"


class QPState(enum.Enum):
    """Queue pair states this model distinguishes."""
    INIT = "init"            # created, not connected
    RTS = "rts"              # connected: ready to send and receive
    ERROR = "error"          # every queued and new work request is flushed


def _u(value, bits, name):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
        raise ValueError(f"{name} must be an integer in 0..2^{bits}-1, not {value!r}")
    return value


@dataclass(frozen=True)
class SendWR:
    """A send work request: SEND or RDMA_WRITE, optionally with immediate data.

    Members
    -------
    wr_id : int
        Returned in the completion.
    opcode : Opcode
        ``SEND`` lands in the peer's next receive buffer; ``RDMA_WRITE`` at ``remote_addr``.
    addr, length, lkey : int
        Local source buffer and the key of a region registered on this HCA that covers it.
    remote_addr, rkey : int
        Destination of an RDMA write in the peer's registered memory.
    imm : int or None
        32-bit immediate data; with it a write consumes a receive request at the peer.
    signaled : bool
        Whether success produces a completion (errors always do).
    inline_data : bytes or None
        Data the CPU copies into the work request (``IBV_SEND_INLINE``): no DMA read, no lkey.
    """

    wr_id: int
    opcode: Opcode
    addr: int = 0
    length: int = 0
    lkey: int = 0
    remote_addr: int = 0
    rkey: int = 0
    imm: int = None
    signaled: bool = True
    inline_data: bytes = None

    def __post_init__(self):
        if not isinstance(self.opcode, Opcode):
            raise ValueError(f"opcode must be an Opcode, not {self.opcode!r}")
        _u(self.addr, 64, "addr")
        _u(self.length, 32, "length")
        _u(self.lkey, 32, "lkey")
        _u(self.remote_addr, 64, "remote_addr")
        _u(self.rkey, 32, "rkey")
        if self.imm is not None:
            _u(self.imm, 32, "imm")
        if self.inline_data is not None:
            if not isinstance(self.inline_data, (bytes, bytearray)):
                raise ValueError("inline_data must be bytes")
            object.__setattr__(self, "inline_data", bytes(self.inline_data))
            object.__setattr__(self, "length", len(self.inline_data))

    @property
    def with_imm(self):
        """True when the request carries immediate data."""
        return self.imm is not None


@dataclass(frozen=True)
class RecvWR:
    """A receive work request: one buffer (``addr``, ``length``) in a region with ``lkey``."""

    wr_id: int
    addr: int = 0
    length: int = 0
    lkey: int = 0

    def __post_init__(self):
        _u(self.addr, 64, "addr")
        _u(self.length, 32, "length")
        _u(self.lkey, 32, "lkey")


@dataclass(frozen=True)
class WorkCompletion:
    """One completion queue entry.

    Members
    -------
    wr_id : int
        The work request's identifier.
    status : Status
        ``SUCCESS`` or the error.
    opcode : WCOpcode
        What completed.
    byte_len : int
        Bytes received (receive completions) or sent.
    qp_num : int
        Local queue pair number.
    t_ps : int
        Time the entry became visible to software polling the queue.
    imm : int or None
        Immediate data of a receive completion.
    """

    wr_id: int
    status: Status
    opcode: WCOpcode
    byte_len: int
    qp_num: int
    t_ps: int
    imm: int = None

    @property
    def ok(self):
        """True for a successful completion."""
        return self.status is Status.SUCCESS
