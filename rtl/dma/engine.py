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

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, enum, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..csr.regmap import REGS
from ..params import DEFAULT_DMA_BUFFER, DEFAULT_DMA_TAGS, N_DMA_CHANNELS, N_DMA_SLOTS, DmaError
from ..router.common import RouteEntry
from ..signatures import DmaControlSignature
from ..router.egress import translate_header
from ..router.table import route_matches, route_select
from ..tlp.layouts import CplStatus, TLPHeader, Type
from ..tlp.stream import TLPStream
from ..util import not_below
from .descriptor import CONTROL_BITS, CONTROL_RESERVED, MAGIC, Descriptor

__all__ = ["DMA"]


_CTRL = {name: (lsb, width) for name, lsb, width, _ in CONTROL_BITS}
_CH_CTRL = {f.name: f for f in REGS["CH_CTRL"].fields}
_DMA_CONFIG = {f.name: f for f in REGS["DMA_CONFIG"].fields}


def _bits(value, name, table=_CTRL):
    lsb, width = table[name]
    return value[lsb:lsb + width]


def _field(value, name, table):
    f = table[name]
    return value[f.lsb:f.lsb + f.width]


class _Chan(enum.Enum, shape=3):
    IDLE  = 0   # not running
    HEAD  = 1   # fetch the head descriptor
    WAIT  = 2   # wait for the prefetched (or register-mode) descriptor, then load it
    RUN   = 3   # issue reads of the current descriptor, then its mark
    DRAIN = 4   # chain over (end or fault): wait until nothing of it is in flight


class _Kind(enum.Enum, shape=2):
    DATA  = 0   # a read whose data becomes writes
    FETCH = 1   # a descriptor read
    MARK  = 2   # end of a descriptor: completion write, counters, MSI
    FAULT = 3   # the planner found a fault: report it here, after the earlier descriptors


class _Act(enum.Enum, shape=3):
    """What the planner's ACT does for the channel CALC looked at."""
    NONE  = 0   # nothing (IDLE or DRAIN)
    HEAD  = 1   # fetch the head descriptor
    LOAD  = 2   # load the next descriptor (WAIT)
    PF    = 3   # prefetch the next descriptor (RUN)
    DATA  = 4   # issue the next read of the current burst (RUN)
    MARK  = 5   # close the descriptor (RUN)


class _Item(enum.Enum, shape=2):
    WRITE = 0   # a memory write from buffer rows
    SEQ   = 1   # the 4-byte completion write (immediate data)
    # 2 is free
    NOP   = 3   # nothing to send; carries release and counter flags


def _end_mask(n):
    """Return the mask of the first ``n`` of 4 lanes, ``n`` a 2-bit value with 0 meaning 4."""
    return Cat(Const(1, 1), n != 1, (n == 0) | (n == 3), n == 0)


def _mem_header(addr, nbytes, tag, requester_id, write):
    """Return the 128-bit header of a memory request for ``nbytes`` (1..512) bytes at byte
    address ``addr``: 3-DW below 4 GiB, 4-DW above; byte enables from the address and length.

    One expression (no per-field assignments), so no bit of it is a lone constant.
    """
    lo = addr[:2]
    dws = (Cat(lo, Const(0, 8)) + nbytes + 3)[2:10]
    first = (Const(0xF, 4) << lo)[:4]
    last = _end_mask((lo + nbytes)[:2])
    one = dws == 1
    four = addr[32:].any()
    fmt = Cat(four, Const(1 if write else 0, 1), Const(0, 1))      # 3/4-DW, with/without data
    dw0 = Cat(dws, Const(0, 2), Const(0, 14), Const(Type.MEM.value, 5), fmt)
    dw1 = Cat(Mux(one, first & last, first), Mux(one, 0, last), tag[:8], requester_id)
    dw2 = Mux(four, addr[32:64], Cat(Const(0, 2), addr[2:32]))
    dw3 = Mux(four, Cat(Const(0, 2), addr[2:32]), 0)
    return Cat(dw0, dw1, dw2, dw3)


def _select(values, index):
    """Return ``values[index]`` as a tree of 4:1 multiplexers, two index bits a level (one LUT
    level each; Yosys maps a wide ``Array`` index or ``bit_select`` to a shifter)."""
    values = list(values)
    lsb = 0
    while len(values) > 1:
        bits = min(2, (len(values) - 1).bit_length())
        sel = index[lsb:lsb + bits]
        values = [Array(values[i:i + (1 << bits)])[sel]
                  for i in range(0, len(values), 1 << bits)]
        lsb += bits
    return values[0]


