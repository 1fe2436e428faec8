"""Parameters of one HA-PACS/TCA node as a timing model, each with its source.

Sources, cited by short name below:

- **000**: Odajima et al., "TCA/InfiniBand hybrid communication in XcalableACC": section 2.1 and
  Figure 1 (two Xeon E5-2680 v2 sockets; CPU0 holds the PEACH2 board and GPU0/GPU1, CPU1 the
  InfiniBand HCA and GPU2/GPU3), Table 1 (K20X with 6 GB of GDDR5, 128 GB of DDR3 per node,
  ConnectX-3 on PCIe Gen3 x8), sections 2.4 and 4 (peer-to-peer across QPI collapses: the
  MV2GDR-QPI ping-pong reaches at most about 290 MB/s up to 256 KB; host memory across QPI
  costs only a little).
- **002**: Hanawa et al., "TCA architecture and the PEACH2 chip": section 4.1.2 (a device reading
  K20 memory over PCIe reaches about 870 MB/s on Sandy Bridge; writes run as fast as to host
  memory), the 3.66 GB/s bound of a Gen2 x8 port.
- **GTC 2014 / GTC 2015**: the HA-PACS/TCA measurements the TCA team presented at NVIDIA's GPU
  Technology Conference: PEACH2 GPU-to-GPU DMA peaks at 2.8 GB/s on Ivy Bridge (a device
  reading GPU memory on its own socket), DMA to a GPU across QPI about 300 MB/s.
- **PCIe**: PCI Express base specification: Gen2 5 GT/s with 8b/10b, Gen3 8 GT/s with
  128b/130b; a 256-byte write payload costs 24 more bytes on the link (header, sequence number,
  LCRC, framing, and its share of acknowledgements).
- **001**: Kuwahara et al., GMPI: a CUDA kernel launch costs 3.2 us, 11 us with
  synchronisation (section 4.2, Table 2): the scale of CUDA driver overheads on this generation.

Values marked *assumed* have no primary source here; ``copy_launch_ps`` is *fitted* by the
calibration (``python -m peach2.sim.mpi.pingpong``) so that an 8-byte MPI message staged
through host memory takes 17 us GPU to GPU (GTC 2014).
"""

import math
from dataclasses import dataclass

__all__ = ["NodeParams"]

_GIB = 1 << 30


