"""The channels' descriptor rings: descriptors fetched in blocks wait here to be loaded.

002 section 3.4 fetches one descriptor at a time ("linked by pointers"), so a chain of short
transfers ran at one host read round trip per descriptor.  Here a chain announces its adjacent
runs (``control.adj``, :mod:`peach2.dma.descriptor`) and the planner fetches up to
``min(MRRS, 512)`` bytes of descriptors with one read; the receiver writes them into the
fetching channel's ring, and the ring hands them one at a time to the channel's staging
register (the ``nxt`` the planner loads from, checked ahead as before), with one more waiting
behind it.
"""

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..params import N_DMA_CHANNELS
from .descriptor import Descriptor

__all__ = ["DescRing", "RingSignature", "RING_SLOTS", "SLOT_BITS", "SLOT_DWS", "ring_write_layout", "ring_done_layout"]

#: Descriptors a channel's ring holds (one 64-byte slot each), besides its staging register.
RING_SLOTS = 64
#: DWs of a slot: bank ``j`` of the ring holds DW ``j`` of every slot's descriptor.
SLOT_DWS = 16
#: Bits of a slot index.
SLOT_BITS = (RING_SLOTS - 1).bit_length()
_AB = SLOT_BITS + (N_DMA_CHANNELS - 1).bit_length()


def ring_write_layout():
    """One bank's write (DW ``j`` of a slot): the slot as ``Cat(slot, channel)``, the DW."""
    return data.StructLayout({"en": 1, "addr": _AB, "data": 32})


def ring_done_layout():
    """A slot's descriptor is complete (its last DW was written with this cycle's writes)."""
    return data.StructLayout({"en": 1, "chan": 2, "slot": SLOT_BITS})


class RingSignature(wiring.Signature):
    """Between the rings and the planner (from the rings' side).

    Members
    -------
    nxt : Out(ArrayLayout(Descriptor, 4)) ; nxt_valid : Out(4)
        Per channel: the staging register (the next descriptor to load) and whether it holds
        one.
    pop : Out(4)
        Per channel: a slot was handed to the staging register (the ring has room for one more;
        a one-cycle strobe).
    nxt_clear : In(4)
        Per channel: the planner loaded the staged descriptor (``nxt_valid`` falls).
    run : In(4)
        Per channel: running a chain (WAIT or RUN); otherwise its ring and staging register
        are held empty, so a start finds them so.
    """

    def __init__(self):
        nc = N_DMA_CHANNELS
        super().__init__({
            "nxt":       Out(data.ArrayLayout(Descriptor, nc)),
            "nxt_valid": Out(nc),
            "pop":       Out(nc),
            "nxt_clear": In(nc),
            "run":       In(nc),
        })


