"""Which partition owns which switch port.

A partition is the unit of parallelism of the machine: one sub-cluster's nodes, and so their
HCAs on the flat InfiniBand switch.  The layout is fixed for a run; every rank computes the same
one from the same arguments, so it never travels between ranks.
"""

__all__ = ["Layout"]


class Layout:
    """Ports of the flat switch grouped into partitions.

    Parameters
    ----------
    n_partitions : int
        Number of partitions (at least 1).
    ports_per_partition : int or sequence of int
        Ports each partition owns: one number for equal partitions, numbered consecutively
        (partition 0 owns ports ``0 .. k-1``, partition 1 the next ``k``, ...), or one number
        per partition.

    Members
    -------
    n_partitions : int
        Number of partitions.
    n_ports : int
        Ports on the switch, the sum over the partitions (at least 2).
    """

    def __init__(self, n_partitions, ports_per_partition):
        if isinstance(n_partitions, bool) or not isinstance(n_partitions, int) \
                or n_partitions < 1:
            raise ValueError(f"n_partitions must be a positive integer, not {n_partitions!r}")
        if isinstance(ports_per_partition, int) and not isinstance(ports_per_partition, bool):
            sizes = [ports_per_partition] * n_partitions
        else:
            sizes = list(ports_per_partition)
        if len(sizes) != n_partitions:
            raise ValueError(f"ports_per_partition names {len(sizes)} partitions, "
                             f"not {n_partitions}")
        for size in sizes:
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"every partition needs at least one port, not {size!r}")
        if sum(sizes) < 2:
            raise ValueError("a switch needs at least 2 ports")
        self.n_partitions = n_partitions
        self.n_ports = sum(sizes)
        self._first = []
        self._owner = []
        for index, size in enumerate(sizes):
            self._first.append(len(self._owner))
            self._owner.extend([index] * size)
        self._sizes = sizes

    def partition_of(self, port):
        """Return the partition that owns ``port``; ``ValueError`` for a port not on the switch."""
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < self.n_ports:
            raise ValueError(f"port {port!r} is not on the switch (0..{self.n_ports - 1})")
        return self._owner[port]

    def ports(self, partition):
        """Return the ports ``partition`` owns, as a ``range``."""
        self._check(partition)
        first = self._first[partition]
        return range(first, first + self._sizes[partition])

    def owners(self):
        """Return the owning partition of every port, indexed by port."""
        return list(self._owner)

    def _check(self, partition):
        if isinstance(partition, bool) or not isinstance(partition, int) \
                or not 0 <= partition < self.n_partitions:
            raise ValueError(f"partition {partition!r} does not exist "
                             f"(0..{self.n_partitions - 1})")

    def __eq__(self, other):
        return isinstance(other, Layout) and self._sizes == other._sizes

    def __hash__(self):
        return hash(tuple(self._sizes))

    def __repr__(self):
        if len(set(self._sizes)) == 1:
            return f"Layout({self.n_partitions}, {self._sizes[0]})"
        return f"Layout({self.n_partitions}, {self._sizes})"
