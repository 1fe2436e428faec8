"""Latency calibration of the simulation models against the PEACH2 measurements.

The models carry no PHY, data-link or transaction-layer pipeline of the Stratix IV hard IP, so
without help a 4-byte PIO store from one host to its neighbour's memory takes about 160 ns in
simulation against the **782 ns** measured on the boards (002 section 4.2: CPU store into
board A's window, A to B over the cable, B writes the buffer, CPU polls it).  Intel publishes no
latency for the Stratix IV hard IP's receive and transmit paths: its answer (support article
000081909, "What is the transmit and receive path latency for the PCI Express Compiler
MegaCore Function?") is that it depends on the configuration and is to be found by simulating
the generated core, which we cannot do here.

So one parameter is fitted: :data:`HARDIP_PIPELINE_NS`, the latency added by every hard IP in
each direction (RX: link to ``rx_st``; TX: ``tx_st`` to link), the same for all four ports of
every chip.  A store to the neighbour crosses four of them (host -> N RX, E TX, W RX, N TX ->
host), so ``P = (782 - L0) / 4`` where ``L0`` is the simulated latency with ``P = 0``.  Each
extra hop adds one TX and one RX crossing, the chip, and the cable; the 0.3-0.4 us per extra
hop of 000 section 5.4 is then a *check* of the model, not a second fit.  The fit lumps into
``P`` whatever else the 782 ns holds (the CPU's store and polling), so the per-hop figure it
predicts is an upper estimate.  ``peach2 bench cluster`` measures both figures (its ``latency``
part; ``docs/cluster.md``, "Latency calibration").
"""

__all__ = ["PIO_NEIGHBOUR_NS", "PER_HOP_NS", "HARDIP_PIPELINE_NS", "CYCLE_NS",
           "pipeline_cycles"]

#: 002 section 4.2: 4-byte PIO store, board A to board B, measured.
PIO_NEIGHBOUR_NS = 782.0
#: 000 section 5.4: latency added by each further TCA hop.
PER_HOP_NS = (300.0, 400.0)
#: Core clock period (250 MHz).
CYCLE_NS = 4.0

#: Fitted latency of one hard-IP crossing (one direction), ns: see the module docstring and
#: docs/cluster.md for the run that fitted it.
HARDIP_PIPELINE_NS = 156.0


def pipeline_cycles(ns=HARDIP_PIPELINE_NS):
    """Return a pipeline latency in whole 250 MHz cycles (the HDL cable's unit)."""
    if ns < 0:
        raise ValueError(f"a latency must not be negative, not {ns}")
    return round(ns / CYCLE_NS)
