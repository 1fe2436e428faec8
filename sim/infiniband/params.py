"""Parameters of the InfiniBand model: one 4x QDR flat switch and ConnectX-3-class HCAs.

Every default carries its source beside it.  Sources, cited by short name below:

- **IBA**: InfiniBand Architecture Specification, Volume 1 (link and transport layers: packet
  headers, 64-byte flow-control blocks, RNR NAK timer encoding) and Volume 2 (physical layer).
- **Shanley**: T. Shanley, *InfiniBand Network Architecture* (MindShare, 2002), table 25-4
  (packet delimiters SDP/EGP).
- **ib_model**: Mellanox's flit-level OMNeT++ InfiniBand model (GPL, Mellanox Technologies
  2004-2013), ``src/modules.ini``: ``flitSize = 64B``, ``ISWDelay = 50ns``, ``VSWDelay = 50ns``,
  ``ibuf.maxStatic* = 200`` (flits per VL, "In Is4 Total of flits in IBUF = 1000").
- **MV2 guide**: MVAPICH2 user guide, run-time parameters (``MV2_DEFAULT_MTU``: "IBV_MTU_2048
  for IB DDR and QDR cards"); **MV2 cvars**: MVAPICH2 parameter table
  (``MV2_DEFAULT_MIN_RNR_TIMER`` 12, ``MV2_DEFAULT_RNR_RETRY`` 7, ``MV2_DEFAULT_TIME_OUT`` 20,
  ``MV2_DEFAULT_RETRY_COUNT`` 7).
- **Linux**: ``include/rdma/ib_verbs.h`` (``IB_RNR_TIMER_000_64 = 12``, i.e. 0.64 ms) and the
  verbs drivers' ``max_msg_sz = 0x80000000``.
- **000**: Odajima et al., "TCA/InfiniBand hybrid communication in XcalableACC" (sections 2.2
  and 4: Mellanox ConnectX-3 dual-port QDR, one port used, ``MV2_NUM_PORTS=1``).

Values marked *assumed* have no primary source here; they are first guesses to be fitted
against the measured MPI latencies (``docs/mpi.md``), one parameter per path.
"""

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

__all__ = ["Params"]

_MTUS = (256, 512, 1024, 2048, 4096)    # IBA: the five path MTUs
_WIDTHS = (1, 4, 8, 12)                 # IBA: link widths 1x, 4x, 8x, 12x


