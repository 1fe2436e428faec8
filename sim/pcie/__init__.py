"""PCIe models around the chip: the host (cocotbext-pcie root complex), the GPU, the InfiniBand
HCA, timed Gen2 x8 links, throughput measurement and the latency calibration.
"""

from .calibration import CYCLE_NS, HARDIP_PIPELINE_NS, PER_HOP_NS, PIO_NEIGHBOUR_NS, pipeline_cycles
from .gpu import (
    GPU_READ_BANDWIDTH,
    GPU_READ_LATENCY_NS,
    GpuFunction,
    GpuModel,
    attach_gpu,
    place_gpu,
)
from .hca import (
    CONNECTX3_DEVICE,
    INFINIBAND_CLASS,
    MELLANOX_VENDOR,
    HcaFunction,
    HcaModel,
    attach_hca,
    enable_hca,
)
from .host import COMPLETION_FAULTS, Host, HostRootComplex, completion_plan, size_code, store_tlps
from .link import Link, LinkPartner, connect, terminate
from .throughput import GEN2_X8_RATE, ThroughputMeter, ThroughputReport, writes_only

__all__ = ["PIO_NEIGHBOUR_NS", "PER_HOP_NS", "HARDIP_PIPELINE_NS", "CYCLE_NS", "pipeline_cycles",
           "GpuModel", "GpuFunction", "attach_gpu", "place_gpu", "GPU_READ_BANDWIDTH",
           "GPU_READ_LATENCY_NS", "HcaModel", "HcaFunction", "attach_hca", "enable_hca",
           "MELLANOX_VENDOR", "CONNECTX3_DEVICE", "INFINIBAND_CLASS", "Host", "HostRootComplex", "size_code", "completion_plan",
           "COMPLETION_FAULTS", "store_tlps", "Link", "LinkPartner", "connect", "terminate",
           "ThroughputMeter", "ThroughputReport", "writes_only", "GEN2_X8_RATE"]
