"""One PEACH2 chip in simulation: its four hard-IP models, a host on N, captures on every port.

::

    Host (RootComplex) --link-- N model --+                        +-- E model -- partner/link
                                          |   PEACH2 (DUT, prefix)  |
                                          |                        +-- W model -- partner/link
                                          +------------------------+-- S model -- partner/link

:class:`ChipHarness` is what router testbenches (and multi-node assemblies) are built from.  Each
port's model captures the TLPs the chip sends (``sent[port]``); requests are kept off the link
by default so a test can inject arbitrary traffic without a real far end having to accept it.
Ports named in ``linked`` are left for the caller to cable to another chip's model
(:func:`peach2.sim.pcie.link.connect`, as :class:`peach2.sim.harness.cluster.Cluster` does); everything the
chip sends on them goes onto that link.
"""

import random

from cocotb.triggers import ClockCycles
from cocotbext.pcie.core.utils import PcieId

from peach2.params import PUT_BAR, PUT_WINDOW
from peach2.platform.hardip import KO_CPL_SPC_VC0
from peach2.sim.hardip import HardIPModel
from peach2.sim.pcie import Host, terminate

__all__ = ["ChipHarness", "PORTS", "CSR_BAR", "TCA_BAR", "PUT_BAR", "TCA_SIZE", "LTSSM_L0"]

PORTS = ("n", "e", "w", "s")
CSR_BAR = 0
TCA_BAR = 2
#: Size of the TCA window BAR in simulation (the papers' system used 512 GiB).
TCA_SIZE = 1 << 36
LTSSM_L0 = 0x0F


