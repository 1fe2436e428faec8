"""The co-simulated machine put together inside a cocotb test: this process's sub-clusters, their
node models, MPI ranks and the window driver.

::

    MachineSim(dut, plan, transport, seed)
    ├── machine: Machine(plan.subclusters partitions x plan.n ports), this rank's partitions
    ├── clusters[s]: Cluster on the HDL top's chips of sub-cluster s (hosts, GPUs, HCA endpoints)
    │     await sim.up(): reset, links up, enumerate, program (every local sub-cluster at once)
    ├── nodes[s][g]: bridged node models (host0, GPU0/1 = the cocotb bytes)
    ├── worlds[s]: PartitionWorld: MPI rank g on HCA port g, queue pairs to peers(g)
    └── driver: MachineDriver (await sim.align(t), sim.driver.run(done))

Used by the machine's all-to-all (:mod:`.cosim`) and the hybrid collectives
(:mod:`peach2.sim.hybrid`).  Global node ``g = s * n + i`` is MPI rank ``g`` and switch port
``g``; every model is seeded by ``g``, so a sub-cluster runs the same in one process and on N
ranks (:mod:`.plan`).
"""

import time

from cocotb.utils import get_sim_time

from peach2.routes import default_address_map
from peach2.sim.harness import Cluster
from peach2.sim.harness.cluster import gather
from peach2.sim.machine import Machine
from peach2.sim.node import NodeParams

from .bridge import bridged_node
from .endpoint_dma import endpoint_dma, hca_params
from .machine_driver import MachineDriver
from .plan import WINDOW_PS
from .world import PartitionWorld

__all__ = ["MachineSim"]


class MachineSim:
    """This process's share of the machine ``plan`` on the HDL top ``dut``.

    Parameters
    ----------
    dut : the cocotb top (``plan.top(copies)``)
    plan : MachinePlan
    transport : LocalTransport or MpiTransport
    seed : int
    host_size, gpu_size : int
        Each node's host window and each GPU window (bytes; GPU windows default to the host
        window's size).
    hca_endpoint : bool
        The HCAs' DMA as TLPs of PCIe endpoints on the nodes' root complexes (default), or the
        node model's timing on the cocotb bytes.
    window_ps : int
        The machine's window: a whole number of clock cycles, at most the lookahead.
    node_params : NodeParams, optional
    gpu_read_bandwidth : float, optional
        Bytes/s of PEACH2's reads of a GPU (the cocotb GPU models' read path); default the GPU
        model's (002's Sandy Bridge figure).  ``node_params.gpu_read_bytes_per_s`` is
        HA-PACS/TCA's (Ivy Bridge), the rate the MPI side's GPUDirect reads use.

    Members
    -------
    machine : Machine
    local : list of int
        The sub-clusters this process simulates.
    clusters : dict of int to Cluster
    nodes : dict of int to dict of int to Node
        ``nodes[s][g]``: the node model of global node ``g`` (after :meth:`make_worlds`).
    worlds : dict of int to PartitionWorld
    driver : MachineDriver
    up_ps : int
        Simulated time (ps) when every local sub-cluster was up.
    bringup_wall_s : float
    """

    def __init__(self, dut, plan, transport, seed, *, host_size=1 << 20, gpu_size=None,
                 hca_endpoint=True, window_ps=WINDOW_PS, node_params=None,
                 gpu_read_bandwidth=None):
        self.dut, self.plan, self.seed = dut, plan, seed
        self.hca_endpoint = hca_endpoint
        self.node_params = node_params or NodeParams()
        self.machine = Machine(plan.subclusters, plan.n, transport=transport,
                               window_ps=window_ps)
        self.local = [p.index for p in self.machine.partitions]
        self.address_map = default_address_map(plan.n, host_size=host_size, n_gpus=2,
                                               gpu_size=gpu_size)
        hca = hca_params(self.node_params) if hca_endpoint else None
        gpu = {} if gpu_read_bandwidth is None else {"gpu_read_bandwidth": gpu_read_bandwidth}
        self.clusters = {
            s: Cluster(dut, plan.topology, self.address_map, hdl_cables=True,
                       seed=seed + 16 * s * plan.n,
                       prefixes=[f"c{k * plan.n + i}_" for i in range(plan.n)], hca=hca, **gpu)
            for k, s in enumerate(self.local)}
        self.nodes, self.worlds = {}, {}
        self.driver = MachineDriver(self.machine)
        self.up_ps = None
        self.bringup_wall_s = None

    @property
    def transport(self):
        return self.machine.transport

    def describe(self):
        plan = self.plan
        return (f"machine {plan.shape} x {plan.subclusters} ({plan.n_nodes} nodes), seed "
                f"{self.seed}, {self.transport.describe()}: sub-clusters {self.local} here")

    async def up(self):
        """Reset and bring up every local sub-cluster at once (links, enumeration, routes)."""
        for j in range(len(self.plan.cables(len(self.local)))):
            getattr(self.dut, f"cable{j}_down").value = 0
        wall = time.perf_counter()
        await gather(c.reset_and_start() for c in self.clusters.values())
        self.up_ps = int(get_sim_time("ps"))
        self.bringup_wall_s = time.perf_counter() - wall

    def make_worlds(self, peers, *, reserve=0, params=None, socket=None):
        """The MPI ranks of every local sub-cluster, each rank connected to ``peers(g)``;
        ``reserve`` bytes at the start of each host window stay the TCA traffic's; ``params``
        (MPIParams) and ``socket`` (the ranks' CPU, default the HCA's) as
        :class:`PartitionWorld` takes them."""
        plan = self.plan
        for s, cluster in self.clusters.items():
            nodes = {s * plan.n + i: bridged_node(cluster, i, self.node_params, reserve=reserve)
                     for i in range(plan.n)}
            part = self.machine.partition(s)
            dmas = {g: endpoint_dma(cluster, g - s * plan.n, node, part.fabric, g)
                    for g, node in nodes.items()} if self.hca_endpoint else None
            self.nodes[s] = nodes
            self.worlds[s] = PartitionWorld(part, nodes, peers, params=params, socket=socket,
                                            dmas=dmas)
        return self.worlds

    def rank(self, g):
        """MPI rank ``g`` (a local one)."""
        return self.worlds[self.plan.subcluster_of(g)].ranks[g]

    def is_local(self, g):
        return self.plan.subcluster_of(g) in self.clusters

    async def align(self, t_ps=None):
        """Collective: bring cocotb and the machine to the first window edge at or after every
        rank's ``t_ps`` (default: when it came up); return that edge."""
        return await self.driver.align(self.up_ps if t_ps is None else t_ps)

    def hca_dma_counts(self):
        """``{s: [reads, writes, refused]}`` of the HCAs' endpoint DMAs per local sub-cluster."""
        return {s: [sum(getattr(w.ranks[g].hca.dma, k, 0) for g in w.ranks)
                    for k in ("reads", "writes", "failed")] for s, w in self.worlds.items()}
