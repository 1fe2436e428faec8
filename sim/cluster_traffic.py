"""What runs on a sub-cluster once it is up: stores, waits for what arrives, counters, stuck
links (the traffic half of :class:`~peach2.sim.cluster.Cluster`, which builds and starts it).
"""

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.pcie.core.tlp import TlpType

__all__ = ["ClusterTraffic", "gather"]


class ClusterTraffic:
    """Methods of :class:`~peach2.sim.cluster.Cluster` on its traffic.  They use the
    cluster's ``dut``, ``chips``, ``cables``, ``drivers``, ``gpus``, ``address_map``,
    ``arrivals`` and the counts its ``__init__`` sets up (``_bytes``, ``_writes``,
    ``_record``, ``_watchers``, ``_memory``)."""

    def _watch_writes(self, rc, node):
        log = self.arrivals[node]
        for ft in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            handler = rc.rx_tlp_handler[ft]

            async def watched(tlp, handler=handler):
                await handler(tlp)
                if self._record:
                    log.append((get_sim_time("ns"), tlp))
                self._writes[node] += 1
                self._bytes[node] += _write_bytes(tlp)
                for watcher in self._watchers:
                    watcher(node, tlp)
            rc.register_rx_tlp_handler(ft, watched)

    def on_write(self, watcher):
        """Call ``watcher(node, tlp)`` for every memory write host ``node``'s root complex
        receives, after it is written to memory, in the order received."""
        self._watchers.append(watcher)

    # -- traffic ---------------------------------------------------------------------------------

    def memory(self, node):
        """Return ``(bus address, MemoryRegion)`` of the memory behind ``node``'s host window."""
        return self._memory[node]

    def gpu_memory(self, node, i):
        """Return ``(bus address, memory)`` of GPU ``i`` of ``node``: the BAR's address in the
        node's host (a DMA source on that node) and the device memory (``memory[a:b]`` reads
        and writes it without simulation time)."""
        gpu = self.gpus[node][i]
        dev = self.chips[node].host.rc.find_device(gpu.function.pcie_id)
        return dev.bar_addr[0], gpu.memory

    async def pio_write(self, src, dst, offset, data, window="host"):
        """Store ``data`` from host ``src`` into node ``dst``'s ``window`` (``"host"`` or
        ``("gpu", i)``) at ``offset``.

        Returns when host ``src``'s root complex has queued the TLPs (stores are posted).
        """
        return await self.drivers[src].pio_write(self.address_map, dst, window, offset, data)

    async def _wait_for(self, node, have, count, what, timeout_ns):
        start = get_sim_time("ns")
        while have() < count:
            if get_sim_time("ns") - start > timeout_ns:
                raise AssertionError(f"host {node} received {have()} {what}, expected {count}, "
                                     f"within {timeout_ns} ns")
            await ClockCycles(self.dut.clk, 8)

    async def wait_writes(self, node, count, timeout_ns=200_000):
        """Wait until host ``node`` has received ``count`` memory writes in all."""
        await self._wait_for(node, lambda: len(self.arrivals[node]), count, "memory writes",
                             timeout_ns)

    def writes_received(self, node):
        """Memory writes host ``node`` has received (kept or not in ``arrivals``)."""
        return self._writes[node]

    def bytes_received(self, node):
        """Bytes host ``node`` has received in memory writes (byte enables counted)."""
        return self._bytes[node]

    async def wait_bytes(self, node, count, timeout_ns=200_000):
        """Wait until host ``node`` has received ``count`` bytes in memory writes in all
        (independent of how the writes were split)."""
        await self._wait_for(node, lambda: self._bytes[node], count, "bytes", timeout_ns)

    async def wait_gpu_bytes(self, node, i, count, timeout_ns=200_000):
        """Wait until GPU ``i`` of ``node`` has received ``count`` bytes in memory writes."""
        gpu = self.gpus[node][i].function
        await self._wait_for(node, lambda: gpu.bytes_written, count, f"bytes into GPU {i}",
                             timeout_ns)

    async def quiet(self, cycles=100):
        """Wait until no model holds a TLP for its chip or its link, then ``cycles`` more."""
        for chip in self.chips:
            for model in chip.models.values():
                await model.rx_idle()
                await model.tx_idle()
        await ClockCycles(self.dut.clk, cycles)

    async def counters(self):
        """Return every node's counters, ``[{port: {reason: count}}]`` (nodes read at once)."""
        return await gather(drv.counters() for drv in self.drivers)

    async def clear_counters(self):
        """Zero every chip's counters."""
        await gather(drv.clear_counters() for drv in self.drivers)

    def cable_stats(self):
        """Return ``[(a, port_a, b, port_b, {stat: count})]`` of the HDL cables' counters
        (``a2b_tlps``, ``b2a_tlps``, ``a2b_stall``, ``b2a_stall``; ``hdl_cables`` only)."""
        out = []
        for j, (a, pa, b, pb, _) in enumerate(self.cables):
            stats = {k: int(getattr(self.dut, f"cable{j}_{k}").value)
                     for k in ("a2b_tlps", "b2a_tlps", "a2b_stall", "b2a_stall")}
            out.append((a, pa, b, pb, stats))
        return out

    async def wait_writes_or_stuck(self, want, *, window_ns=20_000, poll_ns=1_000):
        """Wait until host ``n`` has received ``want[n]`` memory writes for every ``n``, or
        until nothing moves for ``window_ns`` (no write arrives anywhere, no cable carries a
        TLP).  Returns ``None`` when done, else the stuck links: ``["2.E -> 3.W", ...]``, every
        cable direction that waited for credits through the whole window (``hdl_cables``)."""
        def snapshot():
            return ([len(a) for a in self.arrivals], self.cable_stats())
        last, since = snapshot(), get_sim_time("ns")
        while any(len(self.arrivals[n]) < w for n, w in enumerate(want)):
            await ClockCycles(self.dut.clk, max(1, int(poll_ns // 4)))
            now = snapshot()
            moved = now[0] != last[0] or any(
                s1[4][k] != s0[4][k] for s0, s1 in zip(last[1], now[1])
                for k in ("a2b_tlps", "b2a_tlps"))
            if moved:
                last, since = now, get_sim_time("ns")
            elif get_sim_time("ns") - since >= window_ns:
                stuck = []
                for (a, pa, b, pb, s0), (_, _, _, _, s1) in zip(last[1], now[1]):
                    if s1["a2b_stall"] - s0["a2b_stall"] >= window_ns // 4 - poll_ns // 4:
                        stuck.append(f"{a}.{pa} -> {b}.{pb}")
                    if s1["b2a_stall"] - s0["b2a_stall"] >= window_ns // 4 - poll_ns // 4:
                        stuck.append(f"{b}.{pb} -> {a}.{pa}")
                return stuck
        return None

    def check(self):
        """Assert no model or host of any node recorded a protocol violation."""
        for chip in self.chips:
            chip.check()


def _write_bytes(tlp):
    """Bytes a memory write TLP writes: its DWs less the bytes its byte enables leave out."""
    n = 4 * tlp.length
    first, last = tlp.first_be, tlp.last_be if tlp.length > 1 else tlp.first_be
    n -= (first & -first).bit_length() - 1          # leading disabled bytes of the first DW
    n -= 4 - last.bit_length()                      # trailing disabled bytes of the last DW
    return n


async def gather(coros):
    """Run coroutines ``coros`` at once; return their results in order."""
    tasks = [cocotb.start_soon(c) for c in coros]
    return [await t for t in tasks]