class ChipHarness:
    """The hard-IP models and host around one ``peach2`` instance.

    Parameters
    ----------
    dut : cocotb handle
    prefix : str
        Pin prefix of this chip's instance ("" for a single-chip top).
    host : bool
        Put a RootComplex host on N (else N gets a bare link partner).
    seed : int
        Seeds the models' dirty-mode data and the testbench's own choices.
    pass_to_link : callable, optional
        ``pass_to_link(port, tlp) -> bool``: which TLPs the chip sends really go onto the
        link (default: every TLP on a ``linked`` port, completions on N so host register reads
        complete; nothing else).
    linked : iterable of str
        Link ports (``"e"``, ``"w"``, ``"s"``) that get no :func:`~peach2.sim.pcie.link.terminate`
        partner: the caller connects their models (to another chip's, with
        :func:`~peach2.sim.pcie.link.connect`) before simulation time advances.  Default: none.
    cpl_space : int
        What the N hard IP reports on ``ko_cpl_spc_vc0`` (its completion buffer): default the
        vendor's Gen2 x8 example, 112 headers and 448 data credits (7 KiB).
    ports : iterable of str
        Ports that get a hard-IP model (default all four; a cluster top whose cables are in
        HDL brings out N only).
    sleep_when_idle : bool
        Models run only when there is traffic (:class:`~peach2.sim.hardip.model.HardIPModel`).
    hdl_clock : bool
        The clock is made in the HDL top (:func:`~peach2.sim.hardip.model.edge_shows_update`).
    pipeline_ns : float
        RX and TX pipeline latency of every model (:mod:`peach2.sim.pcie.calibration`).
    ticker : peach2.sim.run.ticker.EdgeTicker, optional
        Steps the models each cycle, shared with other chips' models (default: one per model).
    rst : cocotb handle, optional
        The reset this chip sees, watched by its models (default the top's ``rst``; a cluster
        top's ``c<i>_rst_out`` when one chip can be reset alone).

    Members
    -------
    models : dict of HardIPModel
    host : Host or None
    sent : dict of list of Tlp
        Every TLP the chip sent, per port, in order; each has ``sent_cycle``, the port model's
        cycle in which its last beat was taken.
    ready_logs : dict of ReadyLog
        Per port given backpressure by :meth:`set_backpressure`: when its TX ready was low.
    """

    def __init__(self, dut, prefix="", *, host=True, seed=0, mps=256, pass_to_link=None,
                 dirty=True, linked=(), cpl_space=KO_CPL_SPC_VC0, ports=PORTS,
                 sleep_when_idle=False, pipeline_ns=0.0, hdl_clock=False, ticker=None,
                 rst=None):
        self.dut = dut
        self.cpl_space = cpl_space
        self.prefix = prefix
        self.linked = frozenset(linked)
        if not self.linked <= {"e", "w", "s"}:
            raise ValueError(f"only link ports e, w, s can be linked, not {sorted(self.linked)}")
        self.rng = random.Random(seed)
        self.sent = {p: [] for p in PORTS}
        self.ready_logs = {}
        self.models = {}
        self.ports = tuple(p for p in PORTS if p in ports)
        if "n" not in self.ports and host:
            raise ValueError("a host needs the N port's model")
        common = dict(max_payload_size=mps, dirty=dirty, sleep_when_idle=sleep_when_idle,
                      rx_pipeline_ns=pipeline_ns, tx_pipeline_ns=pipeline_ns,
                      hdl_clock=hdl_clock, ticker=ticker, rst=rst)
        for k, p in enumerate(PORTS):
            if p not in self.ports:
                continue
            if p == "n":
                # BAR 0 registers, BAR 2 the TCA window, BAR 4 the put window (both 64-bit
                # prefetchable: the host may map them write-combining).
                bars = [(4096, False, False), None, (TCA_SIZE, True, True), None,
                        (PUT_WINDOW, True, True)]
                self.models[p] = HardIPModel(dut, prefix=f"{prefix}{p}_", bars=bars, seed=seed,
                                        **common)
            else:
                self.models[p] = HardIPModel(dut, prefix=f"{prefix}{p}_", accept_all=True,
                                        seed=seed + k, **common)
        self.host = Host(self.models["n"], max_payload_size=mps) if host else None
        self.partners = {}
        for p in self.ports:
            if p in self.linked:
                continue
            if p != "n" or not host:
                self.partners[p] = terminate(self.models[p], max_payload_size=mps)
            self.models[p].set_link_config(max_payload_size=mps)
        self._pass = pass_to_link or self._default_pass
        for p in self.ports:
            self.models[p].on_tx = self._capture(p)

    def _default_pass(self, port, tlp):
        if port in self.linked:
            return True
        return port == "n" and tlp.is_completion() and tlp.requester_id == PcieId(0, 0, 0)

    def _capture(self, port):
        model = self.models[port]

        def on_tx(tlp):
            tlp.sent_cycle = model.cycle
            self.sent[port].append(tlp)
            return bool(self._pass(port, tlp))
        return on_tx

    def set_backpressure(self, port, generator):
        """Drop ``port``'s TX ready once for each value 1 from ``generator`` (None: never), as
        the model's ``set_backpressure_generator``, noting the cycles for :meth:`stalled`."""
        from .coverage import ReadyLog  # not at the top: ``python -m`` runs that module
        model = self.models[port]
        if generator is None:
            model.set_backpressure_generator(None)
            return
        log = self.ready_logs.setdefault(port, ReadyLog())
        model.set_backpressure_generator(log.wrap(model, generator))

    def stalled(self, port, tlp):
        """Whether ``port``'s TX ready was low while ``tlp`` (one of ``sent[port]``) was due
        to leave (:class:`~peach2.sim.harness.coverage.ReadyLog`)."""
        from .coverage import beats_of
        log = self.ready_logs.get(port)
        return bool(log) and log.stalled(tlp.sent_cycle, beats_of(tlp))

    def pin(self, name):
        return getattr(self.dut, f"{self.prefix}{name}")

    async def start(self):
        """Bring the links up (LTSSM L0), enumerate the host, give the chip its PCIe ID."""
        for p in self.ports:
            self.pin(f"{p}_ltssm").value = LTSSM_L0
        self.pin("n_app_msi_ack").value = 0
        self.pin("n_pcie_id").value = 0
        self.pin("n_ko_cpl_spc_vc0").value = self.cpl_space
        bars = None
        if self.host is not None:
            bars = await self.host.enumerate()
            self.pin("n_pcie_id").value = int(self.models["n"].pcie_id)
        await ClockCycles(self.dut.clk, 2)
        return bars

    def check(self):
        """Assert no model or host recorded a protocol violation."""
        for model in self.models.values():
            model.check()
        if self.host is not None:
            self.host.check()
