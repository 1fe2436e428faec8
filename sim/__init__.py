"""The simulation platform, one sub-package per concern; each imports only those above it:

- :mod:`.run`: runner glue (Icarus, Verilator), the cocotb environment, ticker, probes;
- :mod:`.reference`: pure-Python reference models (stream, router, DMA, registers, scoreboard);
- :mod:`.hardip`: the Stratix IV hard IP's application interface and PCIe function;
- :mod:`.pcie`: host, GPU, timed links, throughput, calibration;
- :mod:`.hdl`: HDL test tops and cables;
- :mod:`.driver`: the host driver model and DMA chains;
- :mod:`.harness`: chips, sub-clusters, faults, soak and block harnesses;
- :mod:`.collectives`: Broadcast, Allgather, halo exchange over the driver;
- :mod:`.infiniband`, :mod:`.node`, :mod:`.mpi`, :mod:`.machine`: the InfiniBand fabric and
  HCA, the two-socket node, MPI over InfiniBand, and the machine of several sub-clusters;
- :mod:`.bench`: the benchmarks' plans, results and document (nothing imports it).

Route tables and address maps are host software, not simulation: :mod:`peach2.routes`.
"""
