# Timing constraints of the PEACH2 board project (TimeQuest SDC).
#
# `peach2 generate --platform peach2` appends this file to the SDC that Amaranth writes.  That
# part holds only the clocks that enter the FPGA at pins (the platform's Clock resources,
# rtl/platform/board.py), each on its port:
#   create_clock -period 10.0 [get_ports clk100_0__io]          free-running 100 MHz (assumed)
#   create_clock -period 10.0 [get_ports pcie_<i>__refclk__io]  PCIe reference clocks, 100 MHz
#                                                               (PCIe CEM); i = 0..3: N, E, W, S
# Every other clock is made inside the FPGA and derived below, as the vendor's example designs
# do: the SDC the IP Compiler for PCI Express writes for a Stratix IV / Cyclone IV hard IP
# constrains refclk at its pin and leaves the hard IP's clocks to derive_pll_clocks
# (UG-PCI10605, "Reset and Clocks"; Quartus TimeQuest's recommended initial SDC: base clocks at
# ports, then derive_pll_clocks, derive_clock_uncertainty, set_clock_groups).
# Sources: PEACH2 runs its main functions at 250 MHz, the Gen2 IP's clock (002 section 3.6).

# Clocks generated inside the design, named by Quartus after the node that makes them, that is
# under the instance that holds it:
#   reconfig_pll|...  the altpll making reconfig_clk (50 MHz) and fixedclk_serdes (125 MHz)
#                     from clk100 for all four hard IPs;
#   hip_<p>|...       each hard IP's transceiver clocks, from its own refclk, among them its
#                     core_clk_out: 250 MHz for Gen2 x8 with the 128-bit Avalon-ST interface.
# hip_n's core_clk_out is the core clock: it drives pld_clk of all four hard IPs and the whole
# peach2 core (rtl/platform/chip.py).  Its period comes from the hard IP's configuration, so the
# core is checked against 250 MHz without a clock of its own on the net.
derive_pll_clocks
derive_clock_uncertainty

# Clock domains.  Five unrelated sources: the board's free-running clock and the four
# reference clocks (N's from the host slot, E's over its cable from the neighbour, W's from this
# board, S's from this board or, as an endpoint, over its cable).  Each
# group is a source with every clock derived from it:
#   - free-running: reconfig_clk and fixedclk_serdes; they cross into the hard IPs only inside
#     the vendor's <variant>_plus (offset cancellation, reset sequencing), which resamples them;
#   - N: the core clock; everything the core exchanges with the four hard IPs (Avalon-ST,
#     tx_cred, tl_cfg, MSI, srstn) is clocked by pld_clk, that is by this clock;
#   - E, W, S: their hard IPs' own clocks; the hard IP crosses from pld_clk to them inside; the
#     core reads only their LTSSM state, through a two-register synchroniser (<p>_ltssm_sync,
#     altera_std_synchronizer_bundle, whose own SDC statement cuts its first stage).
set_clock_groups -asynchronous \
    -group [get_clocks {clk100_0__io reconfig_pll|*}] \
    -group [get_clocks {pcie_0__refclk__io hip_n|*}] \
    -group [get_clocks {pcie_1__refclk__io hip_e|*}] \
    -group [get_clocks {pcie_2__refclk__io hip_w|*}] \
    -group [get_clocks {pcie_3__refclk__io hip_s|*}]

# tl_cfg_* configuration bus (vendor generator, "Constraints for tl_cfg outputs - only needed
# with HIP for C4GX/A2GX/S4GX and Avalon-ST").  The hard IP changes tl_cfg_ctl/tl_cfg_add and
# then toggles tl_cfg_ctl_wr; the application samples tl_cfg_ctl only after the toggle has passed
# two more registers (peach2.platform.hardip.ConfigSampler does exactly what the vendor's
# altpcierd_tl_cfg_sample does), so tl_cfg_ctl has 3 cycles to settle and tl_cfg_ctl_wr 2.
# These multicycles are valid only with that sampling logic.  tl_cfg_add keeps the default
# single-cycle check (the vendor lists none for it: stricter, so safe); tl_cfg_sts is not used.
# The names inside the hard IP are the vendor's (<variant>_core, altpcie_hip_pipen1b).
set_multicycle_path -end -setup -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl_wr}] 2
set_multicycle_path -end -hold  -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl_wr}] 1
set_multicycle_path -end -setup -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl[*]}] 3
set_multicycle_path -end -hold  -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl[*]}] 2

# SERDES digital reset inputs are asynchronous (vendor generator, Stratix IV hard IP, non-SOPC;
# <variant>_serdes is the variant's transceiver instance).
set_false_path -to [get_keepers {*_serdes:serdes|*|tx_digitalreset_reg0c[0]}]
set_false_path -to [get_keepers {*_serdes:serdes|*|rx_digitalreset_reg0c[0]}]

# Asynchronous reset inputs: PERST# of the endpoint ports and the board reset (rst_n) are
# resampled by the hard IPs' reset logic (<variant>_plus), the PLL's areset and the reset
# synchroniser; PERST# that a root port drives to its cable is static for milliseconds (PCIe
# CEM: at least 100 ms), so no path to it is timed either.
set_false_path -from [get_ports {pcie_*__perst__io rst_0__io}]
set_false_path -to [get_ports {pcie_*__perst__io}]
