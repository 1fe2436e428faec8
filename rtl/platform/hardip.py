"""Stratix IV GX hard IP for PCI Express as Amaranth ``Instance``s, and their helpers.

The variants are made by the vendor's generator (IP Compiler for PCI Express, MegaWizard) with
the settings in ``constraints/hardip_variants.md``; this module instantiates their ``_plus``
level, which holds the hard IP, its reset controller (``<variant>_rs_hip``) and the transceiver
reconfiguration block for offset cancellation.  Port names and widths are those of that level
(IP Compiler for PCI Express user guide UG-PCI10605, chapter "Signals", and its Avalon-ST
128-bit interface; the vendor's Stratix IV Gen2 x8 128-bit chaining-DMA example top level).
"""

from amaranth.hdl import Cat, Const, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["VARIANTS", "KO_CPL_SPC_VC0", "TEST_IN", "ConfigSampler", "HardIP", "ReconfigPLL"]

#: Variation names to give the vendor generator, by role (core's ``port_roles``: "ep", "rc").
VARIANTS = {"ep": "peach2_hip_ep", "rc": "peach2_hip_rp"}

#: Completion buffer space of the variant, as ``ko_cpl_spc_vc0`` would report it: header
#: credits in [7:0], data credits (16 bytes each) in [19:8].  The Stratix IV ``_plus`` level has
#: no such port; the vendor's Gen2 x8 128-bit example ties the same constants (112 headers,
#: 448 data credits = 7 KiB), which the completion-buffer setting in hardip_variants.md gives.
KO_CPL_SPC_VC0 = 112 | (448 << 8)

#: ``test_in`` in hardware: bit 5 disables the Polling.Compliance state, bit 7 entry into low
#: power link states (the vendor testbench's comments); bit 0 (fast simulation counters) and
#: bit 3 (forced receiver detection, a simulation work-around) stay 0.
TEST_IN = (1 << 5) | (1 << 7)

#: ``tl_cfg_add`` index whose ``tl_cfg_ctl[12:0]`` holds the bus number [12:5] and device number
#: [4:0] the host assigned (UG-PCI10605 table "Multiplexed configuration register information
#: available on tl_cfg_ctl"; vendor's altpcierd_tl_cfg_sample.v: ``cfg_busdev``).
TL_CFG_BUSDEV = 0xF


class ConfigSampler(wiring.Component):
    """Take the endpoint's bus and device number from the time-multiplexed ``tl_cfg_*`` bus.

    The hard IP presents one configuration register at a time: ``tl_cfg_add`` names it,
    ``tl_cfg_ctl`` holds it, and ``tl_cfg_ctl_wr`` toggles when they change.  As in the vendor's
    ``altpcierd_tl_cfg_sample``, the toggle passes three registers and the value is taken when
    the second and third differ, so ``tl_cfg_ctl`` has settled for three cycles and
    ``tl_cfg_ctl_wr`` for two; ``constraints/peach2.sdc`` states these multicycle paths.

    Members
    -------
    tl_cfg_add : In(4) ; tl_cfg_ctl : In(32) ; tl_cfg_ctl_wr : In(1)
        From the hard IP, in the core clock domain (``pld_clk`` = ``core_clk_out``).
    busdev : Out(13)
        Bus number [12:5] and device number [4:0]; 0 until the host configures the device.
    pcie_id : Out(16)
        Requester/completer ID: bus, device, function 0 (the hard IP has one function).
    """

    tl_cfg_add: In(4)
    tl_cfg_ctl: In(32)
    tl_cfg_ctl_wr: In(1)
    busdev: Out(13)
    pcie_id: Out(16)

    def elaborate(self, platform):
        m = Module()
        toggle = Signal(3)              # _r, _rr, _rrr of the vendor's sampler
        m.d.sync += toggle.eq(Cat(self.tl_cfg_ctl_wr, toggle[:2]))
        with m.If((toggle[1] != toggle[2]) & (self.tl_cfg_add == TL_CFG_BUSDEV)):
            m.d.sync += self.busdev.eq(self.tl_cfg_ctl[:13])
        m.d.comb += self.pcie_id.eq(Cat(Const(0, 3), self.busdev))
        return m


