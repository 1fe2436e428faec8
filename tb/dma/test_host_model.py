"""The host's completion splitting (``peach2.sim.pcie.host.completion_plan``), without a simulator.

The DMA tests rely on the host splitting completions at every read completion boundary (64 or
128 bytes) when asked; this checks the split covers the request exactly and obeys the RCB and
max payload size rules of PCIe (a completion other than the last ends on an RCB boundary).
"""

import random

import pytest

from peach2.sim.pcie import completion_plan


def request(rng):
    """A random memory read: (first byte address, bytes selected, length DW)."""
    length = rng.randrange(1, 129)                      # up to 512 bytes
    dw = rng.randrange(1 << 20) * 4
    first = rng.choice((0, 0, 1, 2, 3)) if length > 1 else rng.randrange(4)
    last = rng.choice((0, 0, 1, 2, 3)) if length > 1 else 0
    nbytes = 4 * length - first - last if length > 1 else rng.randrange(1, 5 - first)
    return dw + first, nbytes, length


@pytest.mark.parametrize("rcb", [64, 128])
@pytest.mark.parametrize("all_rcb", [False, True])
@pytest.mark.parametrize("mps", [128, 256, 512])
def test_completion_plan(rcb, all_rcb, mps):
    rng = random.Random(rcb * mps + all_rcb)
    for _ in range(500):
        address, nbytes, length = request(rng)
        plan = completion_plan(address, nbytes, length, rcb, mps, all_rcb)
        assert sum(k for _, k, _, _ in plan) == length
        assert [m for m, _, _, _ in plan] == [sum(k for _, k, _, _ in plan[:i])
                                              for i in range(len(plan))]
        assert plan[0][2] == nbytes and plan[0][3] == address & 0x7F
        at = address
        for i, (m, k, byte_count, lower) in enumerate(plan):
            assert 4 * k <= mps
            assert lower == at & 0x7F
            end = (at & ~3) + 4 * k                      # DW-aligned end of this completion
            if i < len(plan) - 1:
                assert end % rcb == 0, (address, nbytes, length, plan)
                if all_rcb:
                    assert end - (at & ~3) <= rcb
                nxt = plan[i + 1]
                assert nxt[2] == byte_count - (end - at)
            at = end
        if all_rcb:
            first_rcb = (address & ~(rcb - 1))
            assert len(plan) == -(-((address & ~3) + 4 * length - first_rcb) // rcb)