@dataclass(frozen=True)
class NodeParams:
    """Topology, memories, PCIe paths and copy engines of one node; time in picoseconds.

    Rates are data bytes per second, latencies integer picoseconds.  Construction checks every
    field and raises ``ValueError`` naming the field for nonsense.
    """

    # -- topology (000 section 2.1, Figure 1) -------------------------------------------------
    sockets: int = 2                        # 000 Table 1: Xeon E5-2680 v2 x 2 sockets
    gpu_sockets: tuple = (0, 0, 1, 1)       # 000 Figure 1: GPU0/1 on CPU0, GPU2/3 on CPU1
    hca_socket: int = 1                     # 000 Figure 1: the InfiniBand HCA on CPU1
    peach2_socket: int = 0                  # 000 Figure 1: the PEACH2 board on CPU0

    # -- memories (000 Table 1) ----------------------------------------------------------------
    host_bytes: int = 64 * _GIB             # 000 Table 1: 128 GB DDR3 per node, half per socket
    gpu_bytes: int = 6 * _GIB               # 000 Table 1: GDDR5 6 GB per K20X

    # -- device links --------------------------------------------------------------------------
    hca_pcie_bytes_per_s: float = 7.2e9     # PCIe Gen3 x8 (000 sec. 4): 7.88 GB/s x 256/280
    peach2_pcie_bytes_per_s: float = 3.66e9  # 002: Gen2 x8, 4 GB/s x 256/280 bound
    gpu_pcie_bytes_per_s: float = 7.31e9    # K20X on PCIe Gen2 x16: 8 GB/s x 256/280

    # -- host memory behind the root complex ---------------------------------------------------
    host_read_latency_ps: int = 500_000     # assumed: device read round trip to DRAM
    host_write_latency_ps: int = 200_000    # assumed: posted write visible in DRAM
    qpi_host_latency_ps: int = 100_000      # assumed; 000 sec. 4: host memory across QPI
    #                                         costs "only a slight degradation", no rate cap

    # -- GPU memory by GPUDirect RDMA (peer-to-peer through the socket's root complex) ---------
    gpu_read_bytes_per_s: float = 2.8e9     # GTC 2015: PEACH2 GPU-to-GPU peak on Ivy Bridge
    #                                         (002: ~870 MB/s on Sandy Bridge): BAR reads
    gpu_read_latency_ps: int = 1_000_000    # assumed: a read of GPU memory through its BAR
    gpu_write_latency_ps: int = 200_000     # assumed: as a host write (002: GPU writes run
    #                                         at the rate of host writes)

    # -- peer-to-peer across QPI (000 sections 2.4 and 4) --------------------------------------
    qpi_p2p_bytes_per_s: float = 290e6      # 000 sec. 4: MV2GDR-QPI at most ~290 MB/s up to
    #                                         256 KB; GTC 2015: DMA to a GPU across QPI ~300 MB/s
    qpi_p2p_latency_ps: int = 300_000       # assumed: the extra hop through both sockets

    # -- GPU copy engines (cudaMemcpy between device and pinned host memory) -------------------
    copy_bytes_per_s: float = 6.0e9         # assumed: 82% of the 7.31 GB/s Gen2 x16 bound,
    #                                         the usual pinned cudaMemcpy rate of Kepler boards
    copy_launch_ps: int = 7_800_000         # fitted: 8-byte MPI staged through host = 17 us
    #                                         (GTC 2014); between 001's 3.2 us launch and 11 us
    #                                         launch + synchronisation

    # -- host CPU ------------------------------------------------------------------------------
    memcpy_bytes_per_s: float = 5.0e9       # assumed: one Ivy Bridge core copying DRAM to DRAM
    memcpy_ps: int = 50_000                 # assumed: call overhead of a small memcpy

    def __post_init__(self):
        for name in ("sockets", "hca_socket", "peach2_socket", "host_bytes", "gpu_bytes",
                     "host_read_latency_ps", "host_write_latency_ps", "qpi_host_latency_ps",
                     "gpu_read_latency_ps", "gpu_write_latency_ps", "qpi_p2p_latency_ps",
                     "copy_launch_ps", "memcpy_ps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"NodeParams.{name} must be an integer, not {value!r}")
            if value < 0:
                raise ValueError(f"NodeParams.{name} must not be negative ({value})")
        for name in ("hca_pcie_bytes_per_s", "peach2_pcie_bytes_per_s", "gpu_pcie_bytes_per_s",
                     "gpu_read_bytes_per_s", "qpi_p2p_bytes_per_s", "copy_bytes_per_s",
                     "memcpy_bytes_per_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise ValueError(f"NodeParams.{name} must be a positive rate in bytes/s, "
                                 f"not {value!r}")
        if self.sockets < 1:
            raise ValueError(f"NodeParams.sockets must be at least 1, not {self.sockets}")
        if not isinstance(self.gpu_sockets, tuple) or not self.gpu_sockets:
            raise ValueError(f"NodeParams.gpu_sockets must be a non-empty tuple of socket "
                             f"numbers, not {self.gpu_sockets!r}")
        for name, socket in [("hca_socket", self.hca_socket),
                             ("peach2_socket", self.peach2_socket)] + \
                [(f"gpu_sockets[{i}]", s) for i, s in enumerate(self.gpu_sockets)]:
            if isinstance(socket, bool) or not isinstance(socket, int) \
                    or not 0 <= socket < self.sockets:
                raise ValueError(f"NodeParams.{name} = {socket!r} is not a socket "
                                 f"(0..{self.sockets - 1})")
        if self.host_bytes < 4096 or self.gpu_bytes < 4096:
            raise ValueError("NodeParams.host_bytes and gpu_bytes must be at least one page")
        if self.host_bytes > 1 << 40 or self.gpu_bytes > 1 << 40:
            raise ValueError("NodeParams: a memory larger than 1 TiB does not fit the address map")

    @property
    def gpus(self):
        """Number of GPUs in the node (4 in HA-PACS/TCA)."""
        return len(self.gpu_sockets)
