"""Simulation-only HDL model of a chip-to-chip PCIe Gen2 x8 cable, hard IPs included.

:class:`Cable` stands for chip A's Stratix IV hard IP TX side + the wire + chip B's hard IP RX
side, and the same from B to A, so two PEACH2 chips can be cabled in a plain HDL top (Amaranth,
or the Verilog it generates for Verilator and Icarus) with no Python running per cycle.  It is a
timing and flow-control model of :mod:`peach2.sim.hardip.model` + :mod:`peach2.sim.pcie.link`, not
synthesisable hardware: it is not meant for an FPGA (asynchronous-read memories, no link
training, no error handling).  One direction is a :class:`~peach2.sim.hdl.cable_lane.CableLane`.
"""

import math

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .cable_lane import CableLane

__all__ = ["Cable", "default_update_latency"]

CYCLE_NS = 4.0  # 250 MHz application clock


def default_update_latency(mps=256):
    """ACK / UpdateFC timer in 4-ns cycles: cocotbext-pcie's Gen2 x8 timer, rounded up.

    ``get_max_update_latency(mps, 8, 2)`` symbol times of ``8 / PCIE_GEN_RATE[2]`` s (2 ns);
    for ``mps`` = 256 that is 158.75 symbols = 317.5 ns -> 80 cycles.
    """
    from cocotbext.pcie.core.port import PCIE_GEN_RATE, get_max_update_latency
    ns = get_max_update_latency(mps, 8, 2) * 8 / PCIE_GEN_RATE[2] * 1e9
    return max(1, math.ceil(ns / CYCLE_NS - 1e-9))


def _cable_signature():
    sig = {}
    for s in "ab":
        sig |= {f"{s}_tx_st_data": In(128), f"{s}_tx_st_sop": In(1), f"{s}_tx_st_eop": In(1),
                f"{s}_tx_st_empty": In(1), f"{s}_tx_st_valid": In(1), f"{s}_tx_st_err": In(1),
                f"{s}_tx_st_ready": Out(1), f"{s}_tx_cred": Out(36),
                f"{s}_rx_st_data": Out(128), f"{s}_rx_st_sop": Out(1), f"{s}_rx_st_eop": Out(1),
                f"{s}_rx_st_empty": Out(1), f"{s}_rx_st_valid": Out(1), f"{s}_rx_st_err": Out(1),
                f"{s}_rx_st_bardec": Out(8), f"{s}_rx_st_be": Out(16),
                f"{s}_rx_st_ready": In(1), f"{s}_rx_st_mask": In(1)}
    sig["up"] = In(1, init=1)
    sig["linked"] = Out(1)
    for d in ("a2b", "b2a"):
        sig |= {f"{d}_tlps": Out(32), f"{d}_bytes": Out(32), f"{d}_stall": Out(32),
                f"{d}_cpl_wait": Out(1), f"{d}_overflow": Out(1)}
    return sig


