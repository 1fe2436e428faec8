"""Host driver model: program and observe a PEACH2 chip through its BARs.

This is what the TCA API of the PEACH2 papers offers for the router, in Python, for testbenches
and for users scripting a simulation:

- :class:`Driver` talks to one chip through any object with async ``read(addr, length)`` and
  ``write(addr, data)`` methods (a cocotbext-pcie ``bar_window``, or the Amaranth-simulator
  adapter of ``tb/csr``): registers by name, routes, node offset, enables, counters, MSI,
  protection windows (:meth:`Driver.set_window`), and PIO writes into another node's host or
  GPU window.
- Inline puts (``docs/put.md``): :meth:`Driver.put` writes a 64-byte descriptor carrying up
  to 32 bytes of data into BAR 4; :meth:`Driver.put_status`, :meth:`Driver.put_done`,
  :meth:`Driver.put_clear`, :meth:`Driver.put_set_vector`.
- DMA (000 section 2.5, the TCA API): :meth:`Driver.dma_config`, chains of descriptors built
  with :class:`peach2.sim.driver.chain.Chain` (``tcaSetDMADesc_Memcpy``) and registered with
  :meth:`Driver.dma_desc_set` (``tcaDescSet``), :meth:`Driver.dma_start` (``tcaStartDMADesc``),
  :meth:`Driver.dma_wait` (``tcaWaitDMADesc``), register mode (:meth:`Driver.dma_reg_set`,
  :meth:`Driver.dma_reg_start`), register-mode queues appended while they run
  (:meth:`Driver.dma_queue_start`, :meth:`Driver.dma_append`, :meth:`Driver.dma_stop`),
  :meth:`Driver.dma_abort`, :meth:`Driver.dma_status` (written in :mod:`.dma`, a base class).
- Routes: :class:`~peach2.routes.Topology` says which port of which node is cabled to which
  node (rings and the papers' 2xK double ring); :class:`~peach2.routes.AddressMap` places every
  node's region and its host/GPU windows in the shared TCA address space; a
  :class:`~peach2.routes.RouteSet` holds every node's table with its deadlock check (``safe``
  routing).  They are host software, :mod:`peach2.routes` (``docs/routes.md``);
  :meth:`Driver.program` builds a route set and writes this node's part,
  :meth:`Driver.program_routes` writes one node's part of a given set (``peach2 routes --format
  json`` writes one to a file).

The driver's exceptions are in :mod:`peach2.sim.driver.errors` (:class:`DriverError`,
:class:`DmaFault`); ``docs/sim/driver.md`` is the user's page.

Register offsets and fields come from :mod:`peach2.csr.regmap`, never from this file.

Example
-------
::

    topo = Topology.double_ring(4)                     # 2x4 sub-cluster, nodes 0..7
    amap = AddressMap(tca_base=0x80_0000_0000, node_size=1 << 32, host_size=1 << 30,
                      gpu_size=1 << 28, n_gpus=4)
    drv = Driver(host.bars[0], host.bars[2])
    await drv.id_check()
    await drv.program(topo, amap, node=0, phys_base=0x1_0000_0000)
    await drv.pio_write(amap, node=5, window="host", offset=0x100, data=b"hello TCA")
    print(await drv.counters("E"))

    # DMA (Chain from peach2.sim.driver.chain): 128 x 4 KiB from local memory to node 5's host
    # window, as in 002 section 4.1
    drv.memory = host.rc.mem_address_space             # where descriptors are written
    await drv.dma_config(mps=256, mrrs=512)
    chain = Chain(channel=0, base=desc_addr)
    for i in range(128):
        chain.memcpy(src + 4096 * i, amap.window(5, "host")[0] + 4096 * i, 4096)
    await drv.dma_desc_set(chain)                       # tcaDescSet
    await drv.dma_start(0)                              # tcaStartDMADesc
    print(await drv.dma_wait(0))                        # tcaWaitDMADesc
"""

from peach2.csr.regmap import REGMAP, VERSION_MAJOR, Access
from peach2.params import PUT_WINDOW, PutError
from peach2.put.descriptor import PUT_BYTES
from peach2.put.descriptor import pack as pack_put
from peach2.routes import MASK64, RouteSet, RouteTableFull, check_u64, port_number

