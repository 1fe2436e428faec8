"""Harnesses: a chip with its hosts, a sub-cluster, faults, the scoreboard soak, the router,
register-block and DMA testbench set-ups; the router traffic's functional coverage
(:mod:`peach2.sim.harness.coverage`, imported by its users: ``python -m`` runs it).
"""

from .chip import CSR_BAR, LTSSM_L0, PORTS, TCA_BAR, TCA_SIZE, ChipHarness
from .cluster import Cluster
from .csr import (
    CsrHarness,
    SimBar,
    expected_byte_count,
    expected_lower_address,
    make_read,
    make_write,
    pauses,
)
from .dma import CLOCK_NS, DESC_AREA, Arena, DmaHarness, Job, MsiCatcher, ctrl_offset, src_arena
from .faults import cable_index, reset_chip, set_cable, wait_port_ready
from .router import (
    HOST_ID,
    MASK64,
    NODE_SIZE,
    REASONS,
    check_delivered,
    decide,
    mrd,
    mwr,
    node_write,
    program_nodes,
    requests_sent,
    sample_outcomes,
    seq_of,
    setup,
    wait_quiet,
    wait_until,
)
from .soak import DROP_REASONS, Soak, SoakStalled

__all__ = ["ChipHarness", "PORTS", "CSR_BAR", "TCA_BAR", "TCA_SIZE", "LTSSM_L0", "Cluster",
           "CsrHarness", "SimBar", "pauses", "expected_byte_count", "expected_lower_address",
           "make_read", "make_write", "CLOCK_NS", "DESC_AREA", "MsiCatcher", "Arena", "Job",
           "DmaHarness", "src_arena", "ctrl_offset", "cable_index", "set_cable", "reset_chip",
           "wait_port_ready", "REASONS", "HOST_ID", "NODE_SIZE", "MASK64", "setup", "mwr", "mrd",
           "wait_quiet", "seq_of", "requests_sent", "check_delivered", "wait_until",
           "program_nodes", "node_write", "decide", "sample_outcomes", "Soak", "SoakStalled", "DROP_REASONS"]
