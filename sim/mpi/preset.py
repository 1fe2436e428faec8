"""Named configurations: the GPU placements and MVAPICH2-GDR settings 000 Figure 4 compares.

In HA-PACS/TCA the HCA sits on CPU1 with GPU2/GPU3; GPU0/GPU1 share CPU0 with PEACH2 (Odajima
et al., "TCA/InfiniBand hybrid communication in XcalableACC", Figure 1).  Section 4 of that
paper measures MPI ping-pong between the same GPU of two nodes:

- ``MV2GDR``: GPU2 to GPU2, HCA and GPU on one socket, MVAPICH2-GDR 2.0 defaults;
- ``MV2GDR-QPI``: GPU0 to GPU0, every GPUDirect access crosses QPI (at most ~290 MB/s up
  to 256 KB, then the same as MV2GDR once the protocol stages through host memory);
- ``MV2GDR-QPI-Tuned``: GPU0 to GPU0 with GPUDirect RDMA only up to 8 KB and host staging
  above (``MV2_GPUDIRECT_LIMIT`` = ``MV2_USE_GPUDIRECT_RECEIVE_LIMIT`` = 8 KB), the setting the
  paper found best and used from there on.

and for the calibration against the latencies presented at GTC 2014:

- ``MV2-staged``: GPU2 to GPU2 without GPUDirect RDMA (``MV2_USE_GPUDIRECT=0``): every message
  is copied to host memory by ``cudaMemcpy``, sent host to host, copied to the GPU.

A rank runs on the socket of its GPU (as ``numactl --cpunodebind`` does), so its host buffers
(eager buffers, staging) are in that socket's memory.
"""

from dataclasses import dataclass

from peach2.sim.node import NodeParams

from .params import MPIParams
from .world import World

__all__ = ["Preset", "PRESETS", "preset"]


@dataclass(frozen=True)
class Preset:
    """A named configuration: MPI parameters and the GPU each rank uses.

    Members
    -------
    name : str
        As in 000 Figure 4 (``"MV2GDR"``, ``"MV2GDR-QPI"``, ``"MV2GDR-QPI-Tuned"``) or
        ``"MV2-staged"``.
    params : MPIParams
        MVAPICH2-GDR settings.
    gpu : int
        The GPU (same number on every node) whose memory holds the user buffers.
    what : str
        One line for tables.
    """

    name: str
    params: MPIParams
    gpu: int
    what: str

    def socket(self, node_params=None):
        """The socket the ranks run on: their GPU's."""
        node_params = node_params or NodeParams()
        return node_params.gpu_sockets[self.gpu]

    def world(self, n_ranks, *, node_params=None, ib_params=None, **changes):
        """Build a :class:`~.world.World` of ``n_ranks`` nodes with this configuration.

        ``changes`` override :class:`MPIParams` fields (``MV2_GPUDIRECT_LIMIT=0``, ...).
        """
        params = self.params.with_(**changes) if changes else self.params
        return World(n_ranks, params, node_params=node_params, ib_params=ib_params,
                     socket=self.socket(node_params))

    @property
    def where(self):
        """Memory name of the user buffers (``"gpu2"``, ...)."""
        return f"gpu{self.gpu}"


_DEFAULT = MPIParams()

PRESETS = {p.name: p for p in (
    Preset("MV2GDR", _DEFAULT, 2,
           "GPU2-GPU2, HCA and GPU on CPU1, MVAPICH2-GDR 2.0 defaults"),
    Preset("MV2GDR-QPI", _DEFAULT, 0,
           "GPU0-GPU0, GPUDirect RDMA across QPI, MVAPICH2-GDR 2.0 defaults"),
    Preset("MV2GDR-QPI-Tuned",
           _DEFAULT.with_(MV2_GPUDIRECT_LIMIT=8192, MV2_USE_GPUDIRECT_RECEIVE_LIMIT=8192), 0,
           "GPU0-GPU0, GDR up to 8 KB, host staging above (000 section 4)"),
    Preset("MV2-staged", _DEFAULT.with_(MV2_USE_GPUDIRECT=False), 2,
           "GPU2-GPU2, no GPUDirect RDMA: staged through host memory"),
)}


def preset(name):
    """Return the :class:`Preset` called ``name``; ``ValueError`` lists the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"no preset {name!r}; presets are {', '.join(PRESETS)}") from None
