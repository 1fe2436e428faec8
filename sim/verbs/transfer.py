"""What one HCA's transport sends another through the fabric: requests, ACKs and NAKs."""

import enum
from dataclasses import dataclass

__all__ = ["Transfer", "Kind"]


class Kind(enum.Enum):
    """Transport packet kinds of the reliable-connected service this model uses."""
    REQUEST = "request"      # SEND or RDMA WRITE, with or without immediate
    ACK = "ack"              # cumulative: every request up to ``msn`` arrived
    NAK = "nak"              # request ``msn`` refused; ``syndrome`` says why


@dataclass(frozen=True)
class Transfer:
    """The payload of a fabric message between two queue pairs.

    Members
    -------
    kind : Kind
        Request, ACK or NAK.
    src_qpn, dst_qpn : int
        Sending and receiving queue pair numbers.
    msn : int
        Message sequence number of the request (requests of a QP are numbered from 0).
    opcode : Opcode or None
        For a request: SEND or RDMA_WRITE.
    data : bytes
        The request's data (its length is the message length).
    remote_addr, rkey : int
        Target of an RDMA write.
    imm : int or None
        Immediate data.
    syndrome : Status or None
        For a NAK: the status the requester reports (``RNR_RETRY_EXC_ERR`` stands for an RNR
        NAK, which is retried before it becomes an error).
    """

    kind: Kind
    src_qpn: int
    dst_qpn: int
    msn: int
    opcode: object = None
    data: bytes = b""
    remote_addr: int = 0
    rkey: int = 0
    imm: int = None
    syndrome: object = None
