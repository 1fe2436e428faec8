"""GPU memory on the sub-cluster (``peach2.sim.pcie.gpu``): transfers checked byte for byte on the
ring of 4 that ``test_cluster`` builds (same HDL top and cables, so the same Verilator build),
and the address-map and model checks that need no simulator.  ``gpu_tb`` has the cocotb tests;
the GPU read rate is a benchmark (``bench_gpu.py``), not a test."""

import pytest
from cluster_run import run

from peach2.routes import default_address_map
from peach2.sim.pcie import GPU_READ_BANDWIDTH, GpuFunction


def test_ring4_gpu_transfers():
    """Ring of 4, two GPUs per node: a DMA reads node 0's GPU 0 into node 2's GPU 1, another
    copies host 1's memory into node 3's GPU 0, host 3 stores into node 1's GPU 1, at once."""
    run("cluster-ring4-gpu", "ring:4", "gpu_transfers", seed=65, test_module="gpu_tb")


def test_gpu_windows_in_the_address_map():
    """GPU window i of node n sits at region + gpu_start + i * gpu_size; out-of-range windows
    and undersized GPUs are refused."""
    amap = default_address_map(4, n_gpus=2, gpu_size=1 << 21)
    base, _ = amap.region(3)
    assert amap.gpu_start == 1 << 21
    assert amap.gpu_base(3, 1) == base + (1 << 21) + (1 << 21)
    assert amap.window(3, ("gpu", 1)) == (amap.gpu_base(3, 1), 1 << 21)
    with pytest.raises(ValueError):
        amap.gpu_base(0, 2)
    assert default_address_map(4).n_gpus == 0
    with pytest.raises(ValueError):
        GpuFunction(3000)
    with pytest.raises(ValueError):
        GpuFunction(1 << 20, read_bandwidth=0)
    gpu = GpuFunction(1 << 20)            # the function alone: a GpuModel needs a simulator
    assert gpu.read_bandwidth == GPU_READ_BANDWIDTH == 870e6
    assert gpu.bar[0] & 0xC == 0xC, "BAR 0 must be 64-bit prefetchable"
