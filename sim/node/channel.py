"""A shared resource that moves bytes at a fixed rate: one direction of a link, a copy engine.

A transfer crossing several channels is served by each of them in turn of arrival: on every
channel it starts when that channel is free and occupies it for its own service time
(bytes / rate); it is done when the last channel has carried it.  That is a fluid approximation
of a pipelined path: a slow hop (QPI at 290 MB/s, a GPU's BAR reads) paces the transfer, while
a fast hop it shares with other traffic (the HCA's Gen3 x8 link) is only held for the time the
bytes take on it, so that other traffic still gets through at the rate left over.
"""

import math
from fractions import Fraction

__all__ = ["Channel"]


class Channel:
    """A resource busy until some time, with a rate in bytes per second.

    Members
    -------
    name : str
        For messages and statistics, e.g. ``"hca.rd"``, ``"gpu2.bar"``, ``"qpi.p2p->0"``.
    bytes_per_s : float
        Data rate.
    busy_until : int
        Time (ps) from which the channel is free.
    bytes : int
        Bytes carried so far.
    """

    def __init__(self, name, bytes_per_s):
        if isinstance(bytes_per_s, bool) or not isinstance(bytes_per_s, (int, float)) \
                or not math.isfinite(bytes_per_s) or bytes_per_s <= 0:
            raise ValueError(f"channel {name}: rate must be a positive number, "
                             f"not {bytes_per_s!r}")
        self.name = name
        self.bytes_per_s = bytes_per_s
        self.ps_per_byte = Fraction(10 ** 12) / Fraction(str(bytes_per_s))
        self.busy_until = 0
        self.bytes = 0

    def __repr__(self):
        return f"Channel({self.name}, {self.bytes_per_s:.3g} B/s, busy until {self.busy_until})"

    def service_ps(self, nbytes):
        """Time ``nbytes`` occupy this channel."""
        return math.ceil(nbytes * self.ps_per_byte)

    @staticmethod
    def transfer(channels, t_ps, nbytes):
        """Move ``nbytes`` through ``channels`` from ``t_ps`` on; return ``(start, end)``.

        Each channel serves the bytes from when it is free (and not before ``t_ps``) for its
        own service time; ``start`` is the earliest of those starts, ``end`` the latest end.
        """
        start = end = None
        for ch in channels:
            begin = max(t_ps, ch.busy_until)
            ch.busy_until = begin + ch.service_ps(nbytes)
            ch.bytes += nbytes
            start = begin if start is None else min(start, begin)
            end = ch.busy_until if end is None else max(end, ch.busy_until)
        if start is None:
            return t_ps, t_ps
        return start, end
