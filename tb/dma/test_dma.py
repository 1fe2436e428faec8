"""DMA controller on one and two PEACH2 chips with hosts (cocotb, ``dma_tb``).

Each run converts the chip top once and runs several cocotb tests on it.  The runs go to
Verilator, where the chip is the library every top of it links (compiled once for the router's,
the sub-cluster's and these tops, docs/testing.md, "Where each test runs, and why");
``prefetch_race`` looks inside the DMA (its read requests and completions), which a library
does not show, so it runs on Icarus, and so does ``halo_planes`` when it records the DMA's
handshakes (``PEACH2_DMA_TRACE``, ``tb/dma/dma_trace.py``).  ``pytest --sim`` overrides.  Replay a
failure with its seed, e.g.::

    from test_dma import run
    run("dma-replay", 2, ["random_chains"], seed=7, rounds=1)
"""

import os
from pathlib import Path

import pytest
from dma_trace import TRACE_ENV

from peach2.sim.hdl import Chips
from peach2.sim.run import pick_simulator, run_cocotb

HERE = Path(__file__).parent

TWO_CHIPS = ["random_chains", "halo_planes"]
ONE_CHIP = ["completions", "host_faults", "descriptor_faults", "abort_and_busy",
            "abort_after_start"]


def run(name, n_chips, testcases, seed=1, simulator="verilator", module="dma_tb", probe=False,
        **params):
    """Build ``Chips(n_chips)`` and run the cocotb tests ``testcases`` of ``module`` on
    ``simulator`` (unless ``PEACH2_SIM``, i.e. ``pytest --sim``, names another).

    ``probe``: the tests look inside a chip's DMA; on Verilator the chips are then compiled
    into the top with ``dma_probe.vlt`` opening those signals, instead of linking the library.
    """
    if os.environ.get(TRACE_ENV) and "halo_planes" in testcases:    # the traced test
        simulator, probe = "icarus", True
    simulator = pick_simulator(simulator)
    inside = probe and simulator == "verilator"
    return run_cocotb(component=Chips(n_chips, library=not inside),
                      toplevel=f"chips{n_chips}", test_module=module, name=name, test_dir=HERE,
                      testcase=testcases, params=params, seed=seed, simulator=simulator,
                      extra_sources=[HERE / "dma_probe.vlt"] if inside else [])


def test_dma_two_chips():
    """Random chains (lengths up to 16 KiB, block-stride, register mode) on all channels of
    two nodes at once, local and remote; halo planes of 3^3, 8^3, 16^3 arrays both ways."""
    run("dma-two_chips", 2, TWO_CHIPS, seed=11)


def test_dma_one_chip():
    """Completion splitting, reordering and latency; every fault and its recovery."""
    run("dma-one_chip", 1, ONE_CHIP, seed=12)


def test_dma_prefetch_race():
    """The next descriptor's fetch landing on every cycle from 48 ns before to 24 ns after the
    close of the current one (the full sweep, 136 ns, is ``test_dma_prefetch_race_full``)."""
    run("dma-prefetch_race", 1, ["prefetch_race"], seed=13, simulator="icarus", probe=True,
        k_span=[6, 3])


@pytest.mark.slow
def test_dma_prefetch_race_full():
    """The next descriptor's fetch landing on every cycle around the close of the current one:
    K from 12 below to 4 above the round trip's middle."""
    run("dma-prefetch_race-full", 1, ["prefetch_race"], seed=13, simulator="icarus", probe=True)


def test_dma_block_fetch():
    """Descriptors fetched in blocks: random chains mixing announced runs (across 4 KiB and
    MRRS blocks, ending mid-block), scattered and unannounced descriptors on all channels; a
    scattered chain's fetches ahead of the data reads before them; a fault in the middle of a
    fetched block, end inside a run, a misaligned 64-byte head; what a start announces
    fetched at once."""
    run("dma-block_fetch", 1, ["fetch_chains", "fetch_order", "fetch_start", "fetch_faults"],
        seed=14, module="dma_fetch_tb")


def test_dma_queue():
    """Register-mode queues appended while they run: four at once with random batches, the
    append on every cycle around a close, and every refusal (docs/dma.md, "Queue mode")."""
    run("dma-queue", 1, ["queue_appends", "queue_append_timing", "queue_refusals",
                         "queue_back_to_back"], seed=15, module="dma_queue_tb")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [21, 22])
def test_dma_soak(seed):
    """Random chains with lengths up to 1 MiB, three rounds, more halo sizes."""
    run(f"dma-soak-{seed}", 2, TWO_CHIPS, seed=seed, rounds=3,
        max_len=1 << 20, host_size=1 << 24, src_size=1 << 23, ns=[2, 5, 12, 24, 32])


@pytest.mark.slow
def test_dma_one_chip_other_seed():
    run("dma-one_chip-seed", 1, ONE_CHIP, seed=31, max_len=1 << 16)