class ReconfigPLL(wiring.Component):
    """The hard IPs' free-running clocks from the board's 100 MHz clock (an ``altpll``).

    The Stratix IV hard IP needs ``reconfig_clk`` for its transceiver reconfiguration block
    (offset cancellation; the vendor uses 50 MHz) and ``fixedclk_serdes`` at 125 MHz; the
    vendor's example makes both with a PLL (``altpcierd_reconfig_clk_pll``) from a free-running
    100 MHz clock.  Parameters are those of the ``altpll`` megafunction (altpll user guide).

    Members
    -------
    clk_in : In(1)
        100 MHz.
    areset : In(1)
        PLL reset.
    reconfig_clk : Out(1)
        50 MHz.
    fixedclk_serdes : Out(1)
        125 MHz.
    locked : Out(1)
    """

    clk_in: In(1)
    areset: In(1)
    reconfig_clk: Out(1)
    fixedclk_serdes: Out(1)
    locked: Out(1)

    def elaborate(self, platform):
        m = Module()
        clk = Signal(10)
        m.submodules.pll = Instance(
            "altpll",
            p_intended_device_family="Stratix IV",
            p_lpm_type="altpll",
            p_operation_mode="NORMAL",
            p_pll_type="AUTO",
            p_inclk0_input_frequency=10000,         # ps
            p_clk0_multiply_by=1, p_clk0_divide_by=2, p_clk0_duty_cycle=50,
            p_clk0_phase_shift="0",
            p_clk1_multiply_by=5, p_clk1_divide_by=4, p_clk1_duty_cycle=50,
            p_clk1_phase_shift="0",
            p_width_clock=10,
            p_port_inclk0="PORT_USED", p_port_areset="PORT_USED", p_port_locked="PORT_USED",
            p_port_clk0="PORT_USED", p_port_clk1="PORT_USED",
            i_inclk=Cat(self.clk_in, Const(0, 1)),
            i_areset=self.areset,
            o_clk=clk,
            o_locked=self.locked,
        )
        m.d.comb += [self.reconfig_clk.eq(clk[0]), self.fixedclk_serdes.eq(clk[1])]
        return m


