"""The GPU kernels that pack a block-stride halo plane into a contiguous buffer and unpack it.

MPI over InfiniBand sends contiguous bytes, so a plane of ``count`` runs of ``length`` bytes
separated by a stride (an ``ik`` plane of ``a[i][j][k]``) is first copied by a GPU kernel into
a contiguous buffer, sent, and copied out by another kernel at the receiver ("TCA/InfiniBand
hybrid communication in XcalableACC", section 4 (Figure 6) and section 5.3, ``reflect_do``:
"Stride通信がある場合、通信の前後にPack/Unpackが実行される").  PEACH2's block-stride descriptors
need neither.

The kernel's time is a parameter, estimated from two figures:

- a launch, ``launch_ps`` = 3.2 us per kernel: the kernel launch Kuwahara et al. measured on a
  Kepler GPU ("GMPI", section 4.2; the same source as the node model's ``copy_launch_ps``);
- its bytes, read once and written once, at ``bytes_per_s`` = 180 GB/s: *assumed*, 72 % of the
  Tesla K20X's 250 GB/s peak memory bandwidth (NVIDIA's K20X board specification), the share
  a copy kernel of runs of at least 256 bytes commonly reaches with ECC on.  No measurement of
  XcalableACC's own pack kernel is published.

So a 64 KiB plane packs in 3.2 us + 0.73 us: the launch dominates at Himeno's sizes.
"""

from dataclasses import dataclass

__all__ = ["PackKernel"]


@dataclass(frozen=True)
class PackKernel:
    """Time of GPU pack and unpack kernels (picoseconds, bytes per second).

    Members
    -------
    launch_ps : int
        One kernel's launch and completion as the CPU sees it.
    bytes_per_s : float
        The kernel's memory rate; it reads and writes every byte once.
    """

    launch_ps: int = 3_200_000
    bytes_per_s: float = 180e9

    def __post_init__(self):
        if isinstance(self.launch_ps, bool) or not isinstance(self.launch_ps, int) \
                or self.launch_ps < 0:
            raise ValueError(f"launch_ps must be a non-negative integer, not {self.launch_ps!r}")
        if not isinstance(self.bytes_per_s, (int, float)) or not self.bytes_per_s > 0:
            raise ValueError(f"bytes_per_s must be positive, not {self.bytes_per_s!r}")

    def time_ps(self, planes):
        """Picoseconds of one kernel per plane of ``planes`` (bytes each), run back to back
        on one stream, until the CPU sees the last one end."""
        planes = list(planes)
        if any(n < 0 for n in planes):
            raise ValueError(f"plane sizes must not be negative: {planes}")
        if not planes:
            return 0
        return len(planes) * self.launch_ps + round(2 * sum(planes) / self.bytes_per_s * 1e12)
