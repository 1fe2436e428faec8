"""The DMA controller: four chaining channels, register mode, block-stride (002 section 3.4).

"A DMA controller with chaining DMA: descriptors giving source and destination PCIe addresses and
the size, prepared in host memory and linked by pointers; registering the head address runs the
DMAs one after the other, which raises the efficiency of runs of small transfers.  Because
fetching descriptors costs time, a few DMAs can also be issued lightly by setting control
registers.  Each DMA request can ask for a block-stride transfer" (002 section 3.4).  Both the
source and the destination are PCIe addresses (002 section 4.1); only RDMA write leaves the node
(000 section 2.2).  ``docs/dma.md`` is the user's description (with the pipeline and the channel
state machine drawn); the register map is in ``rtl/csr/regmap.py``.

One engine shared by the four channels, of four blocks joined here::

    CSR --> Planner --issue--> Booking --o_rd--> (N)
              |  ^               | tag table
        entry |  | nxt           v
              v  +----------- Receiver <--i_cpl-- (N)
            queue                | bank writes
              |                  v
              +----------> Writer <-- buffer rows --> o_wr (crossbar)
                             | release (tags, rows, credits) --> Booking
                             | fail, count, retire --> Planner

:class:`~peach2.dma.planner.Planner`
    The channels, round robin, CALC/ACT, chunking; decides each read and queue entry.
:class:`~peach2.dma.booking.Booking`
    Tags, buffer rows and completion credits; the read requests out.
:class:`~peach2.dma.receiver.Receiver`
    Completions checked and written into the buffer (or a channel's descriptor ring).
:class:`~peach2.dma.descring.DescRing`
    The channels' descriptor rings (descriptors fetched in blocks) and staging registers.
:class:`~peach2.dma.writer.Writer`
    The queue in order into memory writes, completion writes and the channels' counters.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..params import DEFAULT_DMA_BUFFER, DEFAULT_DMA_TAGS, N_DMA_CHANNELS
from ..router.common import RouteEntry
from ..signatures import DmaControlSignature
from ..tlp.stream import TLPStream
from .booking import Booking
from .common import DMA_CONFIG, ceil_log2, entry_layout, field
from .descring import DescRing
from .planner import Planner
from .receiver import Receiver
from .writer import Writer

__all__ = ["DMA"]


class DMA(wiring.Component):
    """DMA controller (see the module docstring and ``docs/dma.md``).

    Parameters
    ----------
    n_routes : int
        Route table entries (the router's table; DMA writes are routed with it).
    n_tags : int
        Reads outstanding at most (a power of two, 32..128).
    buffer_bytes : int
        Completion buffer (a power of two, at least ``n_tags`` rows of 16 bytes and 1 KiB).

    Members
    -------
    o_rd : Out(TLPStream())
        Read requests (single-beat MRd), all bound for port N.
    o_wr : Out(TLPStream()) ; o_wr_dest : Out(6)
        Memory writes with their one-hot crossbar output (bit order of the router's OUTPUTS).
    i_cpl : In(TLPStream())
        Completions arriving on port N.  Always ready.
    routes, node_offset
        The route table and the node offset (the N-bound writes are translated here).
    route_down : In(n_routes)
        Per route entry: its port's link is down (a write routed there ends its channel with
        DST_LINK_DOWN).
    requester_id : In(16)
        The chip's bus/device/function on N.
    dma_config ... ch_desc_addr_hi
        The members of :class:`~peach2.signatures.DmaControlSignature`, flipped, flat (the top
        joins them to the register block's ``dma`` with one ``connect``):
    dma_config, dma_timeout : In(32)
        The registers of the same names.
    ch_head_lo, ch_head_hi, ch_cfg : In(ArrayLayout(32, 4))
    ch_ctrl_stb : In(ArrayLayout(1, 4)) ; ch_ctrl_data : In(32)
    slots : In(ArrayLayout(Descriptor, 16))
        Register-mode slot ``4 * c + s``.
    slot_held : Out(16) ; slot_refused : In(ArrayLayout(1, 4))
        The slots the channels hold (a write to one is dropped), and per channel a strobe when
        one was.
    ch_status, ch_desc_done, ch_bytes_lo, ch_bytes_hi, ch_desc_addr_lo, ch_desc_addr_hi
        : Out(ArrayLayout(32, 4)) -- the status registers.
    cpl_space : In(20)
        The N hard IP's completion buffer (``ko_cpl_spc_vc0``): header credits in [7:0], data
        credits of 16 bytes in [19:8]; 0 means no limit.  The hard IP advertises infinite
        completion credits, so the DMA keeps the completions of its outstanding reads within
        this space, counting each read at its worst split (a completion at every 64-byte
        boundary), from its issue until its tag is freed.
    msi_req : Out(4)
        One-cycle strobe per channel when a descriptor with ``irq`` is done.
    unexpected_cpl : Out(1)
        One-cycle strobe per completion that matched no outstanding read (dropped), unless
        poisoned.
    poisoned_cpl : Out(1)
        One-cycle strobe per poisoned completion (counted as POISONED on port N, as the router
        counts poisoned TLPs; one that answers a read also fails it with CPL_POISONED).
    """

    def __init__(self, *, n_routes=8, n_tags=DEFAULT_DMA_TAGS, buffer_bytes=DEFAULT_DMA_BUFFER):
        if n_tags not in (32, 64, 128):
            raise ValueError(f"n_tags must be 32, 64 or 128, not {n_tags}")
        if buffer_bytes & (buffer_bytes - 1) or buffer_bytes < max(1024, 16 * n_tags):
            raise ValueError(f"buffer_bytes must be a power of two of at least 1 KiB, not "
                             f"{buffer_bytes}")
        self.n_routes = n_routes
        self.n_tags = n_tags
        self.buffer_bytes = buffer_bytes
        super().__init__({
            "o_rd":            Out(TLPStream()),
            "o_wr":            Out(TLPStream()),
            "o_wr_dest":       Out(6),
            "i_cpl":           In(TLPStream()),
            "routes":          In(data.ArrayLayout(RouteEntry, n_routes)),
            "route_down":      In(n_routes),
            "node_offset":     In(64),
            "requester_id":    In(16),
            # dma_config ... ch_desc_addr_hi: the register block's boundary, flat.
            **DmaControlSignature().flip().members,
            "cpl_space":       In(20),
            "msi_req":         Out(N_DMA_CHANNELS),
            "unexpected_cpl":  Out(1),
            "poisoned_cpl":    Out(1),
        })

    # ---------------------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        NT = self.n_tags
        ROWS = self.buffer_bytes // 16
        TB, RB = ceil_log2(NT), ceil_log2(ROWS)

        # -- configuration ------------------------------------------------------------------
        mps_code = Signal(2)
        mrrs_code = Signal(2)
        ext_tags = Signal()
        cfg_mps = field(self.dma_config, "mps", DMA_CONFIG)
        cfg_mrrs = field(self.dma_config, "mrrs", DMA_CONFIG)
        m.d.sync += [
            mps_code.eq(Mux(cfg_mps == 3, 2, cfg_mps)),
            mrrs_code.eq(Mux(cfg_mrrs == 3, 2, cfg_mrrs)),
            ext_tags.eq(field(self.dma_config, "ext_tags", DMA_CONFIG)),
        ]
        # The sizes as registers (DMA_CONFIG changes only while every channel is idle).
        mps = Signal(10)      # bytes
        mrrs_m1 = Signal(10)  # MRRS - 1 (all ones below MRRS)
        min_code = Mux(mps_code < mrrs_code, mps_code, mrrs_code)
        min_mask = Signal(10)   # min(mps, mrrs) - 1
        m.d.sync += [mps.eq(Const(128, 10) << mps_code),
                     mrrs_m1.eq(Cat(Const(0x7F, 7), mrrs_code > 0, mrrs_code > 1, 0)),
                     min_mask.eq((Const(128, 10) << min_code) - 1)]

        # -- the blocks ---------------------------------------------------------------------
        m.submodules.planner = pl = Planner(n_tags=NT, rows=ROWS)
        m.submodules.booking = bk = Booking(n_tags=NT, rows=ROWS)
        m.submodules.receiver = rx = Receiver(n_tags=NT, rows=ROWS)
        m.submodules.writer = wr = Writer(n_tags=NT, rows=ROWS, n_routes=self.n_routes)

        # The in-order queue, planner to writer.  Deep enough for every tag to be outstanding
        # with room to spare: each read is one entry, and descriptor marks and fetches sit
        # between them.  A read's entry gets its tag and first row as it enters.
        entry = entry_layout(TB, RB)
        m.submodules.queue = queue = SyncFIFOBuffered(width=entry.size, depth=2 * NT)
        q_w = data.View(entry, queue.w_data)
        m.d.comb += [queue.w_en.eq(pl.o_entry.valid), q_w.eq(pl.o_entry.payload),
                     q_w.tag.eq(bk.next_tag), q_w.base.eq(bk.next_row),
                     pl.queue_level.eq(queue.level),
                     wr.i_entry.valid.eq(queue.r_rdy), wr.i_entry.payload.eq(queue.r_data),
                     queue.r_en.eq(wr.i_entry.ready)]

        # The completion buffer: four 32-bit banks of ROWS rows, written by the receiver (a DW
        # lands in any bank), read by the writer (two rows at once, for the byte shifter).
        rd0, rd1 = [], []
        for j in range(4):
            mem = Memory(shape=32, depth=ROWS, init=[])
            m.submodules[f"cbuf{j}"] = mem
            wp, rp0, rp1 = mem.write_port(), mem.read_port(), mem.read_port()
            m.d.comb += [wp.addr.eq(rx.o_bank[j].addr), wp.data.eq(rx.o_bank[j].data),
                         wp.en.eq(rx.o_bank[j].en),
                         rp0.addr.eq(wr.rd_row0), rp1.addr.eq(wr.rd_row1), rp0.en.eq(1),
                         rp1.en.eq(1)]
            rd0.append(rp0.data)
            rd1.append(rp1.data)
        m.d.comb += [wr.rd_data0.eq(Cat(*rd0)), wr.rd_data1.eq(Cat(*rd1))]

        # -- planner ------------------------------------------------------------------------
        m.d.comb += [
            pl.mrrs_m1.eq(mrrs_m1), pl.min_mask.eq(min_mask),
            pl.ch_head_lo.eq(self.ch_head_lo), pl.ch_head_hi.eq(self.ch_head_hi),
            pl.ch_ctrl_stb.eq(self.ch_ctrl_stb), pl.ch_ctrl_data.eq(self.ch_ctrl_data),
            pl.slots.eq(self.slots), pl.slot_refused.eq(self.slot_refused),
            self.slot_held.eq(pl.slot_held),
            self.ch_status.eq(pl.ch_status), self.ch_desc_done.eq(pl.ch_desc_done),
            self.ch_bytes_lo.eq(pl.ch_bytes_lo), self.ch_bytes_hi.eq(pl.ch_bytes_hi),
            self.ch_desc_addr_lo.eq(pl.ch_desc_addr_lo),
            self.ch_desc_addr_hi.eq(pl.ch_desc_addr_hi), self.msi_req.eq(pl.msi_req),
        ]

        # -- booking ------------------------------------------------------------------------
        m.d.comb += [
            bk.issue.eq(pl.issue), bk.release.eq(wr.release), bk.ext_tags.eq(ext_tags),
            bk.requester_id.eq(self.requester_id), bk.cpl_space.eq(self.cpl_space),
            bk.tag_addr.eq(rx.tag_addr),
        ]
        wiring.connect(m, bk.o_rd, wiring.flipped(self.o_rd))
        wiring.connect(m, bk.room, pl.room)

        # -- completion receiver (always ready: completion credits are infinite) ------------
        m.d.comb += [
            rx.i_cpl.valid.eq(self.i_cpl.valid), rx.i_cpl.p.eq(self.i_cpl.p),
            self.i_cpl.ready.eq(1),
            rx.ext_tags.eq(ext_tags), rx.head_seq.eq(bk.head_seq),
            rx.outstanding.eq(bk.room.outstanding), rx.tag_info.eq(bk.tag_info),
            rx.clear_en.eq(pl.issue.en), rx.clear_tag.eq(bk.next_tag),
            rx.abort.eq(pl.abort),
            self.unexpected_cpl.eq(rx.unexpected_cpl), self.poisoned_cpl.eq(rx.poisoned_cpl),
        ]

        # -- writer -------------------------------------------------------------------------
        m.d.comb += [
            wr.done.eq(rx.done), wr.bad.eq(rx.bad), wr.err.eq(rx.err), wr.landed.eq(rx.landed),
            wr.mps.eq(mps), wr.abort.eq(pl.abort), wr.unroutable.eq(pl.unroutable),
            wr.dma_timeout.eq(self.dma_timeout), wr.routes.eq(self.routes),
            wr.route_down.eq(self.route_down),
            wr.node_offset.eq(self.node_offset), wr.requester_id.eq(self.requester_id),
            self.o_wr_dest.eq(wr.o_wr_dest),
        ]
        wiring.connect(m, wr.o_wr, wiring.flipped(self.o_wr))
        wiring.connect(m, wr.report, pl.report)
        # -- descriptor rings ---------------------------------------------------------------
        m.submodules.rings = rings = DescRing()
        m.d.comb += [rings.i_w.eq(rx.o_ring), rings.i_done.eq(rx.o_ring_done),
                     rings.mrrs_m1.eq(mrrs_m1), rings.min_mask.eq(min_mask)]
        wiring.connect(m, rings.ring, pl.ring)
        return m
