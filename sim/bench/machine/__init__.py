"""Benchmarks of the HA-PACS/TCA machine: the synchronisation engine alone (:mod:`.sync`) and
the machine with its cocotb sub-clusters (:mod:`.speed`), one process against MPI ranks."""
