"""Round-robin choice among requesters."""

from amaranth.hdl import Signal

__all__ = ["round_robin"]


def round_robin(m, requests, last):
    """Add a round-robin choice to ``m``; return ``(found, winner)``.

    ``requests`` is a list of 1-bit values; ``last`` the index granted last time.  The first
    requester after ``last`` (circularly) wins, so every requester is served within one round.
    """
    n = len(requests)
    found = Signal()
    winner = Signal(range(max(n, 2)))
    for start in range(n):
        with m.If(last == start):
            # The last assignment wins in Amaranth: walk from the farthest candidate back.
            for offset in reversed(range(1, n + 1)):
                k = (start + offset) % n
                with m.If(requests[k]):
                    m.d.comb += [found.eq(1), winner.eq(k)]
    return found, winner