def _ceil_log2(n):
    return max(1, (n - 1).bit_length())


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
    dma_config ... ch_desc_addr_hi
        The members of :class:`~peach2.signatures.DmaControlSignature`, flipped, flat (the top
        joins them to the register block's ``dma`` with one ``connect``):
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
        super().__init__({
            "o_rd":            Out(TLPStream()),
            "o_wr":            Out(TLPStream()),
            "o_wr_dest":       Out(6),
            "i_cpl":           In(TLPStream()),
            "routes":          In(data.ArrayLayout(RouteEntry, n_routes)),
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
        NC = N_DMA_CHANNELS
        NT = self.n_tags
        TB = _ceil_log2(NT)
        ROWS = self.buffer_bytes // 16
        RB = _ceil_log2(ROWS)

        # -- configuration ------------------------------------------------------------------
        mps_code = Signal(2)
        mrrs_code = Signal(2)
        ext_tags = Signal()
        cfg_mps = _field(self.dma_config, "mps", _DMA_CONFIG)
        cfg_mrrs = _field(self.dma_config, "mrrs", _DMA_CONFIG)
        m.d.sync += [
            mps_code.eq(Mux(cfg_mps == 3, 2, cfg_mps)),
            mrrs_code.eq(Mux(cfg_mrrs == 3, 2, cfg_mrrs)),
            ext_tags.eq(_field(self.dma_config, "ext_tags", _DMA_CONFIG)),
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
        rel_hdr = Signal(5)
        rel_dat = Signal(7)
        lim_hdr = Signal(9)
        lim_dat = Signal(13)
        m.d.sync += [lim_hdr.eq(self.cpl_space[:8]), lim_dat.eq(self.cpl_space[8:20])]

        # Per tag: static facts written at issue, read by the receiver.
        TagInfo = data.StructLayout({"base": RB, "src_lo": 2, "nbytes": 10, "fetch": 1,
                                      "chan": 2})
        m.submodules.taginfo = taginfo = Memory(shape=TagInfo, depth=NT, init=[])
        ti_w = taginfo.write_port()
        ti_r = taginfo.read_port()
        done = Signal(NT)
        terr = Array([Signal(4, name=f"tag_err{t}") for t in range(NT)])
        tbad = Signal(NT)       # terr != 0, kept as its own bit
        # DWs received per tag: a completion must start where the previous one ended, and the
        # read is done only when every DW arrived (a completion lost to rx_st_err is a fault,
        # not stale data).
        rcv = Array([Signal(8, name=f"tag_rcv{t}") for t in range(NT)])

        # Releases: registered by the writer's beat generator (a read's tag, rows and credits
        # come back a cycle after its last write has read them).
        rel_en = Signal()
        rel_rows = Signal(RB + 1)
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
        banks = []
        for j in range(4):
            mem = Memory(shape=32, depth=ROWS, init=[])
            m.submodules[f"cbuf{j}"] = mem
            banks.append((mem.write_port(), mem.read_port(), mem.read_port()))

        # -- channels -----------------------------------------------------------------------
        def per_chan(name, shape, **kw):
            return Array([Signal(shape, name=f"ch{c}_{name}", **kw) for c in range(NC)])

        st = per_chan("state", _Chan)
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
        nxt = per_chan("nxt", Descriptor)
        nxt_valid = per_chan("nxt_valid", 1)
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
        ret_c = Signal(range(NC))
        ret_en = Signal()
        for c in range(NC):
            inc = pq_en & (pq_chan == c)
            dec = ret_en & (ret_c == c)
            m.d.sync += pending[c].eq(pending[c] + inc - dec)

        # Status outputs.
        st_fields = {f.name: f for f in REGS["CH_STATUS"].fields}
        for c in range(NC):
            status = Signal(32)
            m.d.comb += [
                status[st_fields["busy"].lsb].eq(st[c] != _Chan.IDLE),
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
                start = _field(ctrl, "start", _CH_CTRL)
                rstart = _field(ctrl, "reg_start", _CH_CTRL)
                n = _field(ctrl, "slots", _CH_CTRL)
                with m.If(_field(ctrl, "abort", _CH_CTRL) & (st[c] != _Chan.IDLE)):
                    fail(c, DmaError.ABORTED, cur_addr[c])
                with m.Elif((start | rstart) & (st[c] != _Chan.IDLE)):
                    m.d.sync += ignored[c].eq(1)
                with m.Elif(start | rstart):
                    head = Cat(self.ch_head_lo[c], self.ch_head_hi[c])
                    m.d.sync += [
                        ignored[c].eq(0), ch_err[c].eq(0), abort[c].eq(0), unroutable[c].eq(0),
                        desc_done[c].eq(0), nbytes[c].eq(0), nxt_valid[c].eq(0),
                        regmode[c].eq(~start), slot[c].eq(0), nslots[c].eq(n),
                        nxt_ptr[c].eq(head), cur_addr[c].eq(head & ~0x1f),
                        fetched[c].eq(0),
                    ]
                    with m.If(start):
                        m.d.sync += st[c].eq(_Chan.HEAD)
                    with m.Elif((n == 0) | (n > N_DMA_SLOTS)):
                        m.d.sync += [st[c].eq(_Chan.DRAIN), ch_err[c].eq(DmaError.DESC_MALFORMED),
                                     abort[c].eq(1), cur_addr[c].eq(0), fault_addr[c].eq(0)]
                    with m.Else():
                        m.d.sync += [st[c].eq(_Chan.WAIT), cur_addr[c].eq(0)]

        # -- the in-order queue -------------------------------------------------------------
        Entry = data.StructLayout({
            "kind": _Kind, "chan": 2, "tag": TB, "base": RB, "rows": RB + 1,
            "src_lo": 2, "nbytes": 10, "addr": 64, "value": 32,
            "seq": 1, "irq": 1, "desc": 64, "code": 4,
            "chdr": 5, "cdat": 7,
        })
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
            m.d.comb += wants[c].eq((st[c] == _Chan.HEAD) | (st[c] == _Chan.RUN) |
                                    ((st[c] == _Chan.WAIT) & (nxt_valid[c] | regmode[c])))
            # Done draining: nothing of the channel in the queue a cycle ago, nothing entering
            # it then (so nothing is in it now), and nothing entering it now.
            m.d.sync += drained[c].eq((pending[c] == 0) & ~(pq_en & (pq_chan == c)))
            with m.If((st[c] == _Chan.DRAIN) & drained[c] & ~(pq_en & (pq_chan == c))):
                m.d.sync += st[c].eq(_Chan.IDLE)
            with m.If(abort[c] & (st[c] != _Chan.IDLE) & (st[c] != _Chan.DRAIN)):
                m.d.sync += st[c].eq(_Chan.DRAIN)

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
            return _select(values, w_idx)

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
        k_do = {a: Signal(name=f"k_do_{a.name.lower()}") for a in _Act if a != _Act.NONE}
        m.d.sync += [v.eq(0) for v in k_do.values()]
        k_len_m1 = Signal(32)       # the descriptor's burst length less 1
        k_brem_next = Signal(32)    # the rest of the burst less 1 after the chunk (if not its end)
        k_bbig = Signal()           # the descriptor's burst length less 1 is 4096 or more
        k_bl_one = Signal()         # this burst is the last
        k_fetch_ok = Signal()       # room for a descriptor fetch (but the read-request skid)
        k_st_en = Signal()          # ACT changes the channel's state to k_st_new ...
        k_st_go = Signal()          # ... if its fetch is issued (else unconditionally)
        k_st_new = Signal(_Chan)
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
                         d_fetch.eq(kind == _Kind.FETCH), d_chan.eq(sel), d_rows.eq(rows),
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
            rd_hdr.eq(_mem_header(d_raddr, d_nbytes, tag_now, self.requester_id, write=False)),
            ti_w.en.eq(d_iss), ti_w.addr.eq(issue_seq[:TB]),
            ti_w.data.base.eq(tail_row), ti_w.data.src_lo.eq(d_raddr[:2]),
            ti_w.data.nbytes.eq(d_nbytes), ti_w.data.chan.eq(d_chan),
            ti_w.data.fetch.eq(d_fetch),
        ]
        for t in range(NT):
            with m.If(d_iss & (issue_seq[:TB] == t)):
                m.d.sync += [done[t].eq(0), terr[t].eq(0), tbad[t].eq(0), rcv[t].eq(0)]

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
                    act_c = Signal(_Act, name=f"ch{c}_act")
                    with m.Switch(st[c]):
                        with m.Case(_Chan.HEAD):
                            m.d.comb += act_c.eq(_Act.HEAD)
                        with m.Case(_Chan.WAIT):
                            m.d.comb += act_c.eq(_Act.LOAD)
                        with m.Case(_Chan.RUN):
                            with m.If(need_pf):
                                m.d.comb += act_c.eq(_Act.PF)
                            with m.Elif(blnz[c]):
                                m.d.comb += act_c.eq(_Act.DATA)
                            with m.Else():
                                m.d.comb += act_c.eq(_Act.MARK)
                        with m.Default():
                            m.d.comb += act_c.eq(_Act.NONE)
                    act_g = Signal(_Act, name=f"ch{c}_act_go", attrs={"keep": 1})
                    m.d.comb += act_g.eq(Mux(abort[c], _Act.NONE, act_c))
                    acts.append(act_g)
                act = Signal(_Act)
                m.d.comb += act.eq(_select(acts, sel))
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
                    with m.Case(_Act.HEAD):
                        m.d.sync += [k_st_en.eq(1), k_st_go.eq(1)]
                    with m.Case(_Act.LOAD):
                        m.d.sync += k_st_en.eq(ok_now & (~bad_now | q_room))
                    with m.Case(_Act.MARK):
                        m.d.sync += k_st_en.eq(q_room)
                # The state it would change to, from the state alone (HEAD: the head fetch,
                # WAIT: the load, RUN: the mark; k_st_en says whether it changes).
                m.d.sync += k_st_new.eq(
                    Mux(c_st == _Chan.WAIT, Mux(bad_now, _Chan.DRAIN, _Chan.RUN),
                        Mux((c_st == _Chan.RUN) & last_now, _Chan.DRAIN, _Chan.WAIT)))
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
                with m.If(k_do[_Act.HEAD]):
                    ptr = nxt_ptr[sel]
                    issue_read(Cat(Const(0, 5), ptr[5:]), Mux(ptr[0], 64, 32), 0,
                               _Kind.FETCH, credits=fetch_credits(ptr), when=go_fetch,
                               desc=Cat(Const(0, 5), ptr[5:]))
                    with m.If(go_fetch):
                        m.d.sync += fetched[sel].eq(1)
                with m.If(k_do[_Act.LOAD]):
                    self._load(m, sel, ld, ld_bad, ld_ok, ld_big, nxt_valid, nxt_ptr, regmode,
                               slot, cur, cur_addr, cur_src, cur_dst,
                               (brem_m1, bbig, lbig, sgap1, dgap1), (bleft, blnz), fetched, push,
                               k_qroom)
                with m.If(k_do[_Act.PF]):
                    ptr = c_cur.next
                    issue_read(Cat(Const(0, 5), ptr[5:]), Mux(ptr[0], 64, 32), 0,
                               _Kind.FETCH, credits=fetch_credits(ptr), when=go_fetch,
                               desc=Cat(Const(0, 5), ptr[5:]))
                    with m.If(go_fetch):
                        m.d.sync += [fetched[sel].eq(1), nxt_ptr[sel].eq(ptr),
                                     nxt_valid[sel].eq(0)]
                with m.If(k_do[_Act.DATA]):
                    issue_read(c_src, k_chunk, k_rows, _Kind.DATA, credits=(k_hdr, k_dat),
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
                with m.If(k_do[_Act.MARK]):
                    ctl = c_cur.control
                    push(_Kind.MARK, k_qroom, addr=c_cur.seq_addr, value=c_cur.seq_value,
                         seq=_bits(ctl, "seq"), irq=_bits(ctl, "irq"))
                with m.If(k_do[_Act.MARK] & k_qroom):
                    m.d.sync += slot[sel].eq(slot[sel] + 1)

        # -- completion receiver ------------------------------------------------------------
        self._receiver(m, NC, NT, TB, RB, ext_tags, head_seq, outstanding, ti_r, done,
                       (terr, tbad), rcv,
                       banks, nxt, nxt_valid, abort)

        # -- writer -------------------------------------------------------------------------
        self._writer(m, NC, NT, TB, RB, Entry, queue, q_r, done, (terr, tbad), banks, mps, abort,
                     fail,
                     rel_en, (rel_rows, rel_hdr, rel_dat), ret_en, ret_c,
                     desc_done, nbytes, ch_err, unroutable)
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
        bad_now = Mux(regm, _select(slot_bad, idx), _select(nxt_bad, sel))
        ok_now = regm | (nxt_valid[sel] & _select(nxt_seen, sel))
        m.d.sync += [
            ld_big.eq(Mux(regm, _select(slot_big, idx), _select(nxt_big, sel))),
            ld.eq(Mux(regm, self.slots[idx], nxt[sel])),
            ld_bad.eq(bad_now), ld_ok.eq(ok_now),
        ]
        return ld, ld_bad, ld_ok, ld_big, (ok_now, bad_now)

    def _load(self, m, sel, ld, bad, ok, big, nxt_valid, nxt_ptr, regmode, slot, cur, cur_addr,
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
            push(_Kind.FAULT, room, code=DmaError.DESC_MALFORMED, desc=here)
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
                nxt_valid[sel].eq(0),
                fetched[sel].eq(0),
            ]

    # -- completion receiver (brief section 3: infinite completion credits) ------------------

    def _receiver(self, m, NC, NT, TB, RB, ext_tags, head_seq, outstanding, ti_r, done, errs, rcv,
                  banks, nxt, nxt_valid, abort):
        terr, tbad = errs
        i = self.i_cpl
        m.d.comb += i.ready.eq(1)
        m.d.sync += [self.unexpected_cpl.eq(0), self.poisoned_cpl.eq(0)]

        # Stage 1: the beat registered; the tag's facts read from the table.
        s1 = Signal.like(i.p)
        s1_valid = Signal()
        s1_rel = Signal(8)
        s1_idx = Signal(TB)
        s1_bc = Signal(13)
        s1_len = Signal(11)
        s1_inwin = Signal()
        h = i.p.hdr
        tmask = Mux(ext_tags, 0xFF, 0x1F)
        rel = ((h.cpl.tag - head_seq[:8]) & tmask)[:8]
        idx = (head_seq[:TB] + rel)[:TB]
        m.d.comb += [ti_r.addr.eq(idx), ti_r.en.eq(1)]
        m.d.sync += [s1.eq(i.p), s1_valid.eq(i.valid)]
        with m.If(i.valid & i.p.first):
            # With 5-bit tags a tag above 31 is never one of ours.
            m.d.sync += [s1_rel.eq(rel), s1_idx.eq(idx),
                         s1_inwin.eq((rel < outstanding) & (ext_tags | (h.cpl.tag[5:] == 0))),
                         s1_bc.eq(Mux(h.cpl.byte_count == 0, 4096, h.cpl.byte_count)),
                         s1_len.eq(Mux(h.common.length == 0, 1024, h.common.length))]

        # The registers of the later stages (declared first: each stage forwards what the next
        # ones change).  Stage 2b's inputs, registered by stage 2a:
        u = Signal.like(i.p)
        u_valid = Signal()
        u_known = Signal()      # in the window of outstanding reads, and not done as read in 2a
        u_rcv = Signal(8)       # the tag's DW count as read in 2a
        u_same2 = Signal()      # same tag as the packet stage 2c decided on in 2a's cycle
        u_same3 = Signal()      # same tag as the beat stage 3 finished in 2a's cycle
        u_end2 = Signal(12)     # the DW count stage 2c left in 2a's cycle (if a good first beat)
        u_off = Signal(13)      # byte offset of the completion's first byte from src & ~3
        u_room = Signal(signed(12))     # the read's DWs minus the completion's length
        u_len = Signal(11)
        u_bc_big = Signal()     # the byte count is above the read's size
        u_code = Signal(4)      # the status's error code (poisoned, UR, CA), or 0
        u_base = Signal(RB)
        u_idx = Signal(TB)
        u_fetch = Signal()
        u_chan = Signal(2)
        # Stage 2c's inputs, registered by stage 2b:
        t = Signal.like(i.p)
        t_valid = Signal()
        t_known = Signal()      # as u_known, with what 2c and 3 changed in 2b's cycle forwarded
        t_k0 = Signal(11)       # DW index of the completion's first DW in the read
        t_end = Signal(12)      # k0 + length
        t_final = Signal()
        t_bad = Signal()        # fails whatever the tag's DW count (status, malformed)
        t_code = Signal(4)      # the error code if it fails
        t_k0_ok = Signal()      # k0 is the tag's DW count (2a's read, 2c's change forwarded)
        t_k0_fw = Signal()      # k0 is the DW count stage 2c leaves in 2b's cycle
        t_same2 = Signal()      # same tag as the packet stage 2c decided on in 2b's cycle
        t_same3 = Signal()      # same tag as the beat stage 3 finished in 2b's cycle
        t_base = Signal(RB)
        t_idx = Signal(TB)
        t_fetch = Signal()      # a descriptor fetch: data to channel t_chan's prefetch buffer
        t_chan = Signal(2)
        # Stage 2c's packet (for its later beats) and stage 3's inputs:
        pkt_good = Signal()
        pkt_k = Signal(11)
        pkt_base = Signal(RB)
        pkt_idx = Signal(TB)
        pkt_final = Signal()
        pkt_fetch = Signal()
        pkt_chan = Signal(2)
        s2 = Signal.like(i.p)
        s2_valid = Signal()
        s2_good = Signal()      # write this packet's data
        s2_k = Signal(11)       # DW index of lane 0 of the beat in s2
        s2_base = Signal(RB)
        s2_idx = Signal(TB)
        s2_final = Signal()
        s2_fetch = Signal()
        s2_chan = Signal(2)
        # What stages 2c and 3 changed in the tags' state in their previous cycle:
        f2_good = Signal()      # 2c decided a good first beat (it set the DW count to t_end)
        f2_fail = Signal()      # 2c failed the tag (set its done bit)
        f3_done = Signal()      # 3 set the tag's done bit
        # The tag 2c decides on this cycle: t_idx for a first beat, else its packet's.
        tag2 = Mux(t.first, t_idx, pkt_idx)

        # Stage 2a: the tag's state (done bit, DW count) read, and what the header and the
        # table entry give without it, registered.  Stage 2c and stage 3 may change the state
        # in this cycle and the next: stage 2b forwards the changes of this cycle, stage 2c
        # those of the next.
        info = ti_r.data
        hd = s1.hdr.cpl
        req_dws = (info.src_lo + info.nbytes + 3) >> 2
        m.d.sync += [u.eq(s1), u_valid.eq(s1_valid)]
        with m.If(s1_valid & s1.first):
            status = hd.status.as_value()
            code = Signal(4)
            m.d.comb += code.eq(0)
            with m.If(s1.hdr.common.ep):
                m.d.comb += code.eq(DmaError.CPL_POISONED)
            with m.Elif(status == CplStatus.UR.value):
                m.d.comb += code.eq(DmaError.CPL_UR)
            with m.Elif(status != CplStatus.SC.value):
                m.d.comb += code.eq(DmaError.CPL_CA)
            m.d.sync += [
                u_known.eq(s1_inwin & ~_select(done, s1_idx)),
                u_rcv.eq(_select(rcv, s1_idx)),
                u_same2.eq(s1_idx == tag2), u_same3.eq(s1_idx == s2_idx), u_end2.eq(t_end),
                u_off.eq(info.src_lo + info.nbytes - s1_bc), u_room.eq(req_dws - s1_len),
                u_len.eq(s1_len), u_bc_big.eq(s1_bc > info.nbytes),
                u_code.eq(code),
                u_base.eq(info.base), u_idx.eq(s1_idx),
                u_fetch.eq(info.fetch), u_chan.eq(info.chan),
            ]

        # Stage 2b: the completion's placement and its checks (against the read, and k0 against
        # the tag's DW count), registered.  k0 + length against the read's DWs is k0 against
        # u_room, so no sum is compared here.
        k0 = u_off[2:]
        m.d.sync += [t.eq(u), t_valid.eq(u_valid)]
        with m.If(u_valid & u.first):
            m.d.sync += [
                t_known.eq(u_known & ~(u_same2 & f2_fail) & ~(u_same3 & f3_done)),
                t_k0.eq(k0), t_end.eq(k0 + u_len), t_final.eq(k0 == u_room),
                t_bad.eq(u_bc_big | u_room[-1] | ~not_below(u_room[:-1], k0)
                         | (u.hdr.cpl.lower_address[:2] != u_off[:2])
                         | u.err | (u_code != 0)),
                t_code.eq(Mux(u_code != 0, u_code, DmaError.CPL_MALFORMED)),
                t_k0_ok.eq(Mux(u_same2 & f2_good, k0 == u_end2, k0 == u_rcv)),
                t_k0_fw.eq(k0 == t_end),
                t_same2.eq(u_idx == tag2), t_same3.eq(u_idx == s2_idx),
                t_base.eq(u_base), t_idx.eq(u_idx), t_fetch.eq(u_fetch), t_chan.eq(u_chan),
            ]

        # Stage 2c: the decision (unexpected, fault or good), the tag's state updated.
        m.d.sync += [f2_good.eq(0), f2_fail.eq(0),
                     f3_done.eq(s2_valid & s2.last & s2_good & s2_final)]
        with m.If(t_valid & t.first):
            known = t_known & ~(t_same2 & f2_fail) & ~(t_same3 & f3_done)
            fault = t_bad | ~Mux(t_same2 & f2_good, t_k0_fw, t_k0_ok)
            m.d.sync += self.poisoned_cpl.eq(t.hdr.common.ep & ~t.err)
            with m.If(~known):
                m.d.sync += self.unexpected_cpl.eq(~t.err & ~t.hdr.common.ep)
            with m.Elif(fault):
                for tg in range(NT):
                    with m.If(t_idx == tg):
                        m.d.sync += [terr[tg].eq(t_code), tbad[tg].eq(1), done[tg].eq(1)]
                m.d.sync += f2_fail.eq(1)
            good = known & ~fault
            with m.If(good):
                for tg in range(NT):
                    with m.If(t_idx == tg):
                        m.d.sync += rcv[tg].eq(t_end)
            m.d.sync += [f2_good.eq(good),
                         s2_good.eq(good), s2_k.eq(t_k0), s2_base.eq(t_base),
                         s2_idx.eq(t_idx), s2_final.eq(t_final & ~fault),
                         s2_fetch.eq(t_fetch), s2_chan.eq(t_chan)]
            m.d.sync += [pkt_good.eq(good), pkt_k.eq(t_k0 + 4), pkt_base.eq(t_base),
                         pkt_idx.eq(t_idx), pkt_final.eq(t_final & ~fault),
                         pkt_fetch.eq(t_fetch), pkt_chan.eq(t_chan)]
        with m.Elif(t_valid):
            m.d.sync += [s2_good.eq(pkt_good), s2_k.eq(pkt_k), s2_base.eq(pkt_base),
                         s2_idx.eq(pkt_idx), s2_final.eq(pkt_final), pkt_k.eq(pkt_k + 4),
                         s2_fetch.eq(pkt_fetch), s2_chan.eq(pkt_chan)]
            with m.If(t.err & pkt_good):
                # A completion the RX adapter ended with err: its data is lost.
                for tg in range(NT):
                    with m.If(pkt_idx == tg):
                        m.d.sync += [terr[tg].eq(DmaError.CPL_MALFORMED), tbad[tg].eq(1),
                                     done[tg].eq(1)]
                m.d.sync += [s2_good.eq(0), f2_fail.eq(1)]
        m.d.sync += [s2.eq(t), s2_valid.eq(t_valid)]

        # Stage 3: bank writes.  DW k of the read lives in row base + k // 4, bank k % 4.
        for j, (wp, _, _) in enumerate(banks):
            lane = (j - s2_k[:2])[:2]
            row = (s2_base + ((s2_k + lane) >> 2))[:RB]
            m.d.comb += [
                wp.addr.eq(row),
                wp.data.eq(s2.data.word_select(lane, 32)),
                wp.en.eq(s2_valid & s2_good & ~s2_fetch & s2.dw_en.bit_select(lane, 1)),
            ]
        with m.If(s2_valid & s2.last & s2_good & s2_final):
            for tg in range(NT):
                with m.If(s2_idx == tg):
                    m.d.sync += done[tg].eq(1)
        # A descriptor fetch's DWs go to its channel's prefetch buffer (DW k of the read is DW
        # k of the descriptor), valid with its last DW: the planner need not wait for the
        # writer to reach the fetch in the queue (faults and the tag's release still happen
        # there, in order).  A channel stopped meanwhile keeps its buffer invalid.
        for c in range(NC):
            hit = s2_valid & s2_good & s2_fetch & (s2_chan == c) & ~abort[c]
            for d in range(16):
                lane = (d - s2_k)[:4]
                with m.If(hit & (lane < 4) & s2.dw_en.bit_select(lane[:2], 1)):
                    m.d.sync += nxt[c].as_value().word_select(d, 32).eq(
                        s2.data.word_select(lane[:2], 32))
            with m.If(hit & s2.last & s2_final):
                m.d.sync += nxt_valid[c].eq(1)

    # -- writer -----------------------------------------------------------------------------

    def _writer(self, m, NC, NT, TB, RB, Entry, queue, q_r, done, errs, banks, mps, abort, fail,
                rel_en, rel, ret_en, ret_c, desc_done, nbytes, ch_err, unroutable):
        rel_rows, rel_hdr, rel_dat = rel
        terr, tbad = errs
        # Items: one memory write, completion write or no-op each.
        Item = data.StructLayout({
            "kind": _Item, "chan": 2, "addr": 64, "nbytes": 10, "row": RB, "u": 4,
            "value": 32, "release": 1, "rel_rows": RB + 1, "retire": 1, "mark": 1, "irq": 1,
            "desc": 64, "rel_hdr": 5, "rel_dat": 7,
        })
        ITEMS_DEPTH = 4
        m.submodules.items = items = SyncFIFOBuffered(width=Item.size, depth=ITEMS_DEPTH)
        it_w = data.View(Item, items.w_data)
        m.d.comb += items.w_en.eq(0)

        # Stage A0: wait, in queue order, for each read's data.  The head entry (h) is copied
        # from the queue; between the queue and h sits a skid register (n), so the queue is
        # read whenever n is empty (a register: the decision never reaches the queue's own
        # counters) and an entry read while h waits stays in n.  The tag's done bit and error
        # are looked up one cycle ahead for the queue's output, for n and for h, and the one for
        # h's source is used, so they lag the receiver by one cycle (done bits only rise while a
        # tag is outstanding).  A read leaves A0 once its data is in, or failed, or timed out
        # (then marked failed with its code); every other entry leaves at once.
        h = Signal(Entry)
        h_valid = Signal()
        h_load = Signal()
        n = Signal(Entry)
        n_valid = Signal()
        from_q = Signal()                   # h was loaded from the queue's output last cycle
        from_n = Signal()                   # h was loaded from n last cycle
        looked = {}
        for src, entry in (("q", q_r), ("n", n), ("h", h)):
            d_done, d_bad, d_err = Signal(name=f"d{src}_done"), Signal(name=f"d{src}_bad"), \
                Signal(4, name=f"d{src}_err")
            m.d.sync += [d_done.eq(_select(done, entry.tag)), d_err.eq(_select(terr, entry.tag)),
                         d_bad.eq(_select(tbad, entry.tag))]
            looked[src] = (d_done, d_bad, d_err)

        def looked_up(i):
            return Mux(from_q, looked["q"][i], Mux(from_n, looked["n"][i], looked["h"][i]))
        h_done, h_bad, h_err = (looked_up(i) for i in range(3))
        h_rd = (h.kind == _Kind.DATA) | (h.kind == _Kind.FETCH)
        wait = Signal(32)
        tmo_hit = Signal()
        tmo = self.dma_timeout
        m.d.sync += tmo_hit.eq((tmo != 0) & (wait >= tmo))

        # Stage A1: split the entry (s) into items, from registers only: what the split needs
        # (the destination of the next piece, the bytes left, whether the next piece is the
        # last) is worked out as s is loaded.
        s_ = Signal(Entry, name="s")
        s_valid = Signal()
        s_failed = Signal()                 # a read that failed (its code in s.code)
        s_one = Signal()                    # one item: anything but a read with its data in
        a = Signal(64)                      # destination of the next piece
        left = Signal(10)                   # bytes of the entry not yet emitted
        s_last = Signal()                   # the next piece is the last: left <= cap
        cap = Signal(10)                    # the next piece at most: to the MPS boundary
        cap2 = Signal(11)                   # cap + mps
        # Buffer byte (in the ring of rows) of the DW start of the next piece's first payload
        # byte: the read's rows start at ``base`` with its first byte at ``src_lo``; a piece
        # whose destination is less aligned than its source starts up to 3 bytes before.
        # After the first piece the destination is MPS-aligned, so it moves by ``step``.
        pos = Signal(RB + 4)
        step = Signal(10)
        piece = Signal(10)
        m.d.comb += piece.eq(Mux(s_last, left, cap))
        e = s_
        e_abort = abort[e.chan]
        # Room in the items FIFO, registered: at most depth - 2 entries a cycle ago leaves room
        # for one now.
        items_room = Signal()
        m.d.sync += items_room.eq(items.level <= ITEMS_DEPTH - 2)
        go = s_valid & items_room
        # A good read's pieces go one by one (as no-ops if its channel has stopped meanwhile,
        # so the stop does not reach this decision); every other entry is one item.
        s_consume = go & (s_one | s_last)
        s_load = Signal(attrs={"keep": 1})
        a0_consume = Signal(attrs={"keep": 1})
        m.d.comb += [s_load.eq(~s_valid | s_consume),
                     a0_consume.eq(h_valid & s_load & (~h_rd | h_done | tmo_hit))]
        m.d.comb += h_load.eq(~h_valid | a0_consume)
        with m.If(h_valid & h_rd & ~h_done & ~tmo_hit & s_load):
            m.d.sync += wait.eq(wait + 1)
        with m.If(a0_consume):
            m.d.sync += [wait.eq(0), tmo_hit.eq(0)]

        def emit(kind, **fields):
            m.d.comb += [items.w_en.eq(1), it_w.kind.eq(kind), it_w.chan.eq(e.chan),
                         it_w.desc.eq(e.desc), it_w.rel_hdr.eq(e.chdr), it_w.rel_dat.eq(e.cdat)]
            for k, v in fields.items():
                m.d.comb += getattr(it_w, k).eq(v)

        with m.If(go):
            with m.Switch(e.kind):
                with m.Case(_Kind.DATA, _Kind.FETCH):
                    # Even a failed channel waited for its reads (or their timeout) before it
                    # frees their tags, so a late completion cannot land in reused rows.
                    with m.If(s_failed):
                        fail(e.chan, e.code, e.desc)
                        emit(_Item.NOP, release=1, rel_rows=e.rows, retire=1)
                    with m.Elif(e.kind == _Kind.FETCH):
                        # The receiver already filled the prefetch buffer: free the tag.
                        emit(_Item.NOP, release=1, rel_rows=e.rows, retire=1)
                    with m.Else():
                        emit(Mux(e_abort, _Item.NOP, _Item.WRITE), addr=a, nbytes=piece,
                             row=pos[4:], u=pos[:4], release=s_last, rel_rows=e.rows,
                             retire=s_last)
                        # After the first piece the destination is MPS-aligned.
                        m.d.sync += [a.eq(a + piece), left.eq(left - piece),
                                     pos.eq(pos + step), step.eq(mps), cap.eq(mps),
                                     cap2.eq(mps << 1), s_last.eq(not_below(cap2, left))]
                with m.Case(_Kind.FAULT):
                    fail(e.chan, e.code, e.desc)
                    emit(_Item.NOP, retire=1)
                with m.Default():       # MARK
                    # Decided here, in queue order: a fault reported later (behind this mark)
                    # does not take this descriptor back.
                    send = e.seq & ~e_abort
                    emit(Mux(send, _Item.SEQ, _Item.NOP), addr=e.addr, nbytes=4, value=e.value,
                         retire=1, mark=~e_abort, irq=e.irq)

        # What the split needs of h, as nets of their own (the load below only picks them).
        off = h.addr[:10] & (mps - 1)
        s_first_last = Signal(attrs={"keep": 1})
        m.d.comb += s_first_last.eq(not_below(mps - off, h.nbytes))
        with m.If(s_load):
            m.d.sync += [
                s_valid.eq(a0_consume), s_.eq(h),
                s_failed.eq(h_rd & (~h_done | h_bad)),
                s_one.eq((h.kind != _Kind.DATA) | ~h_done | h_bad),
                a.eq(h.addr), left.eq(h.nbytes),
                s_last.eq(s_first_last),
                cap.eq(mps - off), cap2.eq((mps << 1) - off),
                pos.eq(Cat(h.src_lo, Const(0, 2), h.base) - h.addr[:2]),
                step.eq(mps - Cat(Const(0, 2), off[2:])),
            ]
            with m.If(h_rd):
                m.d.sync += s_.code.eq(Mux(h_done, h_err, DmaError.CPL_TIMEOUT))

        m.d.comb += queue.r_en.eq(~n_valid)
        m.d.sync += [from_q.eq(0), from_n.eq(0)]
        with m.If(h_load):
            with m.If(n_valid):
                m.d.sync += [h.eq(n), h_valid.eq(1), n_valid.eq(0), from_n.eq(1)]
            with m.Else():
                m.d.sync += [h.eq(q_r), h_valid.eq(queue.r_rdy), from_q.eq(1)]
        with m.Elif(~n_valid & queue.r_rdy):
            m.d.sync += [n.eq(q_r), n_valid.eq(1)]

        # Stage A': route lookup and the translated address (registered), then the header,
        # into a second FIFO.
        Item2 = data.StructLayout({"it": Item, "hdr": TLPHeader, "dest": 6, "nbm1": 8,
                                   "single": 1})
        m.submodules.items2 = items2 = SyncFIFOBuffered(width=Item2.size, depth=4)
        i0 = data.View(Item, items.r_data)
        p_valid = Signal()
        i1 = Signal(Item)
        p_hit = Signal()
        p_port = Signal(2)
        # The write's header both ways (to N: after the node offset subtraction), so the route's
        # port only picks one.
        p_hdr = Signal(TLPHeader)
        p_hdr_n = Signal(TLPHeader)
        p_nbm1 = Signal(8)
        p_take = ~p_valid | items2.w_rdy
        # In two steps: the route table's compares (and the N-bound address) registered, then
        # the first match's port (the ingress does the same, rtl/router/ingress.py).
        q_valid = Signal()
        i_q = Signal(Item)
        q_match = Signal(self.n_routes)
        q_tr = Signal(64)
        q_take = ~q_valid | p_take
        m.d.comb += items.r_en.eq(q_take)
        with m.If(q_take):
            m.d.sync += [
                q_valid.eq(items.r_rdy), i_q.eq(i0),
                q_match.eq(Cat(*route_matches(m, i0.addr, self.routes))),
                q_tr.eq(Cat(i0.addr[:2],
                            (Cat(Const(0, 2), i0.addr[2:]) - self.node_offset)[2:64])),
            ]
        hit0, port0 = route_select(m, list(q_match), self.routes)
        with m.If(p_take):
            m.d.sync += [
                p_valid.eq(q_valid), i1.eq(i_q), p_hit.eq(hit0), p_port.eq(port0.as_value()),
                p_hdr.eq(_mem_header(i_q.addr, i_q.nbytes, Const(0, 8), self.requester_id,
                                     write=True)),
                p_hdr_n.eq(_mem_header(q_tr, i_q.nbytes, Const(0, 8), self.requester_id,
                                       write=True)),
                # Beats of the item, minus one: a write's payload DWs (from its address and
                # length), 1 otherwise.
                p_nbm1.eq(Mux(i_q.kind == _Item.WRITE,
                              ((Cat(i_q.addr[:2], Const(0, 8)) + i_q.nbytes + 3)[2:] - 1) >> 2,
                              0)),
            ]
        i2w = data.View(Item2, items2.w_data)
        hit = p_hit
        port = p_port
        to_n = port == 0
        is_write = (i1.kind == _Item.WRITE) | (i1.kind == _Item.SEQ)
        # The N-bound header carries the translated address (translate_header's result).
        m.d.comb += [
            i2w.it.eq(i1),
            i2w.hdr.eq(Mux(to_n, p_hdr_n, p_hdr)),
            i2w.dest.eq(1 << port),
            i2w.nbm1.eq(p_nbm1), i2w.single.eq(p_nbm1 == 0),
            items2.w_en.eq(p_valid & items2.w_rdy),
        ]
        # Stage A decided every item in queue order; only what this stage finds itself (an
        # unroutable write) stops the channel here, and every later item of that channel
        # becomes a no-op (and no descriptor is counted done any more).
        dropping = unroutable[i1.chan]
        with m.If(p_valid & items2.w_rdy):
            with m.If(is_write & ~hit & ~dropping):
                fail(i1.chan, DmaError.DST_UNROUTABLE, i1.desc)
                for c in range(NC):
                    with m.If(i1.chan == c):
                        m.d.sync += unroutable[c].eq(1)
            with m.If(is_write & (~hit | dropping)):
                m.d.comb += i2w.it.kind.eq(_Item.NOP)
            with m.If((is_write & ~hit) | dropping):
                m.d.comb += i2w.it.mark.eq(0)

        # Stage B: beats.  Output FIFO entries carry the beat and the counter flags.
        Out_ = data.StructLayout({
            "data": 128, "dw_en": 4, "hdr": TLPHeader, "first": 1, "last": 1, "dest": 6,
            "nop": 1, "chan": 2, "nbytes": 10, "retire": 1, "mark": 1, "irq": 1,
        })
        OUT_DEPTH = 16
        m.submodules.ofifo = ofifo = SyncFIFOBuffered(width=Out_.size, depth=OUT_DEPTH)
        ow = data.View(Out_, ofifo.w_data)
        b = data.View(Item2, items2.r_data)
        bi = b.it
        beat = Signal(8)
        # Whether this is the item's last beat, from registers and the item's own flag: a new
        # item starts with its ``single`` flag, later beats with a compare made a beat ahead.
        b_first = Signal(init=1)
        b_next_last = Signal()
        b_last = Mux(b_first, b.single, b_next_last)
        c1 = Signal()                       # a command is in the memory read stage
        # Room in the output FIFO for one more beat, registered: the level a cycle ago plus the
        # beats then on their way bounds the level now.
        credit = Signal()
        go = items2.r_rdy & credit
        m.d.sync += credit.eq(ofifo.level + c1 + go < OUT_DEPTH - 1)
        m.d.comb += items2.r_en.eq(go & b_last)
        with m.If(go):
            m.d.sync += [beat.eq(Mux(b_last, 0, beat + 1)), b_first.eq(b_last),
                         b_next_last.eq(beat + 1 == b.nbm1)]
        # Released a cycle after the last beat's command (registered: the bookkeeping's
        # counters then add only registers).
        m.d.sync += [rel_en.eq(go & b_last & bi.release), rel_rows.eq(bi.rel_rows),
                     rel_hdr.eq(bi.rel_hdr), rel_dat.eq(bi.rel_dat)]

        row = (bi.row + beat)[:RB]
        for wp, rp0, rp1 in banks:
            m.d.comb += [rp0.addr.eq(row), rp1.addr.eq(row + 1), rp0.en.eq(1), rp1.en.eq(1)]
        # Stage C: memory data, byte shift, into the output FIFO.
        cmd = Signal(Item2)
        cmd_beat = Signal(8)
        cmd_first = Signal()
        cmd_last = Signal()
        m.d.sync += [c1.eq(go), cmd.eq(b), cmd_beat.eq(beat), cmd_first.eq(b_first),
                     cmd_last.eq(b_last)]
        row0 = Cat(*[rp0.data for _, rp0, _ in banks])
        row1 = Cat(*[rp1.data for _, _, rp1 in banks])
        both = Cat(row0, row1)
        shifted = Signal(128)
        with m.Switch(cmd.it.u):
            for u in range(16):
                with m.Case(u):
                    m.d.comb += shifted.eq(both[8 * u:8 * u + 128])
        ci = cmd.it
        c_dws = cmd.hdr.common.length
        rem_dws = c_dws - Cat(Const(0, 2), cmd_beat)
        dw_en = Mux(rem_dws >= 4, 0xF, _end_mask(rem_dws[:2]))
        m.d.comb += [
            ow.data.eq(Mux(ci.kind == _Item.SEQ, ci.value, shifted)),
            ow.dw_en.eq(Mux(ci.kind == _Item.SEQ, 1, Mux(ci.kind == _Item.WRITE, dw_en, 0))),
            ow.hdr.eq(cmd.hdr),
            ow.first.eq(cmd_first),
            ow.last.eq(cmd_last),
            ow.dest.eq(cmd.dest),
            ow.nop.eq(ci.kind == _Item.NOP),
            ow.chan.eq(ci.chan),
            ow.nbytes.eq(Mux(cmd_last & (ci.kind == _Item.WRITE), ci.nbytes, 0)),
            ow.retire.eq(cmd_last & ci.retire),
            ow.mark.eq(cmd_last & ci.mark),
            ow.irq.eq(ci.irq),
            ofifo.w_en.eq(c1),
        ]

        # Output register: beats to the crossbar with ``valid`` straight from a register (the
        # crossbar's arbitration starts from it); a no-op spends a cycle here too and leaves
        # unconditionally.  Counters are booked when an entry leaves, so a descriptor counts
        # done only once its last write is in the crossbar.
        r = data.View(Out_, ofifo.r_data)
        x = Signal(Out_)
        x_full = Signal()
        x_send = Signal()                   # x holds a beat to send
        o = self.o_wr
        leave = x_full & (~x_send | o.ready)
        pop = ofifo.r_rdy & (~x_full | leave)
        m.d.comb += [
            o.valid.eq(x_send),
            o.p.data.eq(x.data), o.p.dw_en.eq(x.dw_en), o.p.hdr.eq(x.hdr),
            o.p.first.eq(x.first), o.p.last.eq(x.last), o.p.err.eq(0), o.p.bar.eq(0),
            self.o_wr_dest.eq(x.dest),
            ofifo.r_en.eq(pop),
        ]
        with m.If(pop):
            m.d.sync += [x.eq(r), x_full.eq(1), x_send.eq(~r.nop)]
        with m.Elif(leave):
            m.d.sync += [x_full.eq(0), x_send.eq(0)]
        m.d.sync += self.msi_req.eq(0)
        # Retired a cycle later (registered, off the crossbar's ready).
        m.d.sync += [ret_en.eq(leave & x.retire), ret_c.eq(x.chan)]
        with m.If(leave):
            for c in range(NC):
                with m.If(x.chan == c):
                    m.d.sync += nbytes[c].eq(nbytes[c] + x.nbytes)
                    with m.If(x.mark):
                        m.d.sync += desc_done[c].eq(desc_done[c] + 1)
                        with m.If(x.irq):
                            m.d.sync += self.msi_req[c].eq(1)