class DescRing(wiring.Component):
    """Four rings of :data:`RING_SLOTS` descriptor slots (64 bytes each, one per descriptor of
    either size), in sixteen 32-bit banks, and the four pairs of staging registers behind them.

    The receiver writes a fetch's DWs (slot ``base + k // dpd``, bank ``k % dpd`` for DW ``k``
    of the fetch, ``dpd`` 8 or 16 DWs a descriptor) and marks a slot complete with its last DW.
    A channel's slots are loaded in ring order: when its two staging registers have room and
    the slot at its read position is complete, the slot is read (one channel a cycle, the
    lowest first) and lands two cycles later; the slot is free again (``pop``).  The
    planner reserves slots when it issues a fetch (it counts the free ones from ``pop``), so a
    fetch always has room.

    Members
    -------
    i_w : In(ArrayLayout(ring_write_layout, 16))
        The banks' writes (registered in the receiver).
    i_done : In(ring_done_layout)
        A slot became complete with this cycle's writes.
    ring : Out(RingSignature)
        To the planner.
    """

    def __init__(self):
        super().__init__({
            "i_w":    In(data.ArrayLayout(ring_write_layout(), SLOT_DWS)),
            "i_done": In(ring_done_layout()),
            "ring":   Out(RingSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        NC, S = N_DMA_CHANNELS, RING_SLOTS
        valid = Array([Signal(S, name=f"ring{c}_valid") for c in range(NC)])
        rpos = Array([Signal(SLOT_BITS, name=f"ring{c}_rpos") for c in range(NC)])
        nxt = Array([Signal(Descriptor, name=f"ch{c}_nxt") for c in range(NC)])
        nxt_valid = Signal(NC)
        ring = self.ring
        m.d.comb += [ring.nxt[c].eq(nxt[c]) for c in range(NC)]
        m.d.comb += ring.nxt_valid.eq(nxt_valid)

        # The banks.
        rdata = []
        raddr = Signal(_AB)
        for j in range(SLOT_DWS):
            mem = Memory(shape=32, depth=NC * S, init=[])
            m.submodules[f"bank{j}"] = mem
            wp, rp = mem.write_port(), mem.read_port()
            w = self.i_w[j]
            m.d.comb += [wp.addr.eq(w.addr), wp.data.eq(w.data), wp.en.eq(w.en),
                         rp.addr.eq(raddr), rp.en.eq(1)]
            rdata.append(rp.data)

        # A slot becomes complete (the receiver's writes of it land in this cycle).
        done = self.i_done
        with m.If(done.en):
            for c in range(NC):
                with m.If(done.chan == c):
                    m.d.sync += valid[c].bit_select(done.slot, 1).eq(1)

        # Staging: one slot a cycle toward a channel's staging register ``nxt``, behind which
        # a second register ``nxt_b`` waits, so a load finds the next descriptor staged the
        # cycle after (``nxt <= nxt_b``).  A running channel's slot at its read position is
        # picked when the two registers and the slots on their way hold one descriptor at
        # most after this cycle (a load, ``nxt_clear``, frees one now).  Whether that slot is
        # complete is registered (``head_ok``): a cycle stale after a pick, while ``stg1``
        # holds the next pick off, and after the channel starts, while ``started`` does.  A channel that is not running keeps
        # its ring empty (a fetch of a stopped chain may still land there) and both registers
        # invalid, so a start finds them so.  A pick is registered (``stg1``, one-hot, with
        # the slot's address): the banks are read from registers a cycle later (``stg2``) and
        # the slot lands in ``nxt`` (or ``nxt_b`` if that stays full) the cycle after.  The
        # slot's valid bit is cleared with the read (the slot is not fetched into again before
        # the planner sees it free, from ``pop``, later still).
        stg1 = Signal(NC)
        stg2 = Signal(NC)
        stg_slot = Signal(SLOT_BITS)
        cand = Signal(NC)
        picked = Signal(NC)
        head_ok = Signal(NC)
        started = Signal(NC)
        nxt_b = [Signal(Descriptor, name=f"ch{c}_nxt_b") for c in range(NC)]
        b_valid = Signal(NC)
        m.d.sync += started.eq(~ring.run)
        for c in range(NC):
            kept = nxt_valid[c] & ~ring.nxt_clear[c]
            # At most one of the four is held after this cycle: room for one more.
            held = Cat(kept, b_valid[c], stg1[c], stg2[c])
            one_at_most = Signal(name=f"ring{c}_room")
            m.d.comb += one_at_most.eq(~(held & (held - 1)).any())
            m.d.sync += head_ok[c].eq(valid[c].bit_select(rpos[c], 1))
            m.d.comb += [cand[c].eq(head_ok[c] & ~stg1[c] & one_at_most & ring.run[c]
                                    & ~started[c]),
                         picked[c].eq(cand[c] & ~(cand & ((1 << c) - 1)).any())]
        pick = Signal(2)
        for c in reversed(range(NC)):
            with m.If(cand[c]):
                m.d.comb += pick.eq(c)
        m.d.sync += [stg1.eq(picked), stg2.eq(stg1), stg_slot.eq(rpos[pick]),
                     raddr.eq(Cat(rpos[pick], pick)), ring.pop.eq(picked)]
        for c in range(NC):
            with m.If(picked[c]):
                m.d.sync += rpos[c].eq(rpos[c] + 1)
            with m.If(stg1[c]):
                m.d.sync += valid[c].bit_select(stg_slot, 1).eq(0)
            # nxt after this cycle: nxt_b's if a load takes nxt, else the landing slot if nxt
            # is empty or taken (nxt_b is then empty); the landing slot goes to nxt_b if nxt
            # stays full.
            nxt_free = ~nxt_valid[c] | ring.nxt_clear[c]
            with m.If(ring.nxt_clear[c]):
                m.d.sync += [nxt[c].eq(nxt_b[c]), nxt_valid[c].eq(b_valid[c]),
                             b_valid[c].eq(0)]
            with m.If(stg2[c]):
                with m.If(nxt_free & ~b_valid[c]):
                    m.d.sync += [nxt[c].eq(Cat(*rdata)), nxt_valid[c].eq(1)]
                with m.Else():
                    m.d.sync += [nxt_b[c].eq(Cat(*rdata)), b_valid[c].eq(1)]
            with m.If(~ring.run[c]):
                m.d.sync += [valid[c].eq(0), rpos[c].eq(0), nxt_valid[c].eq(0),
                             b_valid[c].eq(0)]
        return m