from .dma import DmaCalls
from .errors import DriverError, PutFault

__all__ = ["Driver"]


class Driver(DmaCalls):
    """Program and observe one PEACH2 chip.

    Parameters
    ----------
    bar0 : object
        The register BAR: async ``read(addr, length) -> bytes`` and ``write(addr, data)``,
        addresses relative to the BAR (a cocotbext-pcie ``bar_window``).
    tca_bar : object or None
        The TCA window BAR, same interface, relative to :attr:`AddressMap.tca_base`; needed by
        :meth:`pio_write` only.
    regmap : RegisterMap
        The register description (default: the default build's).
    memory : object or None
        Host memory for DMA descriptors: async ``write(address, data)`` at bus addresses (a
        cocotbext-pcie ``rc.mem_address_space``); needed by :meth:`dma_desc_set` only.
    put_bar : object or None
        The put window (BAR 4), same interface; needed by :meth:`put` only.

    All methods are coroutines except where noted; arguments are checked and out-of-range values
    raise ``ValueError``/``IndexError`` instead of being truncated.
    """

    def __init__(self, bar0, tca_bar=None, *, regmap=REGMAP, memory=None, put_bar=None):
        self.bar0 = bar0
        self.tca_bar = tca_bar
        self.put_bar = put_bar
        self.regmap = regmap
        self.memory = memory
        self._n_routes = None
        self._announced = {}        # channel: CH_CTRL.adj of its next start (dma_desc_set)
        self._queue = {}            # channel: its queue's next slot and slots held, as known

    # -- registers by name ----------------------------------------------------------------------

    def offset(self, name, index=None):
        """Return the byte offset of register ``name`` element ``index`` (not a coroutine)."""
        return self.regmap[name].offset_of(index)

    async def read_reg(self, name, index=None):
        """Read one 32-bit register; ``index`` is an int, a tuple or index names
        (``("E", "RX_TLPS")`` for COUNT)."""
        data = await self.bar0.read(self.offset(name, index), 4)
        return int.from_bytes(data, "little")

    async def write_reg(self, name, value=None, index=None, **fields):
        """Write one 32-bit register: a whole ``value`` or named ``fields`` (others 0)."""
        reg = self.regmap[name]
        if reg.access not in (Access.RW, Access.ACTION):
            raise ValueError(f"{name} is {reg.access.value}; software cannot write it")
        if (value is None) == (not fields):
            raise TypeError("give either value or fields")
        if value is None:
            value = reg.encode(**fields)
        if not 0 <= value < (1 << 32):
            raise ValueError(f"{name}: {value:#x} does not fit 32 bits")
        await self.bar0.write(self.offset(name, index), value.to_bytes(4, "little"))

    async def read_fields(self, name, index=None):
        """Read a register and return its fields as a dict."""
        return self.regmap[name].decode(await self.read_reg(name, index))

    async def read_wide(self, name, index=None):
        """Read the 64-bit pair ``<name>_LO``/``<name>_HI`` (one 64-bit read when aligned)."""
        lo, hi = self.offset(f"{name}_LO", index), self.offset(f"{name}_HI", index)
        if hi == lo + 4 and lo % 8 == 0:
            return int.from_bytes(await self.bar0.read(lo, 8), "little")
        return (await self.read_reg(f"{name}_LO", index)
                | await self.read_reg(f"{name}_HI", index) << 32)

    async def write_wide(self, name, value, index=None):
        """Write the 64-bit pair ``<name>_LO``/``<name>_HI`` (one 64-bit write when aligned)."""
        value = check_u64(name, value)
        lo, hi = self.offset(f"{name}_LO", index), self.offset(f"{name}_HI", index)
        if hi == lo + 4 and lo % 8 == 0:
            await self.bar0.write(lo, value.to_bytes(8, "little"))
        else:
            await self.write_reg(f"{name}_LO", value & 0xffffffff, index)
            await self.write_reg(f"{name}_HI", value >> 32, index)

    # -- identity -------------------------------------------------------------------------------

    async def id_check(self):
        """Check ID and VERSION; return ``(major, minor)``.

        Raises
        ------
        DriverError
            ID is not "PCH2" or the major version differs from the driver's.
        """
        expect = self.regmap["ID"].value
        got = await self.read_reg("ID")
        if got != expect:
            raise DriverError(f"ID reads {got:#010x}, expected {expect:#010x} (\"PCH2\"): is "
                              f"bar0 the PEACH2 register BAR, and is the chip out of reset?")
        version = await self.read_fields("VERSION")
        if version["major"] != VERSION_MAJOR:
            raise DriverError(f"register map version {version['major']}.{version['minor']}, "
                              f"this driver knows major version {VERSION_MAJOR}")
        return version["major"], version["minor"]

    async def config(self):
        """Return the CONFIG fields (``n_routes``, ``s_is_rc``, ``n_ports``, ``buffer_beats``)."""
        cfg = await self.read_fields("CONFIG")
        self._n_routes = cfg["n_routes"]
        return cfg

    async def n_routes(self):
        """Return the number of route entries of the chip (read once from CONFIG)."""
        if self._n_routes is None:
            await self.config()
        return self._n_routes

    async def port_status(self, port):
        """Return ``{"link_up": .., "ltssm": .., "dropping": ..}`` of ``port`` (name or
        number)."""
        return await self.read_fields("PORT_STATUS", port_number(port))

    # -- routing --------------------------------------------------------------------------------

    async def set_offset(self, offset):
        """Set the node offset subtracted from requests leaving through port N (mod 2^64)."""
        await self.write_wide("OFFSET", offset)

    async def get_offset(self):
        """Return the node offset."""
        return await self.read_wide("OFFSET")

    async def _check_route_index(self, i):
        n = await self.n_routes()
        if not 0 <= i < n:
            raise IndexError(f"route entry {i} out of range 0..{n - 1}")

    async def set_route(self, i, mask, lower, upper, port, enable=True):
        """Program route entry ``i``: ``lower <= (A & mask) <= upper`` goes to ``port``.

        The entry is disabled while its bounds change, then written with ``enable``.
        """
        await self._check_route_index(i)
        port = port_number(port)
        values = {"MASK": check_u64("mask", mask), "LOWER": check_u64("lower", lower),
                  "UPPER": check_u64("upper", upper)}
        await self.write_reg("ROUTE_TARGET", 0, i)
        for name, value in values.items():
            await self.write_wide(f"ROUTE_{name}", value, i)
        await self.write_reg("ROUTE_TARGET", index=i, port=port, enable=int(bool(enable)))

    async def get_route(self, i):
        """Return entry ``i`` as ``{"mask", "lower", "upper", "port", "enable"}``."""
        await self._check_route_index(i)
        entry = {name.lower(): await self.read_wide(f"ROUTE_{name}", i)
                 for name in ("MASK", "LOWER", "UPPER")}
        entry.update(await self.read_fields("ROUTE_TARGET", i))
        return entry

    async def routes(self):
        """Return the enabled entries as ``[(mask, lower, upper, port)]`` in index order."""
        out = []
        for i in range(await self.n_routes()):
            e = await self.get_route(i)
            if e["enable"]:
                out.append((e["mask"], e["lower"], e["upper"], e["port"]))
        return out

    async def clear_routes(self):
        """Disable and zero every route entry."""
        for i in range(await self.n_routes()):
            await self.write_reg("ROUTE_TARGET", 0, i)
            for name in ("MASK", "LOWER", "UPPER"):
                await self.write_wide(f"ROUTE_{name}", 0, i)

    async def set_window(self, w, base=0, limit=0, *, open=True, writable=True, sources=0xFFFF):
        """Program protection window ``w`` (registers WIN[w], ``docs/errors.md``): the pages
        from ``base`` to ``limit`` (TCA addresses; bits [11:0] ignored, ``limit`` inclusive),
        applying to the nodes set in ``sources`` (bit n: node n), writable or read-only.

        The window is closed while its registers change, then written with ``open``;
        ``open=False`` just closes it (``base`` and ``limit`` are then ignored).  The
        registers are read back, which also flushes the writes.
        """
        await self.write_reg("WIN_CTRL", 0, w)
        if open:
            await self.write_wide("WIN_BASE", check_u64("base", base), w)
            await self.write_wide("WIN_LIMIT", check_u64("limit", limit), w)
            await self.write_reg("WIN_SOURCES", index=w, nodes=sources)
            await self.write_reg("WIN_CTRL", index=w, open=1, writable=int(bool(writable)))
        want = {"open": int(bool(open)), "writable": int(bool(open and writable))}
        got = await self.read_fields("WIN_CTRL", w)
        if got != want:
            raise DriverError(f"WIN_CTRL[{w}] reads back {got} after writing {want}")

    async def enable(self, pio=True, route=True):
        """Set CONTROL: ``pio`` opens host writes into the TCA window, ``route`` E/W/S ingress.

        Returns once the chip has applied it: CONTROL is read back, which also flushes every
        earlier posted register write (the register block serves requests in order).  Without
        this a PIO write sent right after the CONTROL write can be classified by the router
        before CONTROL changes, and be dropped as window closed.

        Raises
        ------
        DriverError
            CONTROL reads back a different value.
        """
        want = {"pio_enable": int(bool(pio)), "route_enable": int(bool(route))}
        await self.write_reg("CONTROL", **want)
        got = await self.read_fields("CONTROL")
        if got != want:
            raise DriverError(f"CONTROL reads back {got} after writing {want}")

    async def program(self, topology, address_map, node, phys_base, *, routes="safe"):
        """Set up this chip as ``node`` of ``topology``; return the route entries written.

        ``routes`` is a routing policy of :meth:`RouteSet.build` (default ``"safe"``:
        deadlock-free; ``"shortest"``: the :func:`routes_for` tables, which can deadlock on
        rings) or a :class:`RouteSet` of this topology and address map.  Then as
        :meth:`program_routes`, with ``phys_base``.
        """
        if isinstance(routes, RouteSet):
            if routes.topology != topology or routes.address_map != address_map:
                raise ValueError(f"the route set is for {routes.topology.label} and "
                                 f"{routes.address_map}, not {topology.label} and "
                                 f"{address_map}")
            route_set = routes
        else:
            route_set = RouteSet.build(topology, address_map, routes)
        return await self.program_routes(route_set, node, phys_base)

    async def program_routes(self, route_set, node, phys_base=None):
        """Write ``node``'s part of ``route_set``; return the route entries written.

        Closes the windows, writes the node's route table (remaining entries disabled), its N
        offset ``region base - phys_base`` (so that an address ``A`` in the node's region leaves
        port N as ``phys_base + (A - region base)``; ``phys_base`` defaults to the route set's)
        and NODE, then enables PIO and routing.

        Raises
        ------
        RouteTableFull
            The node needs more entries than this chip has (CONFIG.n_routes).
        """
        topology = route_set.topology
        if not 0 <= node < topology.n_nodes:
            raise ValueError(f"node {node} out of range 0..{topology.n_nodes - 1}")
        node_reg = self.regmap["NODE"]
        node_bits = node_reg.all_fields[0].width
        if node >= 1 << node_bits:
            raise ValueError(f"node {node} does not fit NODE.node_id ({node_bits} bits)")
        entries = route_set.entries(node)
        n_routes = await self.n_routes()
        if len(entries) > n_routes:
            raise RouteTableFull(
                f"node {node} needs {len(entries)} route entries, the chip has {n_routes}; next "
                f"hops by destination: {route_set.next_hops[node]} ({route_set.policy} "
                f"routing).  Build the chip with more routes or renumber the nodes so that "
                f"equal next hops are contiguous")
        base, _ = route_set.address_map.region(node)
        offset = route_set.offset(node) if phys_base is None else \
            (base - check_u64("phys_base", phys_base)) & MASK64
        await self.enable(pio=False, route=False)
        await self.clear_routes()
        for i, (mask, lower, upper, port) in enumerate(entries):
            await self.set_route(i, mask, lower, upper, port)
        await self.set_offset(offset)
        await self.write_reg("NODE", node_id=node)
        await self.enable(pio=True, route=True)
        return entries

    async def pio_write(self, address_map, node, window, offset, data):
        """Write ``data`` into ``node``'s ``window`` (``"host"`` or ``("gpu", i)``) at ``offset``.

        Goes through the TCA BAR; return the bus address written.
        """
        if self.tca_bar is None:
            raise ValueError("this Driver has no tca_bar; pass it to Driver(bar0, tca_bar)")
        base, size = address_map.window(node, window)
        data = bytes(data)
        if offset < 0 or offset + len(data) > size:
            raise ValueError(f"{len(data)} bytes at offset {offset:#x} do not fit the "
                             f"{size:#x}-byte {window} window of node {node}")
        address = base + offset
        await self.tca_bar.write(address - address_map.tca_base, data)
        return address

    # -- counters and interrupts ------------------------------------------------------------------

    async def counters(self, port=None):
        """Return ``{reason: count}`` of ``port``, or ``{port: {reason: count}}`` of every port.

        Counts are read one by one while traffic may run, so they are not one snapshot.
        """
        reg = self.regmap["COUNT"]
        ports, reasons = reg.index_names
        if port is None:
            return {p: await self.counters(p) for p in ports}
        p = port_number(port)
        out = {}
        for r, reason in enumerate(reasons):
            if reason:
                out[reason] = await self.read_reg("COUNT", (p, r))
        return out

    async def clear_counters(self):
        """Zero every counter; return once the chip has done it.

        The clear is a posted write; a read of the same BAR behind it cannot pass it (PCIe
        ordering), so when the read completes the counters are zero.
        """
        await self.write_reg("COUNTER_CLEAR", clear=1)
        await self.read_reg("ID")

    async def msi(self, vector):
        """Make the chip send MSI ``vector`` to its host."""
        await self.write_reg("MSI", vector=vector)

    # -- inline puts (docs/put.md) -----------------------------------------------------------------

    async def put(self, dst, data, *, seq_addr=None, seq_value=0, irq=False, slot=0):
        """Send an inline put: ``data`` (1 .. 32 bytes) to TCA address ``dst``, then with
        ``seq_addr`` the 4-byte completion write of ``seq_value``, then with ``irq`` an MSI.

        One 64-byte write into put slot ``slot`` (0 .. 63) of BAR 4; every slot feeds the same
        queue.  The chip refuses a put that crosses a 4 KiB boundary (PUT_STATUS): split it.
        """
        if self.put_bar is None:
            raise ValueError("this Driver has no put_bar; pass it to Driver(bar0, put_bar=...)")
        if not 0 <= slot < PUT_WINDOW // PUT_BYTES:
            raise ValueError(f"put slot {slot} is not 0 .. {PUT_WINDOW // PUT_BYTES - 1}")
        check_u64("dst", dst)
        if seq_addr is not None:
            check_u64("seq_addr", seq_addr)
        raw = pack_put(dst=dst, data=data, seq_addr=seq_addr, seq_value=seq_value, irq=irq)
        await self.put_bar.write(slot * PUT_BYTES, raw)

    async def put_status(self):
        """Return PUT_STATUS's fields: ``level`` (puts queued), ``error`` (the last refusal's
        PutError code), ``refused`` (since :meth:`put_clear`)."""
        return await self.read_fields("PUT_STATUS")

    async def put_check(self):
        """Raise :class:`PutFault` if the chip refused a put since :meth:`put_clear`."""
        st = await self.put_status()
        if st["refused"]:
            raise PutFault(PutError(st["error"]), st["refused"])

    async def put_done(self):
        """Return PUT_DONE: puts sent since reset (a wrapping 32-bit count)."""
        return await self.read_reg("PUT_DONE")

    async def put_clear(self):
        """Clear PUT_STATUS.error and .refused."""
        await self.write_reg("PUT_CLEAR", clear=1)

    async def put_set_vector(self, vector):
        """Set the MSI vector of puts sent with ``irq``."""
        await self.write_reg("PUT_CFG", msi_vector=vector)
