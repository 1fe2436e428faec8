"""A sub-cluster as one HDL top: N ``peach2`` instances, the cables between them, the clock.

::

    cluster_tb (Verilog wrapper: 250 MHz clock, `always #2`)
    └── cluster (this component, Amaranth)
        ├── c0 .. c<N-1>: Instance("peach2")  one netlist, converted once per chip options
        ├── cable0 ..:    peach2.sim.hdl.cable.Cable   E/W/S ports cabled per the topology
        └── unused link ports: rx idle, tx always ready (what arrives is dropped), LTSSM 0

Only each node's N port (``c<i>_n_*``: the hard-IP pins, ``n_pcie_id``, MSI,
``n_ko_cpl_spc_vc0``) leaves the top: there a Python host model (hard IP + root complex,
:class:`peach2.sim.harness.cluster.Cluster`) talks to the chip, and it is woken only when the chip or
the host has something to send.  Everything else, clock included, runs inside the simulator,
so on Verilator the sub-cluster costs no Python per cycle.

Per chip ``i``: input ``c<i>_reset`` holds that chip alone in reset (with ``rst``, which resets
every chip) and takes its cables down meanwhile; output ``c<i>_rst_out`` is the reset the chip
sees (its N hard-IP model watches it).  Each cabled port's ``<p>_ltssm`` is L0 while its cable's
``linked`` output is 1, else 0 (as the hard IP's LTSSM leaves L0 when the link is lost).

Per cable ``j`` (the order of :func:`peach2.routes.cable_plan`): input
``cable<j>_down`` takes the link down (0 = up, so an undriven input leaves it up); outputs
``cable<j>_a2b_tlps`` / ``_b2a_tlps`` / ``_a2b_stall`` / ``_b2a_stall`` / ``_a2b_bytes`` /
``_b2a_bytes`` count TLPs, credit stalls and payload bytes per direction (``a`` is the plan's
first node).

The ``peach2`` module is converted once per chip options (the runner's netlist cache) and
compiled by Verilator once for all instances and all tops (a library, or with waves a
hierarchical block of the top).
"""

from pathlib import Path

from amaranth.hdl import ClockSignal, Instance, Module, Mux, ResetSignal, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from peach2.router.linkstate import LTSSM_L0
from peach2.sim.run import SIM_BUILD, module_sources
from peach2.top import PEACH2

from .cable import Cable

__all__ = ["ClusterTop", "N_PINS"]

#: Chip pins of the N port that the top brings out per node (``c<i>_<pin>``).
N_PINS = ("n_rx_st_data", "n_rx_st_sop", "n_rx_st_eop", "n_rx_st_empty", "n_rx_st_valid",
          "n_rx_st_err", "n_rx_st_bardec", "n_rx_st_be", "n_rx_st_ready", "n_rx_st_mask",
          "n_tx_st_data", "n_tx_st_sop", "n_tx_st_eop", "n_tx_st_empty", "n_tx_st_valid",
          "n_tx_st_err", "n_tx_st_ready", "n_ltssm", "n_pcie_id", "n_app_msi_req",
          "n_app_msi_num", "n_app_msi_ack", "n_ko_cpl_spc_vc0")

_STATS = ("a2b_tlps", "b2a_tlps", "a2b_stall", "b2a_stall", "a2b_bytes", "b2a_bytes")


