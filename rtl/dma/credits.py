"""What a read of the DMA takes: its completion credits at their worst split and its buffer rows
(the planner books them; the ring works them out ahead for a descriptor that is one read)."""

from amaranth.hdl import Cat, Const

from ..util import not_below

__all__ = ["cpl_credits", "rows_for", "fits"]


def cpl_credits(raddr, nbytes_m1):
    """Return the completion headers and data credits of a read of ``nbytes_m1 + 1`` bytes at
    ``raddr`` at its worst split."""
    hdrs = (Cat(raddr[:6], Const(1, 1)) + nbytes_m1) >> 6
    # Completions are split at 64-byte (hence 16-byte) aligned addresses, so their data
    # credits add up to at most the 16-byte blocks the read touches.
    dats = (Cat(raddr[:4], Const(1, 1)) + nbytes_m1) >> 4
    return hdrs[:5], dats[:7]


def rows_for(lo, nb_m1):
    """Return the buffer rows of a read of ``nb_m1 + 1`` bytes from byte ``lo`` of a DW."""
    return (Cat(lo, Const(0, 2), Const(1, 1)) + nb_m1) >> 4


def fits(need, room):
    """``need <= room``, ``room`` signed (a negative room fits nothing)."""
    return ~room[-1] & not_below(room[:-1], need)
