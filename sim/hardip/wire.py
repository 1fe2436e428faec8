"""The hard IP's transmitter on the wire: cut-through from the first beat.

cocotbext-pcie's ``SimPort`` puts a packet on the wire when the port's transmit loop takes it
and holds the wire for its wire size at the link's rate; the model hands a TLP from the DUT to
that loop only once its EOP beat is in, so by itself every TLP would wait for its last beat
before its first symbol leaves (store-and-forward, a whole TLP's beats per hard IP crossed).

The hard IP's transmit path does not wait so: the vendor's Avalon-ST rule that once
``tx_st_sop`` is accepted the packet's beats come back to back, without ``tx_st_valid``
falling while ``tx_st_ready`` is high (checked by :class:`~peach2.sim.hardip.tx_checker.TxChecker`
as ``tx-valid-gap``), is the rule a transmitter needs that streams the packet into the link
as it arrives; a store-and-forward transmitter would not need it. The 128-bit interface at
250 MHz delivers 4 bytes a nanosecond, the Gen2 x8 wire carries 4 (8b/10b), and the wire adds
framing, so a packet that starts on the wire once its first beat is through the pipeline never
runs out of data.

:class:`CutThroughPort` is that transmitter: a packet handed over on time may take the wire
from ``start`` (its SOP beat plus the transmit pipeline, or when the wire fell free, whichever
is later), never ending before its last beat is through the pipeline (``last`` plus one beat
of wire). A packet handed over late (it waited for flow-control credits or for the wire behind
another packet), a replay and a DLLP go on the wire when taken, as in ``SimPort``.
"""

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.port import SimPort

__all__ = ["CutThroughPort", "cut_through"]

#: Bytes of one Avalon-ST beat: the wire time the last beat needs after the pipeline.
_BEAT_BYTES = 16


def cut_through(tlp, start, last, handed):
    """Mark ``tlp`` for :class:`CutThroughPort`: its first symbol may take the wire at
    ``start``, its last beat is through the pipeline at ``last``, and the device hands it to
    the port at ``handed`` (simulation steps)."""
    tlp.cut_through = (start, last, handed)


class CutThroughPort(SimPort):
    """A ``SimPort`` whose transmitter starts a marked TLP (:func:`cut_through`) on the wire
    before its last beat is in (see the module docstring). Unmarked packets are sent exactly as
    ``SimPort`` sends them.

    Members
    -------
    wire_free : int
        Simulation step at which the wire's last symbol left.
    sent_from : int
        Simulation step at which the last packet sent took the wire (for a meter that wraps
        ``handle_tx``: it is called later than that for a packet that cut through).
    """

    wire_free = sent_from = 0

    async def handle_tx(self, pkt):
        now = get_sim_time("step")
        wire = pkt.get_wire_size() * self.symbol_period * self.time_scale
        mark = getattr(pkt, "cut_through", None)
        begin, end = now, now + wire
        if mark is not None:
            start, last, handed = mark
            pkt.cut_through = None          # a replay from the retry buffer is sent whole
            if now <= handed:               # taken when handed over: nothing else held it
                begin = max(self.wire_free, start)
                end = max(begin + wire, last + _BEAT_BYTES * self.symbol_period * self.time_scale)
        self.wire_free, self.sent_from = end, begin
        await Timer(max(int(end - now), 1), "step")
        cocotb.start_soon(self._transmit(pkt))
