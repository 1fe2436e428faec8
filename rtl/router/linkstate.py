"""Link state of the four ports and the gate in front of each TX adapter (link loss).

What the chip does when a port's link leaves L0 (``docs/errors.md``, "Reset and link loss"):

- :class:`LinkState` registers each port's LTSSM state at the chip's input and keeps, per port,
  ``dropping``: set while the link is down, cleared only once the link is up again *and*
  nothing the chip held for the port before is left (no packet bound for it in any packet
  buffer, its gate between packets, its crossbar output empty) for ``HOLD`` cycles in a row.
  Until a port's link is first lost after a reset (``fresh``), the hold is skipped: after reset
  every port is ``dropping``, and it clears as soon as its link is seen up and nothing is held
  for it (two cycles after the reset is released when the link is in L0 throughout), since
  nothing can have been queued for a link before it was ever lost (see :class:`LinkState`).
- While ``dropping``, the ingresses drop every routed TLP whose route leaves through that port
  (COUNT[arrival port][LINK_DOWN]; the packet buffer discards it at its input), the DMA ends a
  channel whose write would leave there (DST_LINK_DOWN), and the port's :class:`LinkGate`
  discards whatever reaches the port's crossbar output (COUNT[port][LINK_FLUSHED]) and holds
  the port's TX adapter in reset (its FIFO flushed), so nothing queued before the loss leaks
  out once the link is back.

The Stratix IV hard IP reports the LTSSM state on ``ltssm[4:0]`` (L0 = 0x0F) and, when the data
link layer leaves DL_Up, expects the application to reset what it holds for that link (Altera's
``dlup_exit`` guidance); this is that reset, limited to the port's own TX path.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import N_PORTS
from ..tlp.stream import TLPStream

__all__ = ["LinkState", "LinkGate", "LTSSM_L0", "HOLD"]

#: The LTSSM state the Stratix IV hard IP reports in L0 (link up).
LTSSM_L0 = 0x0F

#: Cycles the "nothing left for the port" condition must hold after the link is back before the
#: port is used again.  The packet buffers are tracked exactly; the hold covers what is not
#: (the DMA's output queue and the UR generator's, at most a few TLPs that flow at one beat per
#: cycle into the gate).  Not applied before the port's first link loss after a reset
#: (:class:`LinkState`, ``fresh``).
HOLD = 128
assert HOLD & (HOLD - 1) == 0, "LinkState folds ``fresh`` into the top bit of ``quiet``"


class LinkState(wiring.Component):
    """Per-port link state: registered LTSSM input, ``link_up`` and ``dropping``.

    Members
    -------
    ltssm : In(5).array(4)
        The hard IPs' LTSSM states (the chip's ``<p>_ltssm`` pins).
    queued : In(4)
        Per port: some packet buffer holds a packet bound for it (OR of the buffers' ``queued``).
    busy : In(4)
        Per port: its gate is inside a packet, or its crossbar output shows a beat.
    ltssm_r : Out(5).array(4)
        ``ltssm`` one cycle late (PORT_STATUS.ltssm).
    link_up : Out(4)
        Registered: the LTSSM state is L0 (PORT_STATUS.link_up).
    dropping : Out(4)
        Registered: the router drops traffic toward the port (PORT_STATUS.dropping).

    Per port a register ``fresh`` (reset 1) says the link has not been lost since the reset: it
    is cleared in the cycle the link is seen leaving L0 (``link_up`` 1, the LTSSM input not L0),
    never set again until the next reset.  While ``fresh``, ``dropping`` falls in the first
    cycle the link is up and the port is empty, without the ``HOLD`` cycles: the hold is for
    what was queued toward a link before its loss (the uncounted DMA and UR queues), and before
    the first loss there is no such thing.  The reset left nothing queued, and what the chip
    queues for the port after it is traffic of this link: the packet buffers' part is counted
    in ``queued``; the DMA ends a channel whose write is routed to a dropping port, its reads
    and the register completions go to N, and a UR completion answers a request that arrived
    on the port itself over this link.  A link that goes down before ``dropping`` first falls
    (or any time later) is a loss: from then on the port waits ``HOLD`` cycles as before.

    Cycle by cycle after a reset with the link in L0 throughout: cycle 0 ``link_up`` (reset 0)
    and the registered ``empty`` (reset 0) are 0 (``quiet`` is set to ``HOLD``); cycle 1 both
    are 1; ``dropping`` is 0 from cycle 2.  A TLP reaching the port's crossbar output in cycle 1 is still discarded whole
    (:class:`LinkGate` keeps discarding a packet it began discarding).
    """

    def __init__(self):
        super().__init__({
            "ltssm":    In(5).array(N_PORTS),
            "queued":   In(N_PORTS),
            "busy":     In(N_PORTS),
            "ltssm_r":  Out(5).array(N_PORTS),
            "link_up":  Out(N_PORTS),
            "dropping": Out(N_PORTS, init=(1 << N_PORTS) - 1),
        })

    def elaborate(self, platform):
        m = Module()
        for p in range(N_PORTS):
            # Registered at the input: one LUT level (a 5-bit compare) before the register.
            m.d.sync += [self.ltssm_r[p].eq(self.ltssm[p]),
                         self.link_up[p].eq(self.ltssm[p] == LTSSM_L0)]
            # ``quiet`` counts the cycles the port has had nothing left (registered inputs).
            # ``fresh``: the link has not been lost since the reset, so no hold is needed.  It
            # is folded into ``quiet`` (HOLD is a power of two): where ``quiet`` restarts it
            # restarts at HOLD while ``fresh`` (only its top bit differs), so from cycle 1 after
            # the reset (cycle 0 has ``link_up`` 0) ``fresh`` implies ``quiet == HOLD`` and the
            # release logic is the one without ``fresh``: 2 LUT levels as before.  (``quiet``
            # keeps reset value 0: a flip-flop with reset value 1 costs an inverter level.)
            quiet = Signal(range(HOLD + 1), name=f"quiet_{p}")
            empty = Signal(name=f"empty_{p}")
            fresh = Signal(init=1, name=f"fresh_{p}")
            restart = Mux(fresh, HOLD, 0)
            m.d.sync += empty.eq(~self.queued[p] & ~self.busy[p])
            with m.If(self.link_up[p] & (self.ltssm[p] != LTSSM_L0)):
                m.d.sync += fresh.eq(0)             # the link is lost
            with m.If(~self.link_up[p]):
                m.d.sync += [self.dropping[p].eq(1), quiet.eq(restart)]
            with m.Elif(self.dropping[p]):
                with m.If(~empty):
                    m.d.sync += quiet.eq(restart)
                with m.Elif(quiet == HOLD):
                    m.d.sync += self.dropping[p].eq(0)
                with m.Else():
                    m.d.sync += quiet.eq(quiet + 1)
        return m


class LinkGate(wiring.Component):
    """Between a port's crossbar output and its TX adapter: discard while ``dropping``.

    A packet whose first beat arrives while ``dropping`` is discarded whole at one beat per
    cycle; a packet being passed when ``dropping`` rises has the rest of its beats discarded
    (the TX adapter, held in reset meanwhile, forgets the part it had; the part already on the
    link is the link's to drop).  ``dropping`` never falls inside a packet (:class:`LinkState`
    waits for ``busy`` to be 0).  ``i_tlp.ready`` is ``o_tlp.ready`` or'ed with registers.

    Members
    -------
    i_tlp : In(TLPStream()) ; o_tlp : Out(TLPStream())
    dropping : In(1)
        The port's :attr:`LinkState.dropping` (a register).
    busy : Out(1)
        Inside a packet, or a beat waiting at the input.
    flushed : Out(1)
        One-cycle strobe (a register) per packet discarded, a cycle after its last beat.
    """

    def __init__(self):
        super().__init__({
            "i_tlp":    In(TLPStream()),
            "o_tlp":    Out(TLPStream()),
            "dropping": In(1),
            "busy":     Out(1),
            "flushed":  Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        i, o = self.i_tlp, self.o_tlp
        in_pkt = Signal()           # after the first beat of a packet
        held = Signal()             # that packet is being discarded
        discard = Signal()
        m.d.comb += [
            discard.eq(self.dropping | (in_pkt & held)),
            o.valid.eq(i.valid & ~discard),
            o.p.eq(i.p),
            i.ready.eq(discard | o.ready),
            self.busy.eq(in_pkt | i.valid),
        ]
        moved = i.valid & i.ready
        with m.If(moved):
            m.d.sync += [in_pkt.eq(~i.p.last), held.eq(discard)]
        m.d.sync += self.flushed.eq(moved & i.p.last & discard)
        return m

