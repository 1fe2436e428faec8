"""Links between simulated PCIe ports: chip to chip back to back, or a port to a bare partner.

A link is two cocotbext-pcie ``SimPort`` objects joined with ``connect``.  Each port sends one
packet at a time: a TLP holds the wire for ``Tlp.get_wire_size()`` (header + payload + 8) times
``symbol_period`` = 8 / (lane rate x lanes) = 0.25 ns per byte at Gen2 x8 (4 GB/s), DLLPs (ACK,
flow-control updates) for 8 bytes, then reach the far port ``port_delay`` (per side, default
5 ns) later.  Speed and width are negotiated as the minimum of the two ports' ``max_link_*``,
fixed at ``connect`` time, so they are set here first.  The ports run ACK/NAK and credit-based
flow control, so a receiver that holds credits back slows the sender the way a real link does.

Simplifications: no link training, no replay on errors (cocotbext raises on a NAK), latency is a
fixed delay; both chip ports are modelled as endpoints that pass every request to their DUT
(``accept_all``), although on the real board one side of a ring link is a root port.

A port must be connected before simulation time advances: an unconnected cocotbext ``SimPort``
raises "Port not connected" as soon as it tries to send its first flow-control DLLP.
"""

from cocotb.queue import Queue
from cocotbext.pcie.core.port import SimPort

__all__ = ["Link", "LinkPartner", "connect", "terminate"]


def _port(end):
    """The SimPort of ``end`` (a Device, anything with ``upstream_port``, or a port)."""
    return getattr(end, "upstream_port", end)


def _configure(port, gen, width, port_delay_ns):
    port.max_link_speed, port.max_link_width = gen, width
    if port_delay_ns is not None:
        port.port_delay = port_delay_ns * 1e-9


class Link:
    """Two ports joined back to back.

    Members
    -------
    a, b : SimPort
        The two ends; ``a`` sends the A-to-B traffic (meter it with
        ``ThroughputMeter(link.a)``), ``b`` the B-to-A traffic.
    """

    def __init__(self, a, b):
        self.a, self.b = a, b

    @property
    def bytes_per_second(self):
        """Raw link rate (4e9 at Gen2 x8)."""
        return 1 / self.a.symbol_period

    @property
    def delay_ns(self):
        """One-way latency added after the wire time."""
        return self.a.link_delay_steps / self.a.time_scale * 1e9


def connect(a, b, *, gen=2, width=8, port_delay_ns=None, max_payload_size=256,
            max_read_request_size=512, accept_all=True):
    """Link two chip ports (device models) back to back.

    Parameters
    ----------
    a, b : Device or SimPort
        The ends; a device contributes its ``upstream_port``.
    gen, width : int
        Link speed (2 = 5 GT/s) and lanes.
    port_delay_ns : float, optional
        Delay of each port (cocotbext default 5 ns, so 10 ns one way).
    max_payload_size, max_read_request_size : int
        Programmed into each device model (nobody enumerates a chip-to-chip link).
    accept_all : bool
        Make each device model pass every request and completion to its DUT, BAR or not.

    Returns
    -------
    Link
    """
    pa, pb = _port(a), _port(b)
    for port in (pa, pb):
        _configure(port, gen, width, port_delay_ns)
    pa.connect(pb)
    for end in (a, b):
        if hasattr(end, "set_link_config"):
            end.set_link_config(max_payload_size, max_read_request_size)
        if hasattr(end, "accept_all"):
            end.accept_all = accept_all
    return Link(pa, pb)


class LinkPartner:
    """The far end of a link with nothing behind it: it keeps what arrives and sends on demand.

    Useful for single-port tests with no host: TLPs the DUT transmits arrive in :attr:`queue`
    (credits returned at once unless ``fc_init`` limits them), and :meth:`send` puts TLPs on
    the wire toward the device (use the model's ``inject`` to skip the link instead).

    Parameters
    ----------
    fc_init : list, optional
        Credits this partner advertises, ``[PH, PD, NPH, NPD, CPLH, CPLD]`` (0 = infinite).

    Members
    -------
    port : SimPort
    queue : cocotb.queue.Queue of Tlp
    received : int
    """

    def __init__(self, fc_init=None):
        self.port = SimPort(fc_init=[list(fc_init or [0] * 6)] * 8)
        self.port.rx_handler = self._recv
        self.queue = Queue()
        self.received = 0

    async def _recv(self, tlp):
        tlp.release_fc()
        self.received += 1
        self.queue.put_nowait(tlp)

    async def send(self, tlp):
        """Send ``tlp`` over the link (waits for credits and wire time)."""
        await self.port.send(tlp)

    async def recv(self):
        """Return the next TLP that arrived."""
        return await self.queue.get()


def terminate(device, *, gen=2, width=8, port_delay_ns=None, fc_init=None, **link_config):
    """Connect ``device`` to a new :class:`LinkPartner` at Gen2 x8 and return the partner.

    ``link_config`` (``max_payload_size``, ``max_read_request_size``, ``accept_all``) goes to
    :func:`connect`.
    """
    partner = LinkPartner(fc_init)
    connect(device, partner.port, gen=gen, width=width, port_delay_ns=port_delay_ns,
            **link_config)
    return partner
