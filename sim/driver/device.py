"""Puts started by a GPU kernel, two ways (docs/put.md, "Puts from a GPU kernel").

:class:`DevicePut` is what a kernel does to use the put engine itself: it stores each 64-byte
put descriptor into PEACH2's put window (BAR 4) peer to peer through the root complex (the GPU
and PEACH2 share CPU0's root complex on HA-PACS/TCA, 002 section 3.2) and polls the completion
word in its own memory; no host CPU takes part.

:class:`GmpiDaemon` is the path of GMPI (001, *GMPI: MPI calls issued from GPU kernels*): the
kernel writes the call's attributes into a ring buffer in its own memory, a daemon on the host
polls that ring and makes the call for it (here the same inline put, through the host's
:class:`~peach2.sim.driver.Driver`).  001 section 5.1 measured a constant overhead of about
10 us for every GMPI call (the ring's device memory synchronised inside each call), which the
model adds as one delay (``call_ns``) after the daemon's poll finds the request
(``poll_ns`` apart): simplified, not the ring's protocol step by step.

cocotb is imported only when a daemon is made (plans are built without a simulator).
"""

from peach2.params import PUT_WINDOW
from peach2.put.descriptor import PUT_BYTES, pack

__all__ = ["DevicePut", "GmpiDaemon", "GMPI_CALL_NS", "GMPI_POLL_NS"]

#: 001 section 5.1: the constant overhead of a GMPI call, about 10 us.
GMPI_CALL_NS = 10_000
#: How often the host daemon reads the ring (not given by 001; a busy loop of device-memory reads
#: through gdrcopy, one read about 1 us apart).
GMPI_POLL_NS = 1_000


class DevicePut:
    """Inline puts from a kernel on ``gpu`` (a :class:`~peach2.sim.pcie.gpu.GpuFunction`) into
    the put window at bus address ``put_bar`` (its own chip's BAR 4)."""

    def __init__(self, gpu, put_bar):
        self.gpu, self.put_bar = gpu, put_bar
        self._slot = 0

    async def put(self, dst, data, *, seq_addr=None, seq_value=0, irq=False):
        """Store one put descriptor (as :meth:`peach2.sim.driver.Driver.put`); the slots of the
        window are used in turn."""
        raw = pack(dst=dst, data=data, seq_addr=seq_addr, seq_value=seq_value, irq=irq)
        address = self.put_bar + self._slot * PUT_BYTES
        self._slot = (self._slot + 1) % (PUT_WINDOW // PUT_BYTES)
        await self.gpu.store(address, raw)


class GmpiDaemon:
    """The host daemon of GMPI serving one GPU's requests with ``driver`` (the host's
    :class:`~peach2.sim.driver.Driver` of its chip): :meth:`request` is the kernel's call."""

    def __init__(self, driver, *, poll_ns=GMPI_POLL_NS, call_ns=GMPI_CALL_NS):
        if poll_ns <= 0 or call_ns < 0:
            raise ValueError(f"poll_ns must be positive and call_ns not negative, not "
                             f"{poll_ns}, {call_ns}")
        self.driver, self.poll_ns, self.call_ns = driver, poll_ns, call_ns
        import cocotb
        from cocotb.triggers import Event
        self._ring = []
        self._arrived = Event()
        self._task = cocotb.start_soon(self._serve())

    async def request(self, dst, data, *, seq_addr=None, seq_value=0):
        """The kernel's call: its attributes written into the ring in its own memory (no PCIe
        traffic: the daemon reads them)."""
        self._ring.append((dst, bytes(data), seq_addr, seq_value))
        self._arrived.set()

    async def _serve(self):
        from cocotb.triggers import Timer
        from cocotb.utils import get_sim_time
        while True:
            if not self._ring:
                self._arrived.clear()
                await self._arrived.wait()
                # the daemon's next poll of the ring: polls fall every poll_ns
                now = get_sim_time("ns")
                await Timer(self.poll_ns - now % self.poll_ns, "ns")
            dst, data, seq_addr, seq_value = self._ring.pop(0)
            await Timer(self.call_ns, "ns")
            await self.driver.put(dst, data, seq_addr=seq_addr, seq_value=seq_value)

    def stop(self):
        """Stop the daemon (at the end of a test)."""
        self._task.cancel()
