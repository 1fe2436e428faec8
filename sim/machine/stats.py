"""Counters of one rank's synchronisation: windows, crossings and where the wall time went."""

from dataclasses import asdict, dataclass

__all__ = ["SyncStats"]


@dataclass
class SyncStats:
    """What one rank spent on the machine's run calls so far.

    Members
    -------
    windows : int
        Windows stepped (windows in which nothing happened anywhere are skipped, not counted).
    exchanges : int
        Collective exchanges: one per window plus one at the start of every run call.
    crossings_sent, crossings_received : int
        Items this rank's partitions sent to, and received from, other partitions.
    simulated_ps : int
        Simulated time the run calls covered.
    step_s : float
        Wall seconds advancing this rank's partitions and their models, and injecting.
    exchange_s : float
        Wall seconds inside the exchanges: waiting for the slowest rank at each window edge
        plus moving the data.
    wall_s : float
        Wall seconds inside the run calls.
    """

    windows: int = 0
    exchanges: int = 0
    crossings_sent: int = 0
    crossings_received: int = 0
    simulated_ps: int = 0
    step_s: float = 0.0
    exchange_s: float = 0.0
    wall_s: float = 0.0

    @property
    def exchange_fraction(self):
        """Share of the wall time spent at window edges (0 before any run)."""
        return self.exchange_s / self.wall_s if self.wall_s else 0.0

    @property
    def rate_ns_per_s(self):
        """Simulated nanoseconds per wall second (0 before any run)."""
        return self.simulated_ps / 1000 / self.wall_s if self.wall_s else 0.0

    def as_dict(self):
        """Return the counters and the two derived figures as a plain dict."""
        out = asdict(self)
        out["exchange_fraction"] = self.exchange_fraction
        out["rate_ns_per_s"] = self.rate_ns_per_s
        return out
