"""The PEACH2 chip on its board: four hard IPs around the ``peach2`` core (002 Figure 2).

Clocking (IP Compiler for PCI Express user guide, "Reset and Clocks"; 002 section 3.6): the
N hard IP's ``core_clk_out`` (250 MHz for Gen2 x8, 128-bit Avalon-ST) drives ``pld_clk`` of all
four hard IPs and the core's clock domain ``sync``, one 250 MHz domain as in the paper.  The
vendor's later hard IPs allow ``pld_clk`` from another source than the hard IP's own
``core_clk_out`` if it is at least as fast (Stratix V Avalon-ST user guide, ``pld_clk``); E, W
and S derive their ``core_clk_out`` from their own reference clocks, so that holds when all
reference clocks share one source, and is an open point otherwise (``docs/synthesis.md``).

Clock crossings: of E, W and S, whose hard IPs run from their own reference clocks, the core
reads the LTSSM state through two registers (``<p>_ltssm_sync``).  Everything else the
core exchanges with E, W and S is clocked by ``pld_clk``, the core clock; the hard IPs cross to
their own clocks inside.  ``constraints/peach2.sdc`` declares the clock groups.

Resets, simplified: the core has one reset, the N hard IP's application reset ``srstn``
(synchronised into ``sync``); a link reset of E, W or S while N is up does not reset the core's
blocks of that port.  Root ports drive PERST# to their cable from the host's PERST# and the
board reset.  ``docs/synthesis.md`` lists these simplifications.
"""

from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer

from ..top import PEACH2
from .hardip import ConfigSampler, HardIP, ReconfigPLL

__all__ = ["Chip"]

#: Hard-IP resource number of each port on the board (``pcie`` 0..3).
PORT_INDEX = {"n": 0, "e": 1, "w": 2, "s": 3}


class Chip(wiring.Component):
    """Top level for :class:`~peach2.platform.board.PEACH2Platform`: no ports of its own.

    Parameters
    ----------
    **design : keyword arguments of :class:`~peach2.top.PEACH2` (``n_routes``,
        ``buffer_beats``, ``s_role``, ``tx_start_level``, ``tx_depth``).

    Attributes
    ----------
    core : PEACH2
        The router core, clocked by ``core_clk``.
    """

    def __init__(self, **design):
        self.core = PEACH2(**design)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        core = self.core
        m.submodules.core = core
        m.domains.sync = cd_sync = ClockDomain("sync")

        m.submodules.clk100 = clk100 = io.Buffer("i", platform.request("clk100", 0, dir="-"))
        m.submodules.board_rst = board_rst = io.Buffer("i", platform.request("rst", 0, dir="-"))
        m.submodules.reconfig_pll = pll = ReconfigPLL()
        m.d.comb += [pll.clk_in.eq(clk100.i), pll.areset.eq(board_rst.i)]

        # No clock constraint here: the SDC constrains the reference clocks at their pins and
        # derives core_clk_out from them (derive_pll_clocks), as the vendor's flow does.
        core_clk = Signal()
        hips, perst = {}, {}
        for port, role in core.port_roles.items():
            pins = platform.request("pcie", PORT_INDEX[port], dir="-")
            hip = HardIP(role, refclk=pins.refclk.io, rx=pins.rx.io, tx=pins.tx.io)
            m.submodules[f"hip_{port}"] = hips[port] = hip
            m.submodules[f"perst_{port}"] = perst[port] = io.Buffer(
                "i" if role == "ep" else "o", pins.perst)
            m.d.comb += [
                hip.pld_clk.eq(core_clk),
                hip.reconfig_clk.eq(pll.reconfig_clk),
                hip.fixedclk_serdes.eq(pll.fixedclk_serdes),
                hip.reconfig_clk_locked.eq(pll.locked),
                hip.local_rstn.eq(~board_rst.i),
            ]

        # PERST#: endpoints take theirs from the slot or cable; a root port resets its cable
        # while the host resets this board.
        host_reset = perst["n"].i
        for port, role in core.port_roles.items():
            if role == "ep":
                m.d.comb += hips[port].pcie_rstn.eq(~perst[port].i)
            else:
                m.d.comb += [hips[port].pcie_rstn.eq(~host_reset),
                             perst[port].o.eq(host_reset | board_rst.i)]

        m.d.comb += [core_clk.eq(hips["n"].core_clk_out), cd_sync.clk.eq(core_clk)]
        m.submodules.reset_sync = ResetSynchronizer(~hips["n"].srstn, domain="sync")

        m.submodules.cfg = cfg = ConfigSampler()
        m.d.comb += [cfg.tl_cfg_add.eq(hips["n"].tl_cfg_add),
                     cfg.tl_cfg_ctl.eq(hips["n"].tl_cfg_ctl),
                     cfg.tl_cfg_ctl_wr.eq(hips["n"].tl_cfg_ctl_wr)]
        self._connect_core(m, core, hips, cfg)
        return m

    @staticmethod
    def _connect_core(m, core, hips, cfg):
        """Join every core pin ``<p>_<name>`` to the same-named member of hard IP ``p``."""
        special = {"n_pcie_id": cfg.pcie_id}
        for name, member in core.signature.members.items():
            pin = getattr(core, name)
            if name in special:
                m.d.comb += pin.eq(special[name])
                continue
            port, _, hip_name = name.partition("_")
            hip = hips.get(port)
            if hip is None or hip_name not in hip.signature.members:
                raise NameError(f"core pin {name!r} has no hard-IP signal to connect to")
            if hip_name == "ltssm" and port != "n":
                # The LTSSM state is a status output of this port's link layer, which runs
                # from the hard IP's own refclk, so it may change in a clock other than the
                # core's: resampled in two registers (a status value; a transient mix of two
                # states while it changes is harmless).  The SDC declares the clocks
                # asynchronous.
                m.submodules[f"{port}_ltssm_sync"] = FFSynchronizer(
                    getattr(hip, hip_name), pin, o_domain="sync")
            elif member.flow == wiring.In:
                m.d.comb += pin.eq(getattr(hip, hip_name))
            else:
                m.d.comb += getattr(hip, hip_name).eq(pin)
