"""Round-robin choice among requesters."""

from amaranth.hdl import Cat, Signal

__all__ = ["round_robin", "round_robin_after"]


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


def round_robin_after(requests, last, *, name="rr"):
    """Return ``(found, grant)``: the first requester after ``last``, ``last`` itself excluded.

    One-hot form for shallow logic: ``last`` is a one-hot value (the requester granted last
    time); ``grant`` is one-hot (zero when ``found`` is 0): requester ``k`` wins when it requests
    and no requester strictly between ``last`` and ``k`` (circularly) does.  ``last`` itself
    never wins, so a caller that wants it to keep its turn when nobody else asks does that
    itself.  Built from expressions only (no ``m``), two or three LUT levels for eight
    requesters.
    """
    n = len(requests)
    grant = []
    for k in range(n):
        terms = []
        for p in range(n):
            if p == k:
                continue
            between = [requests[(p + d) % n] for d in range(1, (k - p) % n)]
            blocked = Cat(*between).any() if between else 0
            terms.append(last[p] & ~blocked)
        grant.append(requests[k] & Cat(*terms).any())
    grant = Cat(*grant)
    # ``found`` straight from the requests, not from ``grant``: one LUT level less.
    found = Cat(*[requests[k] & ~last[k] for k in range(n)]).any()
    return found, grant