class HardIP(wiring.Component):
    """One Stratix IV GX hard IP for PCI Express: Gen2 x8, Avalon-ST 128-bit, endpoint or root.

    Instantiates ``<variant>_plus`` (:data:`VARIANTS`).  The application side carries the names
    of the core's pins without the port prefix and without the hard IP's ``0`` suffix
    (``rx_st_data`` is ``rx_st_data0``), so the chip top joins them by name.

    Parameters
    ----------
    role : "ep" or "rc"
        Endpoint or root port variant.
    refclk : IOValue
        The dedicated REFCLK pin of the hard IP's transceiver blocks (100 MHz).
    rx, tx : IOValue
        The eight serial lanes (positive pins).

    Members
    -------
    rx_st_*, tx_st_*, tx_cred : the Avalon-ST application interface (UG-PCI10605, "Signals").
    ltssm : Out(5)
        LTSSM state; 0x0F is L0.
    app_msi_req, app_msi_num : In ; app_msi_ack : Out
        MSI request (endpoint only; the root port never acknowledges).
    tl_cfg_add, tl_cfg_ctl, tl_cfg_ctl_wr : Out
        Configuration registers, time-multiplexed (see :class:`ConfigSampler`).
    ko_cpl_spc_vc0 : Out(20)
        Completion buffer space (:data:`KO_CPL_SPC_VC0`, a constant of the variant).
    core_clk_out : Out(1)
        250 MHz for Gen2 x8 128-bit.
    pld_clk : In(1)
        Application clock (the N hard IP's ``core_clk_out`` for all four).
    reconfig_clk, fixedclk_serdes, reconfig_clk_locked : In(1)
        From :class:`ReconfigPLL`.
    pcie_rstn, local_rstn : In(1)
        PERST# and the board's reset, both active low; the ``_plus`` level sequences the hard
        IP's resets from them.
    srstn : Out(1)
        Application reset from the variant's reset controller, active low, in ``pld_clk``.
    """

    def __init__(self, role, *, refclk, rx, tx):
        if role not in VARIANTS:
            raise ValueError(f"role must be one of {sorted(VARIANTS)}, not {role!r}")
        self.role = role
        self.variant = VARIANTS[role]
        self.refclk, self.rx, self.tx = refclk, rx, tx
        super().__init__({
            "rx_st_data":  Out(128), "rx_st_sop":  Out(1), "rx_st_eop":  Out(1),
            "rx_st_empty": Out(1), "rx_st_valid": Out(1), "rx_st_err": Out(1),
            "rx_st_bardec": Out(8), "rx_st_be": Out(16),
            "rx_st_ready": In(1), "rx_st_mask": In(1),
            "tx_st_data":  In(128), "tx_st_sop":  In(1), "tx_st_eop":  In(1),
            "tx_st_empty": In(1), "tx_st_valid": In(1), "tx_st_err": In(1),
            "tx_st_ready": Out(1), "tx_cred": Out(36),
            "ltssm": Out(5),
            "app_msi_req": In(1), "app_msi_num": In(5), "app_msi_ack": Out(1),
            "tl_cfg_add": Out(4), "tl_cfg_ctl": Out(32), "tl_cfg_ctl_wr": Out(1),
            "ko_cpl_spc_vc0": Out(20),
            "core_clk_out": Out(1), "pld_clk": In(1),
            "reconfig_clk": In(1), "fixedclk_serdes": In(1), "reconfig_clk_locked": In(1),
            "pcie_rstn": In(1), "local_rstn": In(1), "srstn": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        clk500_out = Signal()
        ports = {
            # Avalon-ST, virtual channel 0.
            **{f"o_rx_st_{n}0": getattr(self, f"rx_st_{n}")
               for n in ("data", "sop", "eop", "empty", "valid", "err", "bardec", "be")},
            "i_rx_st_ready0": self.rx_st_ready, "i_rx_st_mask0": self.rx_st_mask,
            **{f"i_tx_st_{n}0": getattr(self, f"tx_st_{n}")
               for n in ("data", "sop", "eop", "empty", "valid", "err")},
            "o_tx_st_ready0": self.tx_st_ready, "o_tx_cred0": self.tx_cred,
            # Status and configuration.
            "o_ltssm": self.ltssm,
            "o_tl_cfg_add": self.tl_cfg_add, "o_tl_cfg_ctl": self.tl_cfg_ctl,
            "o_tl_cfg_ctl_wr": self.tl_cfg_ctl_wr,
            "i_cpl_err": Const(0, 7), "i_cpl_pending": Const(0, 1),
            # Clocks and resets.
            "i_refclk": self.refclk,
            "o_core_clk_out": self.core_clk_out, "i_pld_clk": self.pld_clk,
            "o_clk500_out": clk500_out, "i_pclk_in": clk500_out,   # Gen2: pclk from clk500_out
            "i_reconfig_clk": self.reconfig_clk, "i_fixedclk_serdes": self.fixedclk_serdes,
            "i_reconfig_clk_locked": self.reconfig_clk_locked,
            "i_pcie_rstn": self.pcie_rstn, "i_local_rstn": self.local_rstn,
            "o_srstn": self.srstn,
            # Serial mode (no PIPE simulation interface), hardware test_in.
            "i_pipe_mode": Const(0, 1), "i_test_in": Const(TEST_IN, 40),
            **{f"i_rx_in{lane}": self.rx[lane] for lane in range(8)},
            **{f"o_tx_out{lane}": self.tx[lane] for lane in range(8)},
        }
        if self.role == "ep":
            ports.update({
                "i_app_msi_req": self.app_msi_req, "i_app_msi_num": self.app_msi_num,
                "o_app_msi_ack": self.app_msi_ack, "i_app_msi_tc": Const(0, 3),
                "i_app_int_sts": Const(0, 1),
            })
        m.submodules.hip = Instance(f"{self.variant}_plus", **ports)
        m.d.comb += self.ko_cpl_spc_vc0.eq(KO_CPL_SPC_VC0)
        return m
