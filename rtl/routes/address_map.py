"""The shared TCA address space: one region per node, with host and GPU windows.

Every node owns an aligned region of one TCA address space (:class:`AddressMap`, 002 section
3.5); :func:`default_address_map` is the layout ``peach2 routes`` and the simulated sub-cluster
use unless told otherwise.
"""

from dataclasses import asdict, dataclass

from .topology import MASK64, check_u64

__all__ = ["AddressMap", "default_address_map", "DEFAULT_TCA_BASE", "DEFAULT_NODE_SIZE",
           "DEFAULT_HOST_SIZE"]


@dataclass(frozen=True)
class AddressMap:
    """The shared TCA address space: one region per node, with host and GPU windows.

    Every node's region has the same layout (002 section 3.5): the host window at offset 0, then
    GPU window ``i`` at ``gpu_start + i * gpu_size``, where ``gpu_start`` is ``host_size``
    rounded up to ``gpu_size``.  Node ``n``'s region starts at ``tca_base + n * node_size``, so
    the address bits above ``node_size`` pick the node.

    Parameters
    ----------
    tca_base : int
        Bus address of node 0's region (the TCA BAR), aligned to ``node_size``.
    node_size : int
        Bytes of one node's region; a power of two.
    host_size, gpu_size : int
        Bytes of the host window and of each GPU window; powers of two.
    n_gpus : int
        GPU windows per node.
    """
    tca_base: int
    node_size: int
    host_size: int
    gpu_size: int
    n_gpus: int = 0

    def __post_init__(self):
        for name in ("node_size", "host_size", "gpu_size"):
            v = getattr(self, name)
            if v <= 0 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two, not {v:#x}")
        if self.n_gpus < 0:
            raise ValueError(f"n_gpus must not be negative, not {self.n_gpus}")
        if self.tca_base % self.node_size:
            raise ValueError(f"tca_base {self.tca_base:#x} must be aligned to node_size "
                             f"{self.node_size:#x} so that upper address bits pick the node")
        if self.used > self.node_size:
            raise ValueError(f"host window + {self.n_gpus} GPU windows need {self.used:#x} "
                             f"bytes, more than node_size {self.node_size:#x}")
        check_u64("tca_base", self.tca_base)

    @property
    def gpu_start(self):
        """Offset of GPU window 0 in a node's region."""
        return -(-self.host_size // self.gpu_size) * self.gpu_size

    @property
    def used(self):
        """Bytes of a region covered by windows."""
        return self.gpu_start + self.n_gpus * self.gpu_size if self.n_gpus else self.host_size

    @property
    def mask(self):
        """The route-entry mask that keeps the node-selecting address bits."""
        return ~(self.node_size - 1) & MASK64

    def region(self, node):
        """Return ``(base, size)`` of ``node``'s region."""
        if node < 0:
            raise ValueError(f"node must not be negative, not {node}")
        base = self.tca_base + node * self.node_size
        check_u64(f"region of node {node}", base + self.node_size - 1)
        return base, self.node_size

    def window(self, node, window):
        """Return ``(base, size)`` of a window: ``"host"`` or ``("gpu", i)``."""
        base, _ = self.region(node)
        if window == "host":
            return base, self.host_size
        if isinstance(window, tuple) and len(window) == 2 and window[0] == "gpu":
            i = window[1]
            if not 0 <= i < self.n_gpus:
                raise ValueError(f"GPU window {i} out of range 0..{self.n_gpus - 1}")
            return base + self.gpu_start + i * self.gpu_size, self.gpu_size
        raise ValueError(f'window must be "host" or ("gpu", i), not {window!r}')

    def gpu_base(self, node, i):
        """Return the TCA address of GPU window ``i`` of ``node`` (a DMA or PIO destination)."""
        return self.window(node, ("gpu", i))[0]

    def node_of(self, address):
        """Return the node whose region holds ``address`` (``None`` below ``tca_base``)."""
        if address < self.tca_base:
            return None
        return (address - self.tca_base) // self.node_size

    def to_dict(self):
        """Return the fields as a JSON-able dict (``AddressMap(**d)`` reads it back)."""
        return asdict(self)


#: Bus address of node 0's region: where a BIOS or a cocotbext-pcie root complex places the
#: first prefetchable 64-bit BAR, the TCA BAR, of identical hosts enumerated the same way.
DEFAULT_TCA_BASE = 0x8000_0000_0000_0000
DEFAULT_NODE_SIZE = 1 << 32
DEFAULT_HOST_SIZE = 1 << 20


def default_address_map(n_nodes=None, *, tca_base=DEFAULT_TCA_BASE, node_size=DEFAULT_NODE_SIZE,
                        host_size=DEFAULT_HOST_SIZE, n_gpus=0, gpu_size=None):
    """Return the default :class:`AddressMap`: regions of ``node_size`` bytes from
    ``tca_base``, a host window of ``host_size`` bytes and ``n_gpus`` GPU windows of
    ``gpu_size`` bytes (default ``host_size``) per node.

    ``n_nodes``, if given, is checked: every node's region must fit 64-bit addresses.
    """
    amap = AddressMap(tca_base=tca_base, node_size=node_size, host_size=host_size,
                      gpu_size=gpu_size or host_size, n_gpus=n_gpus)
    if n_nodes is not None:
        if n_nodes < 1:
            raise ValueError(f"n_nodes must be at least 1, not {n_nodes}")
        amap.region(n_nodes - 1)
    return amap