@dataclass(frozen=True)
class Params:
    """Fabric and HCA parameters; time in integer picoseconds, sizes in bytes.

    The defaults describe HA-PACS/TCA's InfiniBand side (000 section 2.2): ConnectX-3 QDR
    HCAs, one port each, on one flat switch.  Construction checks every field and raises
    ``ValueError`` naming the field for nonsense (negative latency, an MTU IB does not have,
    credits smaller than one packet, ...).
    """

    # -- physical link ------------------------------------------------------------------
    lanes: int = 4                      # IBA: 4x link, four lanes (000: "QDR x4")
    lane_gbaud: float = 10.0            # IBA: QDR signals 10 Gb/s per lane, 40 Gb/s per 4x link
    encoding: tuple = (8, 10)           # IBA vol 2: SDR/DDR/QDR use 8b/10b -> 4 GB/s of data
    cable_m: float = 3.0                # assumed: copper QSFP cable, node to switch in one rack row
    cable_ps_per_m: int = 5000          # ~c/0.67 in twinax copper: about 5 ns per metre
    delimiter_bytes: int = 2            # Shanley table 25-4: SDP before, EGP after each packet

    # -- packet format (IBA vol 1, chapter 5 / 9) ----------------------------------------
    mtu: int = 2048                     # MV2 guide: MV2_DEFAULT_MTU = IBV_MTU_2048 on QDR
    lrh_bytes: int = 8                  # IBA: local route header, every packet
    bth_bytes: int = 12                 # IBA: base transport header, every packet
    reth_bytes: int = 16                # IBA: RDMA extended header, first packet of a write
    immdt_bytes: int = 4                # IBA: immediate data, last packet of "...with immediate"
    aeth_bytes: int = 4                 # IBA: ACK extended header, on every ACK/NAK
    icrc_bytes: int = 4                 # IBA: invariant CRC
    vcrc_bytes: int = 2                 # IBA: variant CRC
    pad_to: int = 4                     # IBA: payload padded to 4 bytes (BTH PadCnt)
    max_message_bytes: int = 2 ** 31    # IBA: 2^31 bytes; Linux drivers: max_msg_sz 0x80000000

    # -- link-level flow control -----------------------------------------------------------
    credit_bytes: int = 64              # IBA: credits count 64-byte blocks (ib_model flitSize)
    switch_credits: int = 200           # ib_model: ibuf.maxStatic = 200 blocks per VL (IS4)
    hca_credits: int = 200              # ib_model: the same ibuf setting applies to HCA ports

    # -- latencies ----------------------------------------------------------------------------
    switch_ps: int = 100_000            # ib_model: ISWDelay 50 ns + VSWDelay 50 ns, cut-through
    hca_tx_ps: int = 150_000            # assumed: data ready in the HCA -> first bit on the wire
    hca_rx_ps: int = 150_000            # assumed: last bit in -> data handed to PCIe (ICRC etc.)
    doorbell_ps: int = 200_000          # assumed: doorbell/BlueFlame write -> WQE being executed
    cqe_ps: int = 250_000               # assumed: completion written to host memory, pollable

    # -- reliable-connected transport -------------------------------------------------------
    rnr_timer_ps: int = 640_000_000     # MV2 cvars: min RNR timer 12 = 0.64 ms (Linux enum)
    rnr_retry: int = 7                  # MV2 cvars: MV2_DEFAULT_RNR_RETRY 7 = retry for ever
    transport_timeout_ps: int = 4_294_967_296_000   # MV2 cvars: TIME_OUT 20: 4.096 us * 2^20
    retry_count: int = 7                # MV2 cvars: MV2_DEFAULT_RETRY_COUNT 7

    def __post_init__(self):
        for name in ("lanes", "cable_ps_per_m", "delimiter_bytes", "mtu", "lrh_bytes",
                     "bth_bytes", "reth_bytes", "immdt_bytes", "aeth_bytes", "icrc_bytes",
                     "vcrc_bytes", "pad_to", "max_message_bytes", "credit_bytes",
                     "switch_credits", "hca_credits", "switch_ps", "hca_tx_ps", "hca_rx_ps",
                     "doorbell_ps", "cqe_ps", "rnr_timer_ps", "rnr_retry",
                     "transport_timeout_ps", "retry_count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"Params.{name} must be an integer, not {value!r}")
            if value < 0:
                raise ValueError(f"Params.{name} must not be negative ({value})")
        if self.lanes not in _WIDTHS:
            raise ValueError(f"Params.lanes must be one of {_WIDTHS} (IB link widths), "
                             f"not {self.lanes}")
        if not _positive_number(self.lane_gbaud):
            raise ValueError(f"Params.lane_gbaud must be a positive number, not "
                             f"{self.lane_gbaud!r}")
        if not (isinstance(self.encoding, tuple) and len(self.encoding) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in self.encoding)
                and 0 < self.encoding[0] <= self.encoding[1]):
            raise ValueError(f"Params.encoding must be (data bits, line bits) with "
                             f"0 < data <= line, e.g. (8, 10); not {self.encoding!r}")
        if not (isinstance(self.cable_m, (int, float)) and not isinstance(self.cable_m, bool)
                and math.isfinite(self.cable_m) and self.cable_m >= 0):
            raise ValueError(f"Params.cable_m must be a finite length >= 0, not "
                             f"{self.cable_m!r}")
        if self.mtu not in _MTUS:
            raise ValueError(f"Params.mtu must be an IB path MTU {_MTUS}, not {self.mtu}")
        if self.pad_to < 1 or self.credit_bytes < 1:
            raise ValueError("Params.pad_to and Params.credit_bytes must be at least 1")
        if self.lrh_bytes + self.bth_bytes == 0:
            raise ValueError("Params: a packet needs a header (lrh_bytes + bth_bytes > 0)")
        if self.max_message_bytes > 2 ** 31:
            raise ValueError(f"Params.max_message_bytes: IB messages are at most 2^31 bytes, "
                             f"not {self.max_message_bytes}")
        if self.rnr_retry > 7 or self.retry_count > 7:
            raise ValueError("Params.rnr_retry and Params.retry_count are 3-bit fields (0..7)")
        need = self.blocks(self.largest_packet_bytes())
        for name in ("switch_credits", "hca_credits"):
            if getattr(self, name) < need:
                raise ValueError(
                    f"Params.{name} = {getattr(self, name)} blocks cannot hold one "
                    f"maximum-size packet ({need} blocks of {self.credit_bytes} bytes); "
                    f"the link would deadlock")

    # -- derived quantities ---------------------------------------------------------------------

    @property
    def data_bytes_per_s(self):
        """Data rate of one link direction after line coding (4x QDR: 4e9 bytes/s)."""
        data, line = self.encoding
        bits = Fraction(str(self.lane_gbaud)) * 10 ** 9 * self.lanes * data / line
        return bits / 8

    @cached_property
    def ps_per_byte(self):
        """Picoseconds one byte occupies on the wire (4x QDR: exactly 250)."""
        return Fraction(10 ** 12) / self.data_bytes_per_s

    @property
    def cable_ps(self):
        """Propagation delay of one cable, rounded to the picosecond."""
        return round(self.cable_m * self.cable_ps_per_m)

    @property
    def base_header_bytes(self):
        """Header and trailer bytes in every packet: LRH + BTH + ICRC + VCRC (26 by default)."""
        return self.lrh_bytes + self.bth_bytes + self.icrc_bytes + self.vcrc_bytes

    def padded(self, nbytes):
        """Return ``nbytes`` rounded up to the payload padding (4 bytes)."""
        return -(-nbytes // self.pad_to) * self.pad_to

    def packet_bytes(self, payload, extra=0):
        """Bytes of one packet from LRH to VCRC: headers, ``extra`` header bytes, padded data."""
        return self.base_header_bytes + extra + self.padded(payload)

    def wire_bytes(self, payload, extra=0):
        """Bytes a packet occupies on the wire: :meth:`packet_bytes` plus the delimiters."""
        return self.packet_bytes(payload, extra) + self.delimiter_bytes

    def blocks(self, packet_bytes):
        """Flow-control blocks (credits) a packet of ``packet_bytes`` bytes needs."""
        return -(-packet_bytes // self.credit_bytes)

    def serialize_ps(self, wire_bytes):
        """Time to put ``wire_bytes`` on one link, rounded up to the picosecond."""
        return _ceil_product(self.ps_per_byte, wire_bytes)

    def largest_packet_bytes(self):
        """The largest packet the transport sends: an MTU of data with RETH and ImmDt."""
        return self.packet_bytes(self.mtu, self.reth_bytes + self.immdt_bytes)

    def lookahead_ps(self):
        """Smallest HCA -> switch -> HCA latency: a header-only packet on idle links.

        No message handed to the fabric at ``t`` is delivered before ``t + lookahead_ps()``,
        so it bounds the window of a conservative synchronisation across MPI ranks.
        """
        smallest = self.wire_bytes(0)
        return (self.hca_tx_ps + self.cable_ps + self.switch_ps + self.serialize_ps(smallest)
                + self.cable_ps + self.hca_rx_ps)

    def payload_efficiency(self, payload=None, extra=0):
        """Fraction of wire bytes that are data, for full packets of ``payload`` (MTU) bytes."""
        payload = self.mtu if payload is None else payload
        return Fraction(payload, self.wire_bytes(payload, extra))


def _positive_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


@lru_cache(maxsize=4096)
def _ceil_product(fraction, n):
    """``ceil(fraction * n)``, remembered: packet sizes repeat, and Fraction arithmetic was most
    of a large all-to-all's run time."""
    return math.ceil(fraction * n)