class ClusterTop(wiring.Component):
    """``len(plan)`` cables between ``n_nodes`` PEACH2 chips, N ports brought out.

    Parameters
    ----------
    n_nodes : int
    plan : list of (int, str, int, str)
        Cables ``(a, port_a, b, port_b)`` (ports ``"E"``, ``"W"``, ``"S"``), e.g.
        :func:`~peach2.sim.harness.cluster.cable_plan` of a topology.
    chip : dict
        Options of every :class:`~peach2.top.PEACH2` (``n_routes``, ``buffer_beats``, ...).
    cable : dict
        Options of every :class:`~peach2.sim.hdl.cable.Cable` (``latency``, ``rx_credits``, ...).
    threads : int
        Verilator ``--threads`` of the build (default 1).  More threads speed up a busy
        16-chip top on an otherwise idle machine (828 against 637 cycles/s with 2 on 2 cores),
        but Verilator's workers wait by spinning: with more runnable threads than free cores
        (e.g. under ``pytest -n auto``) the same top fell to 28 cycles/s.  Tests keep 1.

    Members
    -------
    c<i>_<pin> : chip ``i``'s N-port pins (:data:`N_PINS`), same direction as on the chip.
    c<i>_reset : In(1) ; c<i>_rst_out : Out(1)
        Reset of chip ``i`` alone (its cables down meanwhile); the reset chip ``i`` sees.
    cable<j>_down : In(1)
    cable<j>_a2b_tlps, cable<j>_b2a_tlps, cable<j>_a2b_stall, cable<j>_b2a_stall : Out(32)
    cable<j>_a2b_bytes, cable<j>_b2a_bytes : Out(32)
        Payload bytes of the TLPs each direction put on the wire (wrapping).
    """

    def __init__(self, n_nodes, plan, *, chip=None, cable=None, threads=1):
        if n_nodes < 1:
            raise ValueError(f"a cluster needs at least one node, not {n_nodes}")
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, not {threads!r}")
        self.threads = threads
        #: Where :meth:`extra_sources` keeps the Verilator libraries of the chip and cable.
        self.library_root = SIM_BUILD / "_verilator"
        seen = set()
        for a, pa, b, pb in plan:
            for node, port in ((a, pa), (b, pb)):
                if not 0 <= node < n_nodes or port not in ("E", "W", "S"):
                    raise ValueError(f"cable end {node}.{port} is not a link port of a node "
                                     f"in 0..{n_nodes - 1}")
                if (node, port) in seen:
                    raise ValueError(f"port {node}.{port} has two cables")
                seen.add((node, port))
        self.n_nodes, self.plan = n_nodes, list(plan)
        self.chip_options, self.cable_options = dict(chip or {}), dict(cable or {})
        self._chip = PEACH2(**self.chip_options)
        self._cable = Cable(**self.cable_options)
        self.chip_key = self._chip.design_key
        #: Netlist cache key (``peach2.sim.run.runner``): topology, chip and cable options.
        self.design_key = (f"ClusterTop({n_nodes}, {self.plan}, {self.chip_key}, "
                           f"{sorted(self.cable_options.items())}"
                           + (f", threads={threads})" if threads > 1 else ")"))
        #: Module the simulator runs (the clock wrapper around this one).
        self.sim_toplevel = "cluster_tb"
        chip_members = self._chip.signature.members
        members = {}
        for i in range(n_nodes):
            for pin in N_PINS:
                members[f"c{i}_{pin}"] = chip_members[pin]
            members[f"c{i}_reset"] = In(1)
            members[f"c{i}_rst_out"] = Out(1)
        for j in range(len(self.plan)):
            members[f"cable{j}_down"] = In(1)
            for stat in _STATS:
                members[f"cable{j}_{stat}"] = Out(32)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        chip_members = self._chip.signature.members
        nets = [{} for _ in range(self.n_nodes)]   # per chip: pin -> signal
        for i in range(self.n_nodes):
            for pin, member in chip_members.items():
                nets[i][pin] = (getattr(self, f"c{i}_{pin}") if pin in N_PINS
                                else wiring.Signature({"x": member}).create().x)
        cabled = set()
        for j, (a, pa, b, pb) in enumerate(self.plan):
            # One Verilog module for every cable (compiled once), so instantiated, not inlined.
            cab = self._cable.signature.create()
            ports = {f"{'i' if member.flow == In else 'o'}_{name}": getattr(cab, name)
                     for name, member in self._cable.signature.members.items()}
            m.submodules[f"cable{j}"] = Instance("peach2_cable", i_clk=ClockSignal("sync"),
                                                 i_rst=ResetSignal("sync"), **ports)
            m.d.comb += cab.up.eq(~getattr(self, f"cable{j}_down") & ~getattr(self, f"c{a}_reset")
                                  & ~getattr(self, f"c{b}_reset"))
            for stat in _STATS:
                m.d.comb += getattr(self, f"cable{j}_{stat}").eq(getattr(cab, stat))
            for side, node, port in (("a", a, pa), ("b", b, pb)):
                p = port.lower()
                cabled.add((node, p))
                for pin in chip_members:
                    if not pin.startswith(f"{p}_") or pin == f"{p}_ltssm":
                        continue
                    end = getattr(cab, f"{side}_{pin[2:]}")
                    if self._cable.signature.members[f"{side}_{pin[2:]}"].flow == In:
                        m.d.comb += end.eq(nets[node][pin])
                    else:
                        m.d.comb += nets[node][pin].eq(end)
                m.d.comb += nets[node][f"{p}_ltssm"].eq(Mux(cab.linked, LTSSM_L0, 0))
        for i in range(self.n_nodes):
            for p in ("e", "w", "s"):
                if (i, p) not in cabled:       # no cable: idle RX, TX sinks, link down
                    m.d.comb += nets[i][f"{p}_tx_st_ready"].eq(1)
            ports = {}
            for pin, member in chip_members.items():
                kind = "i" if member.flow == In else "o"
                ports[f"{kind}_{pin}"] = nets[i][pin]
            rst = getattr(self, f"c{i}_rst_out")
            m.d.comb += rst.eq(ResetSignal("sync") | getattr(self, f"c{i}_reset"))
            m.submodules[f"c{i}"] = Instance("peach2", i_clk=ClockSignal("sync"), i_rst=rst,
                                             **ports)
        return m

    # -- simulation build ------------------------------------------------------------------------

    def extra_sources(self, build_dir, simulator, waves=False):
        """Write the chip netlist and the clock wrapper into ``build_dir``; return the sources.

        On Verilator without waves the chip and the cable are libraries compiled once for
        every top that uses them (:func:`peach2.sim.run.verilator.build_library`): the
        sources are their wrappers and archives.  With waves they are compiled into the top
        as hierarchical blocks, so the trace reaches inside them.
        """
        build_dir = Path(build_dir)
        blocks = [(self._chip, "peach2")]
        if self.plan:
            blocks.append((self._cable, "peach2_cable"))
        else:
            self._cable._MustUse__silence = True
        sources, hier = [], []
        for design, module in blocks:
            made, compiled_in = module_sources(design, module, build_dir, simulator,
                                               waves=waves, root=self.library_root)
            sources += made
            if compiled_in:
                hier.append(f'hier_block -module "{module}"\n')
        wrapper = build_dir / "cluster_tb.v"
        text = self._wrapper_text()
        if not wrapper.exists() or wrapper.read_text() != text:
            wrapper.write_text(text)
        sources.append(wrapper)
        if simulator == "verilator" and hier:
            vlt = build_dir / "hier.vlt"
            vlt.write_text("`verilator_config\n" + "".join(hier))
            sources.append(vlt)
        return sources

    @property
    def verilator_args(self):
        """Verilator arguments the top needs: the wrapper's clock is a delay (``--timing``),
        blocks not given as libraries are compiled once for every instance
        (``--hierarchical``), ``--threads``, and the C++ optimised with ``-O2`` instead of
        ``verilated.mk``'s ``-Os``: on a 4-chip ring it took 24% less CPU per idle cycle and
        16% less under all-to-all traffic."""
        threads = ("--threads", str(self.threads)) if self.threads > 1 else ()
        return ("--timing", "--hierarchical", *threads, "-CFLAGS", "-O2")

    def _wrapper_text(self):
        decls, conns = [], []
        for name, member in self.signature.members.items():
            width = Shape.cast(member.shape).width
            rng = f"[{width - 1}:0] " if width > 1 else ""
            decls.append(f"    {'input' if member.flow == In else 'output'} wire {rng}{name}")
            conns.append(f"        .{name}({name})")
        return ("`timescale 1ns/1ps\n"
                "// Simulation-only clock wrapper of the generated `cluster` top: 250 MHz inside.\n"
                "module cluster_tb (\n    input wire rst,\n" + ",\n".join(decls) + "\n);\n"
                "    reg clk = 1'b0;\n"
                "    always #2 clk = ~clk;\n"
                "    cluster u (\n        .clk(clk),\n        .rst(rst),\n"
                + ",\n".join(conns) + "\n    );\nendmodule\n")

