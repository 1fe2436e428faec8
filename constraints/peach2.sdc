# Timing constraints of the PEACH2 board project (TimeQuest SDC).
#
# `peach2 generate --platform peach2` appends this file to the SDC that Amaranth writes.  The
# part Amaranth writes before it comes from the platform (rtl/platform/board.py, chip.py):
#   create_clock -period 10.0 clk100_0__io           free-running 100 MHz board clock (assumed)
#   create_clock -period 10.0 pcie_<i>__refclk__io   PCIe reference clocks, 100 MHz (PCIe CEM);
#                                                    pcie 0..3 are the ports N, E, W, S
#   create_clock -period 4.0  core_clk               the core clock, 250 MHz (see below)
# Sources: PEACH2 runs its main functions at 250 MHz, the Gen2 IP's clock (002 section 3.6);
# vendor: IP Compiler for PCI Express user guide (UG-PCI10605), chapter "Reset and Clocks", and
# the SDC its generator writes for a Stratix IV hard IP with Avalon-ST (<variant>_example_top.sdc;
# the multicycle and false paths below are the ones it lists).

# Clocks generated inside the design: the altpll that makes reconfig_clk (50 MHz) and
# fixedclk_serdes (125 MHz) from clk100, and the transceiver clocks of the four hard IPs, which the
# IP derives from its refclk.  Their uncertainty comes from the device model.
derive_pll_clocks
derive_clock_uncertainty

# Core clock.  core_clk is the N hard IP's core_clk_out (Gen2 x8, 128-bit Avalon-ST: 250 MHz),
# which drives pld_clk of all four hard IPs and the whole peach2 core.  The platform puts a
# 4.000 ns create_clock on that net (above), so the core is checked against 250 MHz even if the
# derived clock of the hard IP's clock divider has another name in a given Quartus version.

# The free-running clocks and the core clock are unrelated; the only signals that cross are
# resets and the PLL lock, which the hard IP's reset logic and the reset synchronisers resample.
set_clock_groups -asynchronous \
    -group [get_clocks {clk100_0__io *reconfig_pll*}] \
    -group [get_clocks {core_clk}]

# tl_cfg_* configuration bus (vendor generator, "Constraints for tl_cfg outputs - only needed
# with HIP for C4GX/A2GX/S4GX and Avalon-ST").  The hard IP changes tl_cfg_ctl/tl_cfg_add and
# then toggles tl_cfg_ctl_wr; the application samples tl_cfg_ctl only after the toggle has passed
# two more registers (peach2.platform.hardip.ConfigSampler does exactly what the vendor's
# altpcierd_tl_cfg_sample does), so tl_cfg_ctl has 3 cycles to settle and tl_cfg_ctl_wr 2.
# These multicycles are valid only with that sampling logic.  tl_cfg_add keeps the default
# single-cycle check (the vendor lists none for it: stricter, so safe); tl_cfg_sts is not used.
set_multicycle_path -end -setup -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl_wr}] 2
set_multicycle_path -end -hold  -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl_wr}] 1
set_multicycle_path -end -setup -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl[*]}] 3
set_multicycle_path -end -hold  -from [get_keepers {*_core:wrapper|altpcie_hip_pipen1b:altpcie_hip_pipen1b_inst|tl_cfg_ctl[*]}] 2

# SERDES digital reset inputs are asynchronous (vendor generator, Stratix IV hard IP, non-SOPC).
set_false_path -to [get_keepers {*_serdes:serdes|*|tx_digitalreset_reg0c[0]}]
set_false_path -to [get_keepers {*_serdes:serdes|*|rx_digitalreset_reg0c[0]}]

# Asynchronous resets: PERST# of the endpoint ports and the board reset are resampled by the
# hard IPs' reset logic (<variant>_plus) and the reset synchroniser; PERST# that a root port
# drives to its cable is static for milliseconds (PCIe CEM: at least 100 ms).
set_false_path -from [get_ports {pcie_*__perst__io rst_0__io}]
set_false_path -to [get_ports {pcie_*__perst__io}]
