"""TCA all-to-all inside one co-simulated sub-cluster, with its Python model.

Every host stores into every node of its sub-cluster (PIO, its own node included) and every
node's DMA channel 0 runs one chain with a descriptor to every node, as the sub-cluster tests
do (``tb/cluster``): random sizes and offsets inside a slot of the destination's TCA window that
is the source's alone, so each byte has one writer and the model is a shadow copy of every
window.  Randomness is drawn per source from the seed and the source's *global* node number, so
a sub-cluster moves the same bytes wherever it runs.

The traffic uses the first half of each node's host window (:data:`TCA_SHARE`); MPI takes its
host buffers from the second half.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time

__all__ = ["TcaAllToAll", "TCA_SHARE"]

#: Fraction of each node's host window the TCA traffic owns.
TCA_SHARE = 2


class TcaAllToAll:
    """PIO and DMA all-to-all on ``cluster`` (a :class:`~peach2.sim.harness.Cluster` of
    sub-cluster ``s``; node ``i`` is global node ``first + i``).

    Members
    -------
    done_ps : int or None
        When every byte had arrived.
    bytes : int
        Bytes the traffic moves.
    """

    def __init__(self, cluster, first, seed, *, stores=1, max_size=512):
        self.cluster, self.first, self.seed = cluster, first, seed
        self.stores, self.max_size = stores, max_size
        self.done_ps = None
        self.bytes = 0
        self._shadow = []

    @property
    def share(self):
        """Bytes of each host window the traffic owns (from offset 0)."""
        return self.cluster.address_map.host_size // TCA_SHARE

    async def run(self):
        """Set up, run, wait until every byte arrived (sets :attr:`done_ps`)."""
        cluster, n = self.cluster, self.cluster.n_nodes
        slot = self.share // (2 * n)            # PIO slots 0..n-1, DMA slots n..2n-1
        max_size = min(self.max_size, slot)
        self._shadow = [bytearray(cluster.memory(i)[1][0:self.share]) for i in range(n)]
        want = [0] * n
        flows, chains = {}, []
        for src in range(n):
            rng = random.Random(self.seed * 1_000_003 + 7919 * (self.first + src))
            for dst in range(n):
                stores = []
                for _ in range(self.stores):
                    size = rng.randint(1, max_size)
                    off = src * slot + rng.randrange(slot - size + 1)
                    stores.append((off, rng.randbytes(size)))
                    self._shadow[dst][off:off + size] = stores[-1][1]
                    want[dst] += size
                flows[(src, dst)] = stores
            chain, writes = await cluster.dma_chain_to_all(src, rng, slot, max_size,
                                                           self._shadow)
            for dst, _, size in writes:
                want[dst] += size
            chains.append(chain)
        self.bytes = sum(want)
        before = [cluster.bytes_received(i) for i in range(n)]
        clk = cluster.dut.clk

        async def flow(src, dst):
            for off, data in flows[(src, dst)]:
                await cluster.pio_write(src, dst, off, data)

        async def dma(src):
            await cluster.drivers[src].dma_run(chains[src], pause=lambda: ClockCycles(clk, 64))

        tasks = [cocotb.start_soon(flow(s, d)) for s, d in flows]
        tasks += [cocotb.start_soon(dma(s)) for s in range(n)]
        for task in tasks:
            await task
        for dst in range(n):
            await cluster.wait_bytes(dst, before[dst] + want[dst], timeout_ns=2_000_000)
        self.done_ps = int(get_sim_time("ps"))

    def check(self):
        """Compare every node's TCA share with the model; return the bytes compared."""
        for i, shadow in enumerate(self._shadow):
            got = bytes(self.cluster.memory(i)[1][0:self.share])
            if got != bytes(shadow):
                bad = [k for k in range(len(got)) if got[k] != shadow[k]]
                raise AssertionError(f"node {self.first + i}: the TCA window differs from its "
                                     f"model at {len(bad)} bytes, first at offset {bad[0]:#x}")
        return len(self._shadow) * self.share
