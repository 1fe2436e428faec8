"""The register block's read multiplexer: a register value by DW address, in three stages.

Binary trees of 2:1 multiplexers indexed by address bits: 8:1 within each 32-byte group,
registered; 8:1 over the groups of a 256-byte bank, registered; 16:1 over the banks, registered.
A ``Switch`` over the offsets (a compare per offset, ORed) maps to 7 LUT levels, and so do a
64:1 tree and (for the counters, whose LUTs Yosys's ABC merges with the tree) a 16:1 tree.
"""

from amaranth.hdl import Const, Mux, Signal

__all__ = ["read_pipeline"]


def _mux_tree(entries, sel):
    """Return ``entries[sel]`` (a dict index -> 32-bit value; missing indices read 0) as a
    binary tree of 2:1 multiplexers, least significant select bit first."""
    level = [entries.get(i) for i in range(1 << len(sel))]
    for bit in (sel[i] for i in range(len(sel))):
        level = [None if lo is None and hi is None
                 else Mux(bit, 0 if hi is None else hi, 0 if lo is None else lo)
                 for lo, hi in zip(level[0::2], level[1::2])]
    return Const(0, 32) if level[0] is None else level[0]


def read_pipeline(m, reads, rd_en, rd_addr):
    """Add the read multiplexer of ``reads`` (DW index -> 32-bit value; missing DWs read 0) to
    ``m``; return ``(rd_v3, rd_data)``: ``rd_data`` is the value at DW ``rd_addr`` three cycles
    after a cycle with ``rd_en``, flagged by ``rd_v3``."""
    groups = {}
    for dw, value in reads.items():
        groups.setdefault(dw >> 3, {})[dw & 0x7] = value
    group_q = {g: Signal(32, name=f"rd_group{g}") for g in sorted(groups)}
    rd_hi  = Signal(7)
    rd_v1  = Signal()
    m.d.sync += [rd_v1.eq(rd_en), rd_hi.eq(rd_addr[3:10])]
    for g, entries in groups.items():
        m.d.sync += group_q[g].eq(_mux_tree(entries, rd_addr[0:3]))
    banks = {}
    for g, value in group_q.items():
        banks.setdefault(g >> 3, {})[g & 7] = value
    bank_q = {b: Signal(32, name=f"rd_bank{b}") for b in sorted(banks)}
    rd_bank = Signal(4)
    rd_v2   = Signal()
    m.d.sync += [rd_v2.eq(rd_v1), rd_bank.eq(rd_hi[3:7])]
    for b, entries in banks.items():
        m.d.sync += bank_q[b].eq(_mux_tree(entries, rd_hi[0:3]))
    rd_data = Signal(32)
    rd_v3   = Signal()
    m.d.sync += [rd_v3.eq(rd_v2), rd_data.eq(_mux_tree(bank_q, rd_bank))]
    return rd_v3, rd_data
