"""The DMA controller: four chaining channels, register mode, block-stride (002 section 3.4).

"A DMA controller with chaining DMA: descriptors giving source and destination PCIe addresses and
the size, prepared in host memory and linked by pointers; registering the head address runs the
DMAs one after the other, which raises the efficiency of runs of small transfers.  Because
fetching descriptors costs time, a few DMAs can also be issued lightly by setting control
registers.  Each DMA request can ask for a block-stride transfer" (002 section 3.4).  Both the
source and the destination are PCIe addresses (002 section 4.1); only RDMA write leaves the node
(000 section 2.2).  ``docs/dma.md`` is the user's description; the register map is in
``rtl/csr/regmap.py``.

Structure (one engine shared by the four channels):

planner
    Round robin over the channels.  Per action (two cycles): fetch a descriptor, load the next
    descriptor (from the prefetch buffer, or from the register-mode slots) and check it, cut the
    next read request off the current burst, or close a descriptor (a *mark*: completion write,
    MSI, counters).  Every read takes a tag and reserves its rows in the completion buffer before
    it is issued; every action pushes one entry into the in-order queue.  CALC works out the
    action (from each channel's own registers, then the selected one's), the chunk (the least
    of four candidates, as a 2-bit index from six carry-chain compares), its credits, the rest
    of the burst after it and the channel's next state, all into registers; ACT only adds and
    enables: the read's and the entry's fields are written whatever the room checks say, which
    decide only whether they count.  Faults stop a channel at once and are recorded a cycle
    later.
completion receiver
    Completions from port N, matched by tag against the window of outstanding reads; their data
    is written into the reserved rows at the offset the byte count gives (any split, any order
    across tags).  Four 32-bit banks, so a beat lands at any DW offset in one cycle.  Five
    stages: the beat and the tag's table entry; the tag's state (done bit, DWs received) and
    what the header and the entry give alone (the byte offset, the read's DWs less the
    completion's length); the placement and its checks (against the read, against the DWs
    received, with what the next two stages changed meanwhile forwarded); the decision (dropped,
    failed, or good: the DWs received advanced); the bank writes.  A descriptor fetch's data
    goes straight into its channel's prefetch buffer instead (it takes no rows), and the buffer
    is valid as soon as the fetch's last DW is in, so the planner loads the descriptor without
    waiting for the writer to reach the fetch in the queue.
writer
    Pops the queue in order, through a skid register (read whenever it is empty), into a head
    register (stage A0), which sees its read's done bit and error one cycle after the receiver
    sets them and lets the entry on once its data is in, failed or timed out.  Stage A1 splits it
    from registers only: a read whose data is complete becomes memory writes (split at the max
    payload size on destination boundaries), which read the buffer through a byte shifter
    (source to destination alignment), are routed by the route table (stage A', lookup and the
    N-bound translation registered before the header is built) and enter the crossbar.  A
    descriptor fetch only frees its tag here (or reports its fault, in queue order); marks
    become the completion write or a no-op that carries the counters.  A read's tag and rows are
    freed when its last write has read them, in issue order.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..csr.regmap import (DEFAULT_DMA_BUFFER, DEFAULT_DMA_TAGS, N_DMA_CHANNELS, N_DMA_SLOTS,
                          DmaError, RouteEntry)
from ..tlp.layouts import TLPHeader
from ..tlp.stream import TLPStream
from ..util import not_below
from .common import (CH_CTRL, CH_STATUS, DMA_CONFIG, Act, Chan, Kind, ceil_log2, entry_layout,
                     field, mem_header, select, tag_info_layout)
from .common import bits as _bits
from .descriptor import CONTROL_RESERVED, MAGIC, Descriptor
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
    requester_id : In(16)
        The chip's bus/device/function on N.
    dma_config, dma_timeout : In(32)
        The registers of the same names.
    ch_head_lo, ch_head_hi, ch_cfg : In(ArrayLayout(32, 4))
    ch_ctrl_stb : In(ArrayLayout(1, 4)) ; ch_ctrl_data : In(32)
    slots : In(ArrayLayout(Descriptor, 16))
        Register-mode slot ``4 * c + s``.
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
        arr = data.ArrayLayout(32, N_DMA_CHANNELS)
        super().__init__({
            "o_rd":            Out(TLPStream()),
            "o_wr":            Out(TLPStream()),
            "o_wr_dest":       Out(6),
            "i_cpl":           In(TLPStream()),
            "routes":          In(data.ArrayLayout(RouteEntry, n_routes)),
            "node_offset":     In(64),
            "requester_id":    In(16),
            "dma_config":      In(32),
            "dma_timeout":     In(32),
            "ch_head_lo":      In(arr),
            "ch_head_hi":      In(arr),
            "ch_cfg":          In(arr),
            "ch_ctrl_stb":     In(data.ArrayLayout(1, N_DMA_CHANNELS)),
            "ch_ctrl_data":    In(32),
            "slots":           In(data.ArrayLayout(Descriptor, N_DMA_CHANNELS * N_DMA_SLOTS)),
            "ch_status":       Out(arr),
            "ch_desc_done":    Out(arr),
            "ch_bytes_lo":     Out(arr),
            "ch_bytes_hi":     Out(arr),
            "ch_desc_addr_lo": Out(arr),
            "ch_desc_addr_hi": Out(arr),
            "cpl_space":       In(20),
            "msi_req":         Out(N_DMA_CHANNELS),
            "unexpected_cpl":  Out(1),
            "poisoned_cpl":    Out(1),
        })

    # ---------------------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        NC = N_DMA_CHANNELS
        NT = self.n_tags
        TB = ceil_log2(NT)
        ROWS = self.buffer_bytes // 16
        RB = ceil_log2(ROWS)

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

        # -- shared tag and row bookkeeping -------------------------------------------------
        issue_seq = Signal(16)          # reads issued
        head_seq = Signal(16)           # reads released (in issue order)
        tail_row = Signal(RB)           # next free row
        free_rows = Signal(RB + 1, init=ROWS)
        outstanding = Signal(range(NT + 1))     # issue_seq - head_seq, kept as a register
        tag_limit = Mux(ext_tags, NT, min(NT, 32))

        # The hard IP's completion buffer: credits held by outstanding reads.
        used_hdr = Signal(9)
        used_dat = Signal(13)
        lim_hdr = Signal(9)
        lim_dat = Signal(13)
        m.d.sync += [lim_hdr.eq(self.cpl_space[:8]), lim_dat.eq(self.cpl_space[8:20])]

        # Per tag: static facts written at issue, read by the receiver.
        m.submodules.taginfo = taginfo = Memory(shape=tag_info_layout(RB), depth=NT, init=[])
        ti_w = taginfo.write_port()
        ti_r = taginfo.read_port()
        # The receiver keeps each tag's state (done, error, DWs received) and the prefetch
        # buffers; the writer pops the queue into writes and reports back.
        m.submodules.receiver = rx = Receiver(n_tags=NT, rows=ROWS)
        m.submodules.writer = wr = Writer(n_tags=NT, rows=ROWS, n_routes=self.n_routes)

        # Releases: registered by the writer's beat generator (a read's tag, rows and credits
        # come back a cycle after its last write has read them).
        rel_en, rel_rows, rel_hdr, rel_dat = (wr.release.en, wr.release.rows, wr.release.hdr,
                                              wr.release.dat)
        # Issues: the planner decides one in ACT into these registers; it is booked in the next
        # cycle, from them alone (off the decision's path): the tag's table entry and state, the
        # read request, its queue entry and the counters below.  The planner's next action, two
        # cycles after the decision, is the first to look at the counters.
        d_iss = Signal()
        d_raddr = Signal(64)
        d_nbytes = Signal(10)
        d_fetch = Signal()
        d_chan = Signal(2)
        d_rows = Signal(RB + 1)
        d_hdr = Signal(5)
        d_dat = Signal(7)
        m.d.sync += d_iss.eq(0)
        # Rows and credits come back through an accumulator: a cycle that books an issue adds
        # the release to it, any other cycle hands the accumulator back and restarts it with
        # the release.  Issues are booked at most every other cycle (one per planner action),
        # so a release waits at most two cycles, and every update is a two-input add.
        acc_rows = Signal(RB + 1)
        acc_hdr = Signal(9)
        acc_dat = Signal(13)
        rel_now = [Mux(rel_en, v, 0) for v in (rel_rows, rel_hdr, rel_dat)]
        with m.If(d_iss):
            m.d.sync += [
                issue_seq.eq(issue_seq + 1), tail_row.eq(tail_row + d_rows),
                free_rows.eq(free_rows - d_rows), used_hdr.eq(used_hdr + d_hdr),
                used_dat.eq(used_dat + d_dat),
            ]
            m.d.sync += [acc.eq(acc + v) for acc, v in zip((acc_rows, acc_hdr, acc_dat), rel_now)]
        with m.Else():
            m.d.sync += [free_rows.eq(free_rows + acc_rows), used_hdr.eq(used_hdr - acc_hdr),
                         used_dat.eq(used_dat - acc_dat)]
            m.d.sync += [acc.eq(v) for acc, v in zip((acc_rows, acc_hdr, acc_dat), rel_now)]
        with m.If(rel_en):
            m.d.sync += head_seq.eq(head_seq + 1)
        m.d.sync += outstanding.eq(outstanding + d_iss - rel_en)

        # -- the completion buffer: four 32-bit banks of ROWS rows ---------------------------
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

        # -- channels -----------------------------------------------------------------------
        def per_chan(name, shape, **kw):
            return Array([Signal(shape, name=f"ch{c}_{name}", **kw) for c in range(NC)])

        st = per_chan("state", Chan)
        ch_err = per_chan("err", 4)
        abort = per_chan("abort", 1)
        ignored = per_chan("ignored", 1)
        cur = per_chan("cur", Descriptor)
        cur_addr = per_chan("cur_addr", 64)
        cur_src = per_chan("src", 64)
        cur_dst = per_chan("dst", 64)
        brem_m1 = per_chan("brem_m1", 32)   # bytes left in the current burst, minus 1
        bbig = per_chan("bbig", 1)          # brem_m1 >= 4096 (kept with it: no wide OR in CALC)
        lbig = per_chan("lbig", 1)          # the descriptor's length - 1 >= 4096
        # Whether the current descriptor is the chain's last (the end bit, or the last
        # register-mode slot), registered: it is looked at by a mark, two cycles or more after
        # the load or the start that changed it.
        last_pre = per_chan("last_pre", 1)
        sgap1 = per_chan("sgap1", 33)       # the source and destination gaps, plus 1
        dgap1 = per_chan("dgap1", 33)
        bleft = per_chan("bleft", 32)       # bursts left, the current one included
        blnz = per_chan("blnz", 1)          # bleft != 0 (kept with it: no wide OR in CALC)
        nxt = Array([rx.nxt[c] for c in range(NC)])
        nxt_valid = Array([rx.nxt_valid[c] for c in range(NC)])
        nxt_clear = Signal(NC)      # the prefetch buffer restarts (the receiver's set wins)
        nxt_ptr = per_chan("nxt_ptr", 64)   # pointer the prefetch buffer was (is) fetched from
        fetched = per_chan("fetched", 1)    # the next descriptor's fetch was issued
        regmode = per_chan("regmode", 1)
        slot = per_chan("slot", 3)
        nslots = per_chan("nslots", 3)
        pending = per_chan("pending", 8)    # queue entries not yet retired
        desc_done = per_chan("desc_done", 32)
        nbytes = per_chan("bytes", 64)

        fault_addr = per_chan("fault_addr", 64)
        unroutable = per_chan("unroutable", 1)   # the writer dropped a write: drop the rest

        # A fault stops its channel at once (``abort``); its code and descriptor are recorded
        # a cycle later from registers (the first error wins), so no fault's conditions reach
        # the status registers in the same cycle.
        f_en = per_chan("f_en", 1)
        f_code = per_chan("f_code", 4)
        f_addr = per_chan("f_addr", 64)
        for c in range(NC):
            m.d.sync += f_en[c].eq(0)
            with m.If(f_en[c] & (ch_err[c] == 0)):
                m.d.sync += [ch_err[c].eq(f_code[c]), fault_addr[c].eq(f_addr[c])]

        def fail(c, code, addr):
            """Stop channel ``c`` with ``code``, blaming descriptor ``addr``."""
            m.d.sync += [abort[c].eq(1), f_en[c].eq(1), f_code[c].eq(code), f_addr[c].eq(addr)]

        # Pending: +1 per entry pushed (planner, as it enters the queue), -1 per entry retired
        # (output stage, registered there).
        pq_en = Signal()                # the planner's queue entry ``pq`` enters the queue now
        pq_chan = Signal(2)
        ret_c = wr.retire.chan
        ret_en = wr.retire.en
        for c in range(NC):
            inc = pq_en & (pq_chan == c)
            dec = ret_en & (ret_c == c)
            m.d.sync += pending[c].eq(pending[c] + inc - dec)

        # Status outputs.
        st_fields = CH_STATUS
        for c in range(NC):
            status = Signal(32)
            m.d.comb += [
                status[st_fields["busy"].lsb].eq(st[c] != Chan.IDLE),
                status[st_fields["start_ignored"].lsb].eq(ignored[c]),
                status[st_fields["error"].lsb:][:4].eq(ch_err[c]),
                self.ch_status[c].eq(status),
                self.ch_desc_done[c].eq(desc_done[c]),
                self.ch_bytes_lo[c].eq(nbytes[c][:32]),
                self.ch_bytes_hi[c].eq(nbytes[c][32:]),
                self.ch_desc_addr_lo[c].eq(Mux(ch_err[c] != 0, fault_addr[c], cur_addr[c])[:32]),
                self.ch_desc_addr_hi[c].eq(Mux(ch_err[c] != 0, fault_addr[c], cur_addr[c])[32:]),
            ]

        # Control writes: start, register-mode start, abort.
        for c in range(NC):
            m.d.sync += last_pre[c].eq(Mux(regmode[c], slot[c] + 1 >= nslots[c],
                                           _bits(cur[c].control, "end")))
        ctrl = self.ch_ctrl_data
        for c in range(NC):
            with m.If(self.ch_ctrl_stb[c]):
                start = field(ctrl, "start", CH_CTRL)
                rstart = field(ctrl, "reg_start", CH_CTRL)
                n = field(ctrl, "slots", CH_CTRL)
                with m.If(field(ctrl, "abort", CH_CTRL) & (st[c] != Chan.IDLE)):
                    fail(c, DmaError.ABORTED, cur_addr[c])
                with m.Elif((start | rstart) & (st[c] != Chan.IDLE)):
                    m.d.sync += ignored[c].eq(1)
                with m.Elif(start | rstart):
                    head = Cat(self.ch_head_lo[c], self.ch_head_hi[c])
                    m.d.sync += [
                        ignored[c].eq(0), ch_err[c].eq(0), abort[c].eq(0), unroutable[c].eq(0),
                        desc_done[c].eq(0), nbytes[c].eq(0),
                        regmode[c].eq(~start), slot[c].eq(0), nslots[c].eq(n),
                        nxt_ptr[c].eq(head), cur_addr[c].eq(head & ~0x1f),
                        fetched[c].eq(0),
                    ]
                    m.d.comb += nxt_clear[c].eq(1)
                    with m.If(start):
                        m.d.sync += st[c].eq(Chan.HEAD)
                    with m.Elif((n == 0) | (n > N_DMA_SLOTS)):
                        m.d.sync += [st[c].eq(Chan.DRAIN), ch_err[c].eq(DmaError.DESC_MALFORMED),
                                     abort[c].eq(1), cur_addr[c].eq(0), fault_addr[c].eq(0)]
                    with m.Else():
                        m.d.sync += [st[c].eq(Chan.WAIT), cur_addr[c].eq(0)]

        # -- the in-order queue -------------------------------------------------------------
        Entry = entry_layout(TB, RB)
        # Deep enough for every tag to be outstanding with room to spare: each read is one
        # entry, and descriptor marks and fetches sit between them.
        QD = 2 * NT
        m.submodules.queue = queue = SyncFIFOBuffered(width=Entry.size, depth=QD)
        q_w = data.View(Entry, queue.w_data)
        q_r = data.View(Entry, queue.r_data)
        # The planner's entry, decided in ACT and registered (fields its kind does not use keep
        # older values), enters the queue in the next cycle; a read's tag and first row are
        # filled in then.
        pq = Signal(Entry)
        m.d.sync += pq_en.eq(0)
        m.d.comb += [pq_chan.eq(pq.chan), queue.w_en.eq(pq_en), q_w.eq(pq),
                     q_w.tag.eq(issue_seq[:TB]), q_w.base.eq(tail_row)]

        # -- read requests out (single-beat MRd) ---------------------------------------------
        rd = self.o_rd
        rd_hdr = Signal(TLPHeader)
        # A skid register behind the output: the planner issues into the output register, or
        # into the skid when the output is held this cycle (the crossbar gave N to another
        # source), so a read held for a cycle or two costs no planner action.  At one read per
        # two cycles the planner matches the wire rate of 8-byte writes and could never win a
        # lost slot back.  The planner only looks at ``rd_skid_v`` (a register).
        rd_skid_v = Signal()
        rd_skid = Signal(TLPHeader)
        rd_new = Signal()               # an issue is booked this cycle (rd_hdr)
        rd_held = rd.valid & ~rd.ready
        m.d.sync += [rd.p.first.eq(1), rd.p.last.eq(1), rd.p.dw_en.eq(0), rd.p.data.eq(0)]
        with m.If(rd_held):
            with m.If(rd_new):
                m.d.sync += [rd_skid_v.eq(1), rd_skid.eq(rd_hdr)]
        with m.Elif(rd_skid_v):
            m.d.sync += [rd.valid.eq(1), rd.p.hdr.eq(rd_skid), rd_skid_v.eq(rd_new),
                         rd_skid.eq(rd_hdr)]
        with m.Else():
            m.d.sync += [rd.valid.eq(rd_new), rd.p.hdr.eq(rd_hdr)]

        # -- planner ------------------------------------------------------------------------
        sel = Signal(range(NC))
        last_sel = Signal(range(NC))
        c_st = st[sel]
        c_cur = cur[sel]
        c_src = cur_src[sel]
        c_dst = cur_dst[sel]
        c_brem_m1 = brem_m1[sel]

        # Channel wants: anything but IDLE; DRAIN finishes by itself below.
        wants = Signal(NC)
        drained = Signal(NC)
        for c in range(NC):
            m.d.comb += wants[c].eq((st[c] == Chan.HEAD) | (st[c] == Chan.RUN) |
                                    ((st[c] == Chan.WAIT) & (nxt_valid[c] | regmode[c])))
            # Done draining: nothing of the channel in the queue a cycle ago, nothing entering
            # it then (so nothing is in it now), and nothing entering it now.
            m.d.sync += drained[c].eq((pending[c] == 0) & ~(pq_en & (pq_chan == c)))
            with m.If((st[c] == Chan.DRAIN) & drained[c] & ~(pq_en & (pq_chan == c))):
                m.d.sync += st[c].eq(Chan.IDLE)
            with m.If(abort[c] & (st[c] != Chan.IDLE) & (st[c] != Chan.DRAIN)):
                m.d.sync += st[c].eq(Chan.DRAIN)

        # Chunk of the current burst (CALC): at most MRRS, within the source 4 KiB page, ending
        # on a destination min(MPS, MRRS) boundary where it can: the least of four candidates,
        # found by comparing every pair at once.  Each is held minus one, which needs no adder:
        # MRRS counts whole DWs (a read starting at source byte 1..3 of a DW is shorter), so
        # min(mrrs - (dst & min_mask), mrrs - src[:2]) - 1 is (mrrs - 1) ^ either (both below
        # mrrs); 4096 - src[:12] - 1 is ~src[:12]; and the burst's rest is kept minus one.
        cand = [Signal(12, name=n) for n in ("c_lim_dst", "c_lim_dw", "c_lim_src", "c_rem")]
        m.d.comb += [
            cand[0].eq(mrrs_m1 ^ (c_dst[:10] & min_mask)),
            cand[1].eq(mrrs_m1 ^ c_src[:2]),
            cand[2].eq(~c_src[:12]),
            cand[3].eq(c_brem_m1[:12]),
        ]
        # The six compares, kept as nets (the mapping otherwise spreads them over the picks
        # below and adds levels).  The rest >= 4 KiB loses every compare (``bbig``).
        le = {}
        for i, j in ((0, 1), (0, 2), (1, 2), (3, 0), (3, 1), (3, 2)):
            le[i, j] = Signal(name=f"c_le{i}{j}", attrs={"keep": 1})
            if i == 3:      # the rest, with bbig as its 13th bit: one chain
                m.d.comb += le[i, j].eq(not_below(Cat(cand[j], Const(0, 1)),
                                                  Cat(cand[3], bbig[sel])))
            else:
                m.d.comb += le[i, j].eq(not_below(cand[j], cand[i]))
        # The winner as a 2-bit index (0..2: the candidates above, 3: the rest of the burst,
        # which wins ties, so the chunk then ends the burst).  Each index bit is a function of
        # the six compares (one LUT), and each pick a 4:1 multiplexer (one more).
        win_r = le[3, 0] & le[3, 1] & le[3, 2]
        win_a = ~win_r & le[0, 1] & le[0, 2]
        win_b = ~win_r & ~win_a & le[1, 2]
        w_idx = Signal(2, attrs={"keep": 1})
        m.d.comb += w_idx.eq(Cat(win_r | win_b, win_r | (~win_a & ~win_b)))

        def pick_of(values):
            return select(values, w_idx)

        k_chunk = Signal(13)
        k_end = Signal()            # the chunk ends the burst
        # How far the source and destination move after the chunk (the gaps at a burst's end),
        # computed in CALC so the position update is one two-input add (a three-input add maps
        # to a LUT adder tree, not a carry chain).
        k_src_step = Signal(33)
        k_dst_step = Signal(33)
        k_rows = Signal(RB + 1)     # the chunk's buffer rows and completion credits
        k_hdr = Signal(5)
        k_dat = Signal(7)
        # What ACT does, one-hot, registered in CALC and held for ACT only (a channel stopped
        # by then does its action anyway: what it issues or pushes is dropped in the writer).
        k_do = {a: Signal(name=f"k_do_{a.name.lower()}") for a in Act if a != Act.NONE}
        m.d.sync += [v.eq(0) for v in k_do.values()]
        k_len_m1 = Signal(32)       # the descriptor's burst length less 1
        k_brem_next = Signal(32)    # the rest of the burst less 1 after the chunk (if not its end)
        k_bbig = Signal()           # the descriptor's burst length less 1 is 4096 or more
        k_bl_one = Signal()         # this burst is the last
        k_fetch_ok = Signal()       # room for a descriptor fetch (but the read-request skid)
        k_st_en = Signal()          # ACT changes the channel's state to k_st_new ...
        k_st_go = Signal()          # ... if its fetch is issued (else unconditionally)
        k_st_new = Signal(Chan)
        # Room in the queue for the entries of the next two actions, registered (the level
        # rises by at most one a cycle, so a cycle old it is one entry more conservative).
        q_room = Signal()
        m.d.sync += q_room.eq(queue.level < QD - 6)
        m.d.sync += [k_st_en.eq(0), k_st_go.eq(0)]
        # Room for one more queue entry and one more tag, as CALC sees it: the entry and the
        # issue ACT decided a cycle ago are entering the queue and being booked now.
        k_qroom = Signal()
        k_tags = Signal()

        tag_now = Mux(ext_tags, issue_seq[:8], issue_seq[:5])

        def cpl_credits(raddr, nbytes_m1):
            """Completion headers and data credits of a read of ``nbytes_m1 + 1`` bytes at its
            worst split."""
            hdrs = (Cat(raddr[:6], Const(1, 1)) + nbytes_m1) >> 6
            # Completions are split at 64-byte (hence 16-byte) aligned addresses, so their data
            # credits add up to at most the 16-byte blocks the read touches.
            dats = (Cat(raddr[:4], Const(1, 1)) + nbytes_m1) >> 4
            return hdrs[:5], dats[:7]

        # ACT issues a read only with room for it everywhere: queue, tag, read-request skid,
        # buffer rows, completion credits (the last three from this cycle's counters).
        hdr_free = Signal()         # no limit (0)
        dat_free = Signal()
        m.d.sync += [hdr_free.eq(self.cpl_space[:8] == 0), dat_free.eq(self.cpl_space[8:20] == 0)]
        # The credits left, as ACT will see them: registered in CALC from ``room_*`` (the
        # counters a cycle ago), less the issue booked in the last cycle or in this one (issues
        # are booked at most every other cycle, and ``d_hdr``, ``d_dat`` hold until the next).
        room_hdr = Signal(signed(10))
        room_dat = Signal(signed(14))
        k_room_hdr = Signal(signed(11))
        k_room_dat = Signal(signed(15))
        d_iss_q = Signal()
        m.d.sync += [room_hdr.eq(lim_hdr - used_hdr), room_dat.eq(lim_dat - used_dat),
                     d_iss_q.eq(d_iss)]
        unbooked = d_iss | d_iss_q
        def fits(need, room):       # need <= room, room signed (a negative room fits nothing)
            return ~room[-1] & not_below(room[:-1], need)
        go_read = (k_qroom & k_tags & ~rd_skid_v & not_below(free_rows, k_rows)
                   & (hdr_free | fits(k_hdr, k_room_hdr)) & (dat_free | fits(k_dat, k_room_dat)))
        # A descriptor fetch reads 32 or 64 aligned bytes: one completion, 2 or 4 data credits
        # (checked against 4 either way), no rows.
        go_fetch = k_fetch_ok & ~rd_skid_v

        def fetch_credits(ptr):
            return Const(1, 5), Mux(ptr[0], 4, 2)

        # The read's and the entry's fields are written whenever ACT does the action (they
        # depend on the action and the channel's registers only); whether the read is issued
        # and the entry enters the queue (``when``) is the only part that waits for the room
        # checks.  Fields a kind does not use are left as they were: the writer does not look
        # at them (and ``d_hdr``, ``d_dat`` change only in ACT, so the credits CALC takes off
        # for an unbooked issue are still that issue's).
        def issue_read(raddr, nbytes_, rows, kind, credits, when, **extra):
            """Decide a read (booked next cycle) and push its queue entry."""
            hdrs, dats = credits
            m.d.sync += [d_raddr.eq(raddr), d_nbytes.eq(nbytes_),
                         d_fetch.eq(kind == Kind.FETCH), d_chan.eq(sel), d_rows.eq(rows),
                         d_hdr.eq(hdrs), d_dat.eq(dats)]
            with m.If(when):
                m.d.sync += d_iss.eq(1)
            push(kind, when, rows=rows, src_lo=raddr[:2], nbytes=nbytes_[:10], chdr=hdrs,
                 cdat=dats, **extra)

        def push(kind, when, **fields):
            """Decide a queue entry of channel ``sel`` (it enters the queue next cycle)."""
            fields.setdefault("desc", cur_addr[sel])
            m.d.sync += [pq.kind.eq(kind), pq.chan.eq(sel)]
            for k, v in fields.items():
                m.d.sync += getattr(pq, k).eq(v)
            with m.If(when):
                m.d.sync += pq_en.eq(1)

        # Booking an issue: the tag is the next in issue order, its rows the next free ones.
        m.d.comb += [
            rd_new.eq(d_iss),
            rd_hdr.eq(mem_header(d_raddr, d_nbytes, tag_now, self.requester_id, write=False)),
            ti_w.en.eq(d_iss), ti_w.addr.eq(issue_seq[:TB]),
            ti_w.data.base.eq(tail_row), ti_w.data.src_lo.eq(d_raddr[:2]),
            ti_w.data.nbytes.eq(d_nbytes), ti_w.data.chan.eq(d_chan),
            ti_w.data.fetch.eq(d_fetch),
        ]
        m.d.comb += [rx.clear_en.eq(d_iss), rx.clear_tag.eq(issue_seq[:TB])]

        def rows_for(lo, nb_m1):
            """Buffer rows of a read of ``nb_m1 + 1`` bytes from byte ``lo`` of a DW."""
            return (Cat(lo, Const(0, 2), Const(1, 1)) + nb_m1) >> 4

        # Round robin: the first wanting channel after the last one served.
        found = Const(0, 1)
        pick = Signal(range(NC))
        for k in reversed(range(2 * NC)):
            c = k % NC
            cond = wants[c] & ((k >= NC) | (c > last_sel))
            with m.If(cond):
                m.d.comb += pick.eq(c)
            found = found | cond

        ld, ld_bad, ld_ok, ld_big, (ok_now, bad_now) = self._load_calc(
            m, sel, nxt, nxt_valid, nxt_ptr, regmode, slot)

        with m.FSM(name="planner"):
            with m.State("SEL"):
                with m.If(found):
                    m.d.sync += [sel.eq(pick), last_sel.eq(pick)]
                    m.next = "CALC"

            with m.State("CALC"):
                # What ACT will do, and everything it needs that does not change meanwhile (only
                # the channel's own ACT changes its registers; an abort is looked at here).
                # The next descriptor is prefetched before the current one's reads (002 3.4).
                d_hdrs, d_dats = zip(*[cpl_credits(c_src, v) for v in cand])
                # Each channel's action from its own registers, then the selected one's (so the
                # channel multiplexer comes last).
                acts = []
                for c in range(NC):
                    need_pf = ~_bits(cur[c].control, "end") & ~fetched[c] & ~regmode[c]
                    act_c = Signal(Act, name=f"ch{c}_act")
                    with m.Switch(st[c]):
                        with m.Case(Chan.HEAD):
                            m.d.comb += act_c.eq(Act.HEAD)
                        with m.Case(Chan.WAIT):
                            m.d.comb += act_c.eq(Act.LOAD)
                        with m.Case(Chan.RUN):
                            with m.If(need_pf):
                                m.d.comb += act_c.eq(Act.PF)
                            with m.Elif(blnz[c]):
                                m.d.comb += act_c.eq(Act.DATA)
                            with m.Else():
                                m.d.comb += act_c.eq(Act.MARK)
                        with m.Default():
                            m.d.comb += act_c.eq(Act.NONE)
                    act_g = Signal(Act, name=f"ch{c}_act_go", attrs={"keep": 1})
                    m.d.comb += act_g.eq(Mux(abort[c], Act.NONE, act_c))
                    acts.append(act_g)
                act = Signal(Act)
                m.d.comb += act.eq(select(acts, sel))
                m.d.sync += [v.eq(act == a) for a, v in k_do.items()]
                last_now = last_pre[sel]
                tags_now = Mux(d_iss, outstanding + 1 < tag_limit, outstanding < tag_limit)
                room_hdr_now = Signal(signed(11))
                room_dat_now = Signal(signed(15))
                m.d.comb += [room_hdr_now.eq(room_hdr - Mux(unbooked, d_hdr, 0)),
                             room_dat_now.eq(room_dat - Mux(unbooked, d_dat, 0))]
                # Every candidate's sums are made at once and picked with the winner's index: no
                # adder after the compares.
                cand1 = [v + 1 for v in cand]
                m.d.sync += [
                    k_chunk.eq(pick_of(cand1)), k_end.eq(win_r),
                    k_len_m1.eq(c_cur.length - 1),
                    k_bl_one.eq(bleft[sel] == 1),
                    k_bbig.eq(lbig[sel]),
                    # The rest after each candidate: brem_m1 - (cand + 1) is brem_m1 + ~cand in
                    # 32 bits, one two-input add.
                    k_brem_next.eq(pick_of([(c_brem_m1 + Cat(~v, Const(0xFFFFF, 20)))[:32]
                                            for v in cand[:3]] + [0])),
                    # At a burst's end the rest is the chunk: step over it and the gap.
                    k_src_step.eq(pick_of(cand1[:3] + [c_brem_m1 + sgap1[sel]])),
                    k_dst_step.eq(pick_of(cand1[:3] + [c_brem_m1 + dgap1[sel]])),
                    # A data read's rows and credits (a fetch has constants of its own).
                    k_rows.eq(pick_of([rows_for(c_src[:2], v) for v in cand])),
                    k_hdr.eq(pick_of(d_hdrs)),
                    k_dat.eq(pick_of(d_dats)),
                    k_qroom.eq(q_room),
                    # The fetch's room (all but the read-request skid, looked at in ACT).
                    k_fetch_ok.eq(q_room & tags_now
                                  & (hdr_free | fits(Const(1, 5), room_hdr_now))
                                  & (dat_free | fits(Const(4, 7), room_dat_now))),
                    k_tags.eq(tags_now),
                    k_room_hdr.eq(room_hdr_now),
                    k_room_dat.eq(room_dat_now),
                ]
                # The channel's next state, if ACT does its action: a load (of a whole
                # descriptor) runs it, or stops it at a malformed one (with room to report it);
                # a mark closes the descriptor; a head fetch waits for the descriptor.
                with m.Switch(act):         # (a stopped channel's act is NONE)
                    with m.Case(Act.HEAD):
                        m.d.sync += [k_st_en.eq(1), k_st_go.eq(1)]
                    with m.Case(Act.LOAD):
                        m.d.sync += k_st_en.eq(ok_now & (~bad_now | q_room))
                    with m.Case(Act.MARK):
                        m.d.sync += k_st_en.eq(q_room)
                # The state it would change to, from the state alone (HEAD: the head fetch,
                # WAIT: the load, RUN: the mark; k_st_en says whether it changes).
                m.d.sync += k_st_new.eq(
                    Mux(c_st == Chan.WAIT, Mux(bad_now, Chan.DRAIN, Chan.RUN),
                        Mux((c_st == Chan.RUN) & last_now, Chan.DRAIN, Chan.WAIT)))
                m.next = "ACT"

            with m.State("ACT"):
                # The next channel is chosen now (from this cycle's wants), so an action takes
                # two cycles: CALC, ACT.  A channel this action stops wanting may be picked once
                # more; its next ACT does nothing.
                with m.If(found):
                    m.d.sync += [sel.eq(pick), last_sel.eq(pick)]
                    m.next = "CALC"
                with m.Else():
                    m.next = "SEL"
                with m.If(k_st_en & (~k_st_go | go_fetch)):
                    m.d.sync += st[sel].eq(k_st_new)
                with m.If(k_do[Act.HEAD]):
                    ptr = nxt_ptr[sel]
                    issue_read(Cat(Const(0, 5), ptr[5:]), Mux(ptr[0], 64, 32), 0,
                               Kind.FETCH, credits=fetch_credits(ptr), when=go_fetch,
                               desc=Cat(Const(0, 5), ptr[5:]))
                    with m.If(go_fetch):
                        m.d.sync += fetched[sel].eq(1)
                with m.If(k_do[Act.LOAD]):
                    self._load(m, sel, ld, ld_bad, ld_ok, ld_big, nxt_clear, nxt_ptr, regmode,
                               slot, cur, cur_addr, cur_src, cur_dst,
                               (brem_m1, bbig, lbig, sgap1, dgap1), (bleft, blnz), fetched, push,
                               k_qroom)
                with m.If(k_do[Act.PF]):
                    ptr = c_cur.next
                    issue_read(Cat(Const(0, 5), ptr[5:]), Mux(ptr[0], 64, 32), 0,
                               Kind.FETCH, credits=fetch_credits(ptr), when=go_fetch,
                               desc=Cat(Const(0, 5), ptr[5:]))
                    with m.If(go_fetch):
                        m.d.sync += [fetched[sel].eq(1), nxt_ptr[sel].eq(ptr)]
                        self._clear_sel(m, nxt_clear, sel)
                with m.If(k_do[Act.DATA]):
                    issue_read(c_src, k_chunk, k_rows, Kind.DATA, credits=(k_hdr, k_dat),
                               when=go_read, addr=c_dst)
                    with m.If(go_read):
                        m.d.sync += [
                            cur_src[sel].eq(c_src + k_src_step),
                            cur_dst[sel].eq(c_dst + k_dst_step),
                            brem_m1[sel].eq(Mux(k_end, k_len_m1, k_brem_next)),
                            bbig[sel].eq(Mux(k_end, k_bbig, k_brem_next[12:].any())),
                            bleft[sel].eq(bleft[sel] - k_end),
                            blnz[sel].eq(~(k_end & k_bl_one)),
                        ]
                with m.If(k_do[Act.MARK]):
                    ctl = c_cur.control
                    push(Kind.MARK, k_qroom, addr=c_cur.seq_addr, value=c_cur.seq_value,
                         seq=_bits(ctl, "seq"), irq=_bits(ctl, "irq"))
                with m.If(k_do[Act.MARK] & k_qroom):
                    m.d.sync += slot[sel].eq(slot[sel] + 1)

        # -- completion receiver ------------------------------------------------------------
        m.d.comb += [
            rx.i_cpl.valid.eq(self.i_cpl.valid), rx.i_cpl.p.eq(self.i_cpl.p),
            self.i_cpl.ready.eq(1),
            rx.ext_tags.eq(ext_tags), rx.head_seq.eq(head_seq), rx.outstanding.eq(outstanding),
            ti_r.addr.eq(rx.tag_addr), ti_r.en.eq(1), rx.tag_info.eq(ti_r.data),
            rx.abort.eq(Cat(*abort)), rx.nxt_clear.eq(nxt_clear),
            self.unexpected_cpl.eq(rx.unexpected_cpl), self.poisoned_cpl.eq(rx.poisoned_cpl),
        ]

        # -- writer -------------------------------------------------------------------------
        m.d.comb += [
            wr.i_entry.valid.eq(queue.r_rdy), wr.i_entry.payload.eq(q_r),
            queue.r_en.eq(wr.i_entry.ready),
            wr.done.eq(rx.done), wr.bad.eq(rx.bad), wr.err.eq(rx.err),
            wr.mps.eq(mps), wr.abort.eq(Cat(*abort)), wr.unroutable.eq(Cat(*unroutable)),
            wr.dma_timeout.eq(self.dma_timeout), wr.routes.eq(self.routes),
            wr.node_offset.eq(self.node_offset), wr.requester_id.eq(self.requester_id),
            self.o_wr_dest.eq(wr.o_wr_dest),
        ]
        wiring.connect(m, wr.o_wr, wiring.flipped(self.o_wr))
        # What the writer reports, after the control writes (its updates win).
        for c in range(NC):
            with m.If(wr.fail.en & (wr.fail.chan == c)):
                fail(c, wr.fail.code, wr.fail.desc)
        for c in range(NC):
            with m.If(wr.fail_route.en & (wr.fail_route.chan == c)):
                fail(c, wr.fail_route.code, wr.fail_route.desc)
                m.d.sync += unroutable[c].eq(1)
        m.d.sync += self.msi_req.eq(0)
        cnt = wr.count
        with m.If(cnt.en):
            for c in range(NC):
                with m.If(cnt.chan == c):
                    m.d.sync += nbytes[c].eq(nbytes[c] + cnt.nbytes)
                    with m.If(cnt.mark):
                        m.d.sync += desc_done[c].eq(desc_done[c] + 1)
                        with m.If(cnt.irq):
                            m.d.sync += self.msi_req[c].eq(1)
        return m

    # -- descriptor load and checks (002 section 3.4) --------------------------------------

    def _load_calc(self, m, sel, nxt, nxt_valid, nxt_ptr, regmode, slot):
        """The descriptor a WAIT channel loads and its checks, registered in CALC, with whether
        they were taken from a complete descriptor (``ld_ok``).

        The checks are worked out a cycle ahead, for every register-mode slot and every
        channel's prefetch buffer, so CALC only picks one.  A prefetch buffer counts as complete
        once it has been valid for a cycle (its checks then describe its final contents); a slot
        is checked a cycle after the register write that changed it, and the host's start
        write comes later than that.

        A channel can be picked in its MARK action, while still in RUN, and reach CALC in WAIT
        with its prefetch still arriving: the buffer then holds part of the old descriptor, and
        becomes valid only after CALC.  ACT loads only what CALC saw valid (``ld_ok``; the
        channel is picked again otherwise).  Once valid, neither the buffer nor the slot number
        change until that channel's next action."""
        def bad(d, regm, ptr=None):
            ctl = d.control
            ext = _bits(ctl, "ext")
            checks = [
                _bits(ctl, "magic") != MAGIC,
                (ctl & CONTROL_RESERVED).any(),
                d.length == 0,
                ext & (d.count == 0),
                ext & (d.reserved != 0),
                _bits(ctl, "seq") & (~ext | d.seq_addr[:2].any()),
            ]
            if not regm:
                checks += [ext != ptr[0], ~_bits(ctl, "end") & d.next[1:5].any()]
            out = Const(0, 1)
            for c in checks:
                out = out | c
            return out

        n_slots = N_DMA_CHANNELS * N_DMA_SLOTS
        slot_bad = Signal(n_slots, name="slot_bad")
        nxt_bad = Signal(N_DMA_CHANNELS, name="nxt_bad")
        nxt_seen = Signal(N_DMA_CHANNELS, name="nxt_seen")    # nxt_valid a cycle ago
        # Whether the burst length less 1 is 4096 or more (the planner's ``bbig``), the same way.
        slot_big = Signal(n_slots, name="slot_big")
        nxt_big = Signal(N_DMA_CHANNELS, name="nxt_big")

        def big(d):
            return (d.length - 1)[12:].any()
        for i in range(n_slots):
            m.d.sync += [slot_bad[i].eq(bad(self.slots[i], regm=True)),
                         slot_big[i].eq(big(self.slots[i]))]
        for c in range(N_DMA_CHANNELS):
            m.d.sync += [nxt_bad[c].eq(bad(nxt[c], regm=False, ptr=nxt_ptr[c])),
                         nxt_big[c].eq(big(nxt[c])), nxt_seen[c].eq(nxt_valid[c])]

        regm = regmode[sel]
        idx = Cat(slot[sel][:2], sel)           # 4 * c + s
        ld = Signal(Descriptor, name="ld_desc")
        ld_bad = Signal(name="ld_bad")
        ld_ok = Signal(name="ld_ok")
        ld_big = Signal(name="ld_big")
        bad_now = Mux(regm, select(slot_bad, idx), select(nxt_bad, sel))
        ok_now = regm | (nxt_valid[sel] & select(nxt_seen, sel))
        m.d.sync += [
            ld_big.eq(Mux(regm, select(slot_big, idx), select(nxt_big, sel))),
            ld.eq(Mux(regm, self.slots[idx], nxt[sel])),
            ld_bad.eq(bad_now), ld_ok.eq(ok_now),
        ]
        return ld, ld_bad, ld_ok, ld_big, (ok_now, bad_now)

    def _load(self, m, sel, ld, bad, ok, big, nxt_clear, nxt_ptr, regmode, slot, cur, cur_addr,
              cur_src, cur_dst, burst, bursts, fetched, push, room):
        brem_m1, bbig, lbig, sgap1, dgap1 = burst
        bleft, blnz = bursts
        regm = regmode[sel]
        d = ld
        ext = _bits(d.control, "ext")
        ptr = nxt_ptr[sel]
        with m.If(~ok):         # CALC saw the prefetch buffer still arriving: next time
            pass
        with m.Elif(bad):
            # Reported in order, behind the earlier descriptors' writes (a FAULT entry).
            here = Mux(regm, slot[sel], Cat(Const(0, 5), ptr[5:]))
            push(Kind.FAULT, room, code=DmaError.DESC_MALFORMED, desc=here)
            with m.If(room):
                m.d.sync += cur_addr[sel].eq(here)
        with m.Else():
            m.d.sync += [
                cur[sel].eq(d),
                cur[sel].count.eq(Mux(ext, d.count, 1)),
                sgap1[sel].eq(Mux(ext, d.src_gap, 0) + 1),
                dgap1[sel].eq(Mux(ext, d.dst_gap, 0) + 1),
                cur_addr[sel].eq(Mux(regm, slot[sel], Cat(Const(0, 5), ptr[5:]))),
                cur_src[sel].eq(d.src),
                cur_dst[sel].eq(d.dst),
                brem_m1[sel].eq(d.length - 1),
                bbig[sel].eq(big), lbig[sel].eq(big),
                bleft[sel].eq(Mux(ext, d.count, 1)),
                blnz[sel].eq(1),            # a count of 0 is malformed
                fetched[sel].eq(0),
            ]
            self._clear_sel(m, nxt_clear, sel)

    @staticmethod
    def _clear_sel(m, nxt_clear, sel):
        """Restart channel ``sel``'s prefetch buffer (``nxt_valid`` falls next cycle)."""
        for c in range(N_DMA_CHANNELS):
            with m.If(sel == c):
                m.d.comb += nxt_clear[c].eq(1)