class Cable(wiring.Component):
    """Two Stratix IV hard IPs (Gen2 x8, 128-bit Avalon-ST) joined by a cable.  Simulation only.

    Port names are each chip's own: wire ``a_tx_st_*``, ``a_tx_cred``, ``a_rx_st_*`` 1:1 to
    chip A's ``<p>_tx_st_*`` ... pins, ``b_*`` to chip B's.  One clock (``sync``, 250 MHz).

    Contract, for each direction (A to B shown; B to A is the same)
    -----------------------------------------------------------------
    1. TX (from chip A): ready latency 2, a beat may be valid in cycle t only if
       ``a_tx_st_ready`` was 1 in t-2; after ready falls, up to 2 more beats are accepted.
       ``a_tx_st_ready`` is 0 while the TX buffer holds ``tx_buffer_tlps`` whole TLPs or its
       beat FIFO lacks room for 3 more beats (this cycle's and the 2 in flight).  A TLP whose
       EOP beat is accepted in cycle t may be scheduled (start) in t+1, when its nullification
       is known: ``a_tx_st_err`` on any beat nullifies the TLP: dropped, never on the wire, no
       credits.
    2. Wire: the head TLP starts only when B has receive credits for it (P: 1 PH + ceil(payload
       / 16) PD; NP: 1 NPH + NPD; completions: infinite credits, see ``cpl_buffer``), decoded
       from DW0 of the SOP beat (fmt [31:29], type [28:24], length [9:0], 0 = 1024), and the
       wire is free: a byte-exact debt counter (+ wire bytes of a TLP when it starts, + 8 per
       DLLP, - 16 per cycle, floored at 0) is < 16.  Credits are consumed at the start.  Wire
       bytes = header (12 or 16) + payload (4 x length if it has data) + 8.  Cut-through, as
       the Python model's transmitter (:mod:`peach2.sim.hardip.wire`): a TLP that starts in
       t+1 with nothing ahead of it in the buffer is on the wire from ``back`` cycles
       earlier, the least of (its SOP cycle's distance from t, the cycles the wire has been
       idle, ceil(wire bytes / 16) - 1; each saturating at 255), so from the cycle after its
       SOP beat when the wire was idle then, never ending before the cycle after its EOP beat;
       it owes the wire ``16 x back`` bytes less.  A TLP that starts later (wire or credits)
       has ``back`` 0.
    3. RX (to chip B): the TLP (whose last symbol is in by then: the hard IP checks LCRC
       first) may be presented from cycle start - ``back`` + ceil(wire bytes / 16) +
       ``latency`` + ``tx_pipeline`` + ``rx_pipeline``, one beat per cycle, ready latency 2 (a beat is valid in t only if
       ``b_rx_st_ready`` was 1 in t-2); valid never drops inside a TLP unless ready forced it.
       Beats are the TX beats bit for bit (don't-care lanes included); ``err`` and ``bardec``
       are 0 (nullified TLPs never arrive; link ports have no BARs), ``be`` is 0 (the chip
       ignores it).  ``b_rx_st_mask`` (sampled one cycle earlier) keeps a non-posted TLP from
       starting.
    4. Flow control: when B's RX side presents a TLP's EOP beat, its credits are released and
       the UpdateFC timer starts if idle; ``update_latency`` cycles later one 8-byte UpdateFC
       DLLP per class with released credits (P, NP, CPL) goes on the B->A wire, and the
       credits it carries reach A's sender ceil((B->A debt + DLLP bytes) / 16) + ``latency``
       cycles later (usable in that cycle).  ACK: a TLP reaching B (start + ceil(wire / 16) +
       ``latency`` + ``tx_pipeline``) after the last ACK timer fired starts the ACK timer;
       ``update_latency`` cycles later one 8-byte ACK DLLP is charged on the B->A wire.
    5. ``a_tx_cred`` is A's view of B's credits, registered, in ``hardip.py``'s layout: PH [2:0],
       PD [14:3], NPH [17:15], NPD [20:18], CPLH [23:21], CPLD [35:24], each saturating
       (completions: always the field maximum).
    No other buffering: with the TX buffer full and no credits, the sender really stops.

    Link down: while ``up`` is 0 both directions drop everything chips offer (``tx_st_ready``
    is 1), start and deliver nothing, and forget credits, timers and DLLPs in flight; a TLP
    already being presented to a chip is finished first (with that chip's ready), then the
    receive buffers are flushed, and the link stays down until both are.  When it is up again
    the credits start fresh from ``rx_credits``.  Beats a chip sends in the middle of a TLP
    when the link goes down or comes back are dropped up to its next SOP.

    Simplifications (versus the real hard IP / cocotbext-pcie link)
    ----------------------------------------------------------------
    - No link training, DLLP CRC, replay or NAK; ACKs only cost wire time.  No InitFC, no
      periodic (30 us / idle) UpdateFC, no ``ko_cpl_spc_vc0``, ``tl_cfg_*``, MSI, TLP prefixes.
    - ``rx_st_mask``: one in-order queue, so a held non-posted TLP at the head also holds the
      posted requests and completions behind it (the real core lets them pass); a chip that
      waits for posted traffic while masking can deadlock here and not on hardware.
    - Completions: the link advertises infinite completion credits; ``cpl_buffer`` stands for
      the receiving hard IP's completion buffer.  A completion that would overfill it waits at
      the sender (counted in ``*_stall``, ``*_cpl_wait`` set) instead of overflowing, with
      instant (non-physical) knowledge of the receiver's buffer.  A chip that reserves
      completion space never sees this.
    - Several DLLPs made in the same cycle travel as one: the credits of all UpdateFCs arrive
      together, after the last of them.  DLLPs skip the TX/RX pipelines.
    - The TLP start uses the spec's ceil(wire / 16): the fraction of a cycle the wire still
      owes (debt < 16) is not added to the arrival time (at most 1 cycle early).
    - Beats cross into the receive buffer one per cycle after the start, and a TLP is
      presented once its first beat is there (the rest follow one a cycle), so TLPs with more
      beats than wire time (a 256-byte MWr with a pad DW: 18 beats, 17.5 cycles) sent back to
      back can arrive a few cycles late; with ``latency`` + pipelines >= 1 a lone TLP always
      arrives on time.  A non-posted TLP needing more data credits than NPD never starts.
    - Framing from the chip is trusted (``hardip.py``'s checker tests it): a TLP longer than
      ``mps``, an SOP inside a TLP or a missing EOP give undefined results.  Timestamps are
      32-bit cycle counts: a TLP may wait at most 2**31 cycles (8.6 s).

    Buffers (depths from the parameters; the receive buffer can never overflow)
    ---------------------------------------------------------------------------
    TX beats: ``tx_buffer_tlps`` x max_beats(``mps``) + 3; RX beats: for each class
    min(data credits + 2 x header credits, header credits x max_beats(``mps``)) (a TLP has at
    most 2 beats more than its data credits); RX TLP descriptors: PH + NPH + CPLH.

    Parameters
    ----------
    latency : int
        One-way flight cycles after the wire time (default 3 = 12 ns, about cocotbext's two
        5-ns port delays rounded up).
    tx_pipeline, rx_pipeline : int
        Extra cycles of the hard IP's TX and RX pipelines; they add to the TLP path latency.
        ``latency + tx_pipeline + rx_pipeline`` must be >= 1.
    rx_credits : tuple of int
        (PH, PD, NPH, NPD) each receiving hard IP advertises; PD/NPD in 16-byte units.  Default
        as ``hardip.py``.  Headers 1..127, data 1..2047, PD >= ``mps`` / 16.
    cpl_buffer : tuple of int
        (CPLH, CPLD) completion buffer of each receiving hard IP (assumed; not from the
        handbook).  CPLD >= ``mps`` / 16.
    tx_buffer_tlps : int
        Whole TLPs the TX buffer holds before ``tx_st_ready`` falls (as ``hardip.py``).
    mps : int
        Max payload size in bytes (sizes the buffers and the default timer).
    update_latency : int, optional
        ACK / UpdateFC timer in cycles, >= 1; default :func:`default_update_latency` (``mps``).

    Members
    -------
    a_tx_st_data, a_tx_st_sop, a_tx_st_eop, a_tx_st_empty, a_tx_st_valid, a_tx_st_err : In
        Chip A's TX beats (``b_*`` likewise for chip B).
    a_tx_st_ready, a_tx_cred : Out
        To chip A: TX ready (ready latency 2) and A's view of B's credits.
    a_rx_st_data, a_rx_st_sop, a_rx_st_eop, a_rx_st_empty, a_rx_st_valid : Out
        Beats to chip A; ``a_rx_st_err``, ``a_rx_st_bardec``, ``a_rx_st_be`` are always 0.
    a_rx_st_ready, a_rx_st_mask : In
        From chip A.
    up : In(1, init=1)
        Link up; 0 = cable pulled (see "Link down").
    linked : Out(1)
        The link is up: ``up`` and both receivers flushed after the last loss (what the hard
        IPs at both ends report as L0 on ``ltssm``).
    a2b_tlps, a2b_bytes, a2b_stall : Out(32)
        A-to-B TLPs put on the wire, their payload bytes, cycles a TLP waited at the head for
        credits (or completion-buffer room); counted from reset, through link-down, wrapping.
        ``b2a_*`` likewise.
    a2b_cpl_wait, a2b_overflow : Out(1)
        Sticky: a completion waited for B's completion buffer; a beat from A arrived with the
        TX buffer full (A broke ready latency; beat lost).
    lanes : dict of CableLane
        The two directions, ``"a2b"`` and ``"b2a"`` (buffer depths as attributes), made by
        :meth:`elaborate`.
    """

    def __init__(self, *, latency=3, tx_pipeline=0, rx_pipeline=0,
                 rx_credits=(64, 1024, 64, 64), cpl_buffer=(64, 1024), tx_buffer_tlps=8,
                 mps=256, update_latency=None):
        if update_latency is None:
            update_latency = default_update_latency(mps)
        ph, pd, nph, npd = rx_credits
        cplh, cpld = cpl_buffer
        need = -(-mps // 16)
        checks = [
            (mps in (128, 256, 512, 1024, 2048, 4096), f"mps {mps} not a PCIe max payload size"),
            (min(latency, tx_pipeline, rx_pipeline) >= 0, "negative latency"),
            (latency + tx_pipeline + rx_pipeline >= 1,
             "latency + tx_pipeline + rx_pipeline must be >= 1 (one cycle to copy a beat)"),
            (all(1 <= h <= 127 for h in (ph, nph, cplh)), "header credits must be 1..127"),
            (all(1 <= d <= 2047 for d in (pd, npd, cpld)), "data credits must be 1..2047"),
            (pd >= need and cpld >= need,
             f"PD and CPLD must hold one {mps}-byte TLP ({need} credits)"),
            (tx_buffer_tlps >= 1, "tx_buffer_tlps must be >= 1"),
            (update_latency >= 1, "update_latency must be >= 1"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)
        self.latency, self.tx_pipeline, self.rx_pipeline = latency, tx_pipeline, rx_pipeline
        self.rx_credits, self.cpl_buffer = tuple(rx_credits), tuple(cpl_buffer)
        self.tx_buffer_tlps, self.mps, self.update_latency = tx_buffer_tlps, mps, update_latency
        super().__init__(_cable_signature())
        self.lanes = {}

    def elaborate(self, platform):
        m = Module()
        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        self.lanes = {d: CableLane(latency=self.latency, tx_pipeline=self.tx_pipeline,
                                   rx_pipeline=self.rx_pipeline, credits=self.rx_credits,
                                   cpl_buffer=self.cpl_buffer, tx_buffer_tlps=self.tx_buffer_tlps,
                                   mps=self.mps, update_latency=self.update_latency)
                      for d in ("a2b", "b2a")}
        ab, ba = self.lanes["a2b"], self.lanes["b2a"]
        m.submodules.a2b, m.submodules.b2a = ab, ba
        flush = {d: Signal(name=f"{d}_flush") for d in self.lanes}
        # down while up is 0 and while a receiver still finishes the TLP it was presenting
        link_down = ~self.up | (flush["a2b"] & ab.in_pkt) | (flush["b2a"] & ba.in_pkt)
        m.d.comb += self.linked.eq(~link_down)
        for d, lane, other, src, dst in (("a2b", ab, ba, "a", "b"), ("b2a", ba, ab, "b", "a")):
            hold = ~self.up | flush[d]
            m.d.sync += flush[d].eq(~self.up | (flush[d] & lane.in_pkt))
            m.d.comb += [
                lane.now.eq(now),
                lane.link_down.eq(link_down),
                lane.rx_hold.eq(hold),
                lane.rx_reset.eq(hold & ~lane.in_pkt),
                lane.dllp_in.eq(other.dllp_out),
                lane.rev_debt.eq(other.debt),
            ]
            for f in ("data", "sop", "eop", "empty", "valid", "err"):
                m.d.comb += getattr(lane, f"tx_{f}").eq(getattr(self, f"{src}_tx_st_{f}"))
            m.d.comb += [
                getattr(self, f"{src}_tx_st_ready").eq(link_down | lane.tx_ready),
                getattr(self, f"{src}_tx_cred").eq(lane.tx_cred),
                lane.rx_ready.eq(getattr(self, f"{dst}_rx_st_ready")),
                lane.rx_mask.eq(getattr(self, f"{dst}_rx_st_mask")),
            ]
            for f in ("data", "sop", "eop", "empty", "valid"):
                m.d.comb += getattr(self, f"{dst}_rx_st_{f}").eq(getattr(lane, f"rx_{f}"))
            # rx_st_err, rx_st_bardec, rx_st_be stay 0
            tlps, nbytes, stall = (getattr(self, f"{d}_{n}") for n in ("tlps", "bytes", "stall"))
            m.d.sync += [tlps.eq(tlps + lane.st_go), nbytes.eq(nbytes + lane.st_bytes),
                         stall.eq(stall + lane.st_stall)]
            with m.If(lane.st_cpl_wait):
                m.d.sync += getattr(self, f"{d}_cpl_wait").eq(1)
            with m.If(lane.st_overflow):
                m.d.sync += getattr(self, f"{d}_overflow").eq(1)
        return m
