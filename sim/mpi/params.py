"""Parameters of MPI over InfiniBand as MVAPICH2-GDR 2.0 runs it, each with its source.

Protocol thresholds carry the names of MVAPICH2's run-time variables; software overheads of the
host CPU are plain fields.  Sources, cited by short name below:

- **000**: Odajima et al., "TCA/InfiniBand hybrid communication in XcalableACC", Table 1
  (MVAPICH2-GDR 2.0, ``MV2_USE_CUDA=1``, ``MV2_NUM_PORTS=1``) and section 4, which lists the
  protocol switch of MVAPICH2-GDR 2.0 after its README: up to 8 KB GPUDirect RDMA directly;
  8 KB - 256 KB copied to host memory, then written into the remote GPU with GPUDirect RDMA;
  above 256 KB pipelined through host memory on both sides.
- **GDR README**: the MVAPICH2-GDR 2.1a README: ``MV2_GPUDIRECT_LIMIT`` 8192,
  ``MV2_USE_GPUDIRECT_RECEIVE_LIMIT`` 131072, ``MV2_CUDA_BLOCK_SIZE`` 262144,
  ``MV2_USE_GPUDIRECT_LOOPBACK_LIMIT`` 8192 (the "loopback design": the HCA copies small
  messages between host and GPU memory instead of ``cudaMemcpy``).
- **MV2 guide**: the MVAPICH2 user guide: ``MV2_IBA_EAGER_THRESHOLD`` is architecture dependent
  (12 KB, ``RDMA_IBA_EAGER_THRESHOLD`` = 12*1024 in its ``ibv_param.h``);
  ``MV2_MAX_INLINE_SIZE`` 128 on InfiniBand; ``RDMA_PREPOST_DEPTH`` 64.
- **GTC 2014**: HA-PACS/TCA 8-byte GPU-to-GPU latencies: MPI over InfiniBand with GPUDirect
  RDMA 6.5 us, staged through host memory 17 us.

Values marked *assumed* have no primary source here; ``loopback_ps`` is *fitted* so that the
8-byte GPU-to-GPU latency with GPUDirect RDMA is 6.5 us (``python -m peach2.sim.mpi.pingpong``).
"""

from dataclasses import dataclass, fields, replace

__all__ = ["MPIParams"]

#: Largest tag: the tag travels in 28 bits of the 32-bit immediate data (see ``wire``).
TAG_UB = (1 << 28) - 1


@dataclass(frozen=True)
class MPIParams:
    """MVAPICH2-GDR 2.0 protocol thresholds and host software costs (bytes, picoseconds).

    Construction checks every field and raises ``ValueError`` naming the field.
    """

    # -- MVAPICH2-GDR protocol switch ---------------------------------------------------------
    MV2_USE_CUDA: bool = True                       # 000 Table 1: MV2_USE_CUDA=1
    MV2_USE_GPUDIRECT: bool = True                  # 000 sec. 4: MV2GDR uses GPUDirect RDMA
    MV2_GPUDIRECT_LIMIT: int = 8192                 # GDR README; 000 sec. 4: <= 8 KB by GDR
    MV2_USE_GPUDIRECT_RECEIVE_LIMIT: int = 262144   # 000 sec. 4: 2.0 writes the remote GPU by
    #                                                 GDR up to 256 KB (2.1a README: 131072)
    MV2_USE_GPUDIRECT_LOOPBACK_LIMIT: int = 8192    # GDR README: loopback copies <= 8 KB
    MV2_CUDA_BLOCK_SIZE: int = 262144               # GDR README; 000 sec. 4: pipelined > 256 KB
    MV2_IBA_EAGER_THRESHOLD: int = 12288            # MV2 guide: architecture dependent, 12 KB
    MV2_MAX_INLINE_SIZE: int = 128                  # MV2 guide: 128 bytes on InfiniBand
    MV2_PREPOST_DEPTH: int = 64                     # MV2 guide / source: RDMA_PREPOST_DEPTH 64

    # -- host CPU software costs (one Ivy Bridge core) ------------------------------------------
    send_overhead_ps: int = 150_000     # assumed: MPI_Isend: envelope, protocol choice, post
    recv_overhead_ps: int = 100_000     # assumed: MPI_Irecv: unexpected-queue search, post
    progress_ps: int = 100_000          # assumed: progress engine handling one completion
    wait_overhead_ps: int = 50_000      # assumed: MPI_Wait returning once its request is done
    cuda_check_ps: int = 200_000        # assumed: cuPointerGetAttribute on the user buffer
    #                                     (every send and receive when MV2_USE_CUDA)
    loopback_ps: int = 2_950_000        # fitted: 8-byte GPU-GPU with GDR = 6.5 us (GTC 2014);
    #                                     posting, HCA turnaround and polling of one loopback
    #                                     copy beyond its DMA time

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type is bool or f.type == "bool":
                if not isinstance(value, bool):
                    raise ValueError(f"MPIParams.{f.name} must be True or False, not {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"MPIParams.{f.name} must be an integer, not {value!r}")
            if value < 0:
                raise ValueError(f"MPIParams.{f.name} must not be negative ({value})")
        if self.MV2_CUDA_BLOCK_SIZE < 1:
            raise ValueError("MPIParams.MV2_CUDA_BLOCK_SIZE must be at least 1 byte")
        if self.MV2_IBA_EAGER_THRESHOLD > 1 << 24:
            raise ValueError(f"MPIParams.MV2_IBA_EAGER_THRESHOLD = "
                             f"{self.MV2_IBA_EAGER_THRESHOLD}: eager buffers larger than "
                             f"16 MiB are not supported")
        if self.MV2_PREPOST_DEPTH < 1:
            raise ValueError("MPIParams.MV2_PREPOST_DEPTH must be at least 1 (a peer with no "
                             "posted receive answers every send with an RNR NAK)")

    @property
    def gdr(self):
        """True when GPUDirect RDMA is in use (``MV2_USE_CUDA`` and ``MV2_USE_GPUDIRECT``)."""
        return self.MV2_USE_CUDA and self.MV2_USE_GPUDIRECT

    @property
    def vbuf_bytes(self):
        """Size of one eager/control buffer: the eager threshold, at least 256 bytes."""
        return -(-max(self.MV2_IBA_EAGER_THRESHOLD, 256) // 64) * 64

    def with_(self, **changes):
        """Return a copy with ``changes`` (``MPIParams.with_(MV2_GPUDIRECT_LIMIT=0)``)."""
        return replace(self, **changes)
