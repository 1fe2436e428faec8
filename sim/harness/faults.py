"""Link loss and chip reset on an HDL sub-cluster (``docs/errors.md``, "Reset and link loss").

Works on a :class:`~peach2.sim.harness.cluster.Cluster` built on a
:class:`~peach2.sim.hdl.cluster_top.ClusterTop` (``hdl_cables=True``): a cable is taken down through
the top's ``cable<j>_down`` input (both hard IPs' LTSSMs leave L0, the cable drops what is in
flight, :class:`~peach2.sim.hdl.cable.Cable`), a chip is reset through ``c<i>_reset`` (its cables go
down with it).  The neighbours' reaction is the chip's own (:mod:`peach2.router.linkstate`).
"""

from cocotb.triggers import ClockCycles

__all__ = ["cable_index", "set_cable", "reset_chip", "wait_port_ready"]


def cable_index(cluster, node, port):
    """Return the index ``j`` of the cable at ``node``'s ``port`` (``"E"``, ``"W"``, ``"S"``)."""
    for j, (a, pa, b, pb, _) in enumerate(cluster.cables):
        if (a, pa) == (node, port) or (b, pb) == (node, port):
            return j
    raise ValueError(f"node {node} has no cable on port {port}")


def set_cable(cluster, j, up):
    """Take cable ``j`` down (``up`` false) or bring it back up, from the next clock edge."""
    getattr(cluster.dut, f"cable{j}_down").value = 0 if up else 1


async def reset_chip(cluster, node, cycles=100):
    """Hold chip ``node`` in reset for ``cycles`` (its cables down meanwhile), release it and
    program it again as :meth:`~peach2.sim.harness.cluster.Cluster.start` did (routes, offset,
    enables: a reset clears every register).  Its host's link (N) stays up: the host keeps its
    enumeration and talks to the chip's registers again once it is out of reset."""
    dut = cluster.dut
    getattr(dut, f"c{node}_reset").value = 1
    await ClockCycles(dut.clk, cycles)
    getattr(dut, f"c{node}_reset").value = 0
    await ClockCycles(dut.clk, 2)
    await cluster.program(node)


async def wait_port_ready(cluster, node, port, *, polls=200):
    """Poll ``node``'s PORT_STATUS[``port``] until its link is up and it no longer drops
    traffic; return the last status.  Raises ``AssertionError`` after ``polls`` reads."""
    drv = cluster.drivers[node]
    for _ in range(polls):
        st = await drv.read_fields("PORT_STATUS", "NEWS".index(port))
        if st["link_up"] and not st["dropping"]:
            return st
        await ClockCycles(cluster.dut.clk, 20)
    raise AssertionError(f"node {node} port {port} still not ready: {st}")
