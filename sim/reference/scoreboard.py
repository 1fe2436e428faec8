"""Scoreboard of every byte written into the hosts' windows of a sub-cluster (the soak).

Pure Python, no simulator: the soak (``tb/cluster/soak_tb.py``) tells it what was issued and
what arrived; its own unit tests (``tb/cluster/test_scoreboard.py``) inject faults.

**Ordering domains.**  PCIe keeps posted writes of one requester on one path in order (base
specification, transaction ordering: a posted request may not pass a posted request).  In a
sub-cluster a domain is one source (a host's stores, or one DMA channel of a chip: each
issues its writes in program order) and one destination node: the route tables send every
write of that pair along the same path.  Writes of different domains have no order between
them, so every domain gets its own destination range (:meth:`Scoreboard.add_domain`): the
expected final memory is then exact whatever the interleaving.

**Issued.**  :meth:`Scoreboard.issue` records one write (destination offset and bytes) of a
domain, in the order the source makes them: PIO stores as stored, DMA writes as
:func:`peach2.sim.reference.dma.transfer_writes` expands the descriptors (bursts, then the
completion write).  The issued bytes form one sequence per domain, so the check does not
depend on how the writes are cut into TLPs (the root complex's or the DMA's split).

**Arrived.**  :meth:`Scoreboard.arrive` takes one memory write as the destination host's root
complex received it (offset in the window, bytes its byte enables select).  It must be the
next bytes of its domain's sequence, same addresses, same values.  Otherwise it is classified:

- ``corrupted``: the addresses are the expected ones, some values are not (or the write lands
  in no domain's range, or matches nothing issued);
- ``reordered``: the bytes are issued ones further down the sequence (they overtook earlier
  writes of their domain); the bytes they skipped stay expected;
- ``duplicated``: the bytes already arrived (matching a recently consumed write);
- ``lost``: at :meth:`Scoreboard.finish`, bytes issued that never arrived.

:meth:`Scoreboard.check_memory` compares a destination's memory with the final value of every
byte (the windows' initial contents, then every issued write in its domain's order), so a
byte changed by anything the arrival hook does not see is caught too.

Simplification: the matching is of values, so a duplicate of a write whose bytes equal the
next expected ones (same addresses and data issued twice in a row) passes as the second
write; the soak draws random data, so that needs two equal random payloads.
"""

import bisect
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Scoreboard", "Domain", "FAULTS"]

#: The fault classes the scoreboard reports (keys of :attr:`Scoreboard.faults`).
FAULTS = ("lost", "duplicated", "corrupted", "reordered")

_HISTORY = 64       # consumed writes kept per domain to recognise duplicates


@dataclass
class Domain:
    """One ordering domain: a source writing into one destination node's range ``[lo, hi)``.

    ``pending`` holds ``[offset, data, position, overtaken]`` of issued writes not (fully)
    arrived, in issue order (``overtaken``: None, or how a later write overtook them);
    ``history`` the last consumed ones ``(offset, data)``.
    """
    name: object
    node: int
    lo: int
    hi: int
    pending: deque = field(default_factory=deque)
    history: deque = field(default_factory=lambda: deque(maxlen=_HISTORY))
    issued: int = 0          # bytes issued
    arrived: int = 0         # bytes arrived as expected

    @property
    def outstanding(self):
        """Bytes issued and not arrived yet."""
        return sum(len(d) - p for _, d, p, _ in self.pending)


class Scoreboard:
    """Expected bytes per ordering domain, arrival checks, final memory per node.

    Parameters
    ----------
    initial : list of bytes
        Each destination node's window contents before the traffic (its size is the window's).
    max_reports : int
        Fault descriptions kept in :attr:`reports` (all are counted in :attr:`faults`).

    Members
    -------
    faults : dict
        ``{class: count}`` of :data:`FAULTS` (bytes for ``lost``, writes otherwise).
    reports : list of str
        The first ``max_reports`` faults, described.
    tlps, bytes_checked : int
        Writes and bytes that arrived and matched.
    """

    def __init__(self, initial, *, max_reports=20):
        self.expected = [bytearray(m) for m in initial]
        self.domains = {}
        self._ranges = [[] for _ in initial]        # per node: sorted [(lo, hi, domain)]
        self.faults = dict.fromkeys(FAULTS, 0)
        self.reports = []
        self.max_reports = max_reports
        self.tlps = 0
        self.bytes_checked = 0

    # -- set-up ---------------------------------------------------------------------------------

    def add_domain(self, name, node, lo, hi):
        """Give domain ``name`` the offsets ``[lo, hi)`` of ``node``'s window (disjoint from
        every other domain's there); return the :class:`Domain`."""
        if name in self.domains:
            raise ValueError(f"domain {name!r} exists")
        if not 0 <= lo < hi <= len(self.expected[node]):
            raise ValueError(f"range {lo:#x}..{hi:#x} outside node {node}'s window")
        ranges = self._ranges[node]
        i = bisect.bisect(ranges, (lo,))
        if (i > 0 and ranges[i - 1][1] > lo) or (i < len(ranges) and ranges[i][0] < hi):
            raise ValueError(f"range {lo:#x}..{hi:#x} of node {node} overlaps another domain")
        dom = Domain(name, node, lo, hi)
        ranges.insert(i, (lo, hi, dom))
        self.domains[name] = dom
        return dom

    def domain_at(self, node, offset):
        """Return the domain whose range holds ``offset`` of ``node``'s window, or None."""
        ranges = self._ranges[node]
        i = bisect.bisect(ranges, (offset, float("inf"))) - 1
        if i >= 0 and ranges[i][0] <= offset < ranges[i][1]:
            return ranges[i][2]
        return None

    # -- issue and arrival ---------------------------------------------------------------------

    def issue(self, name, offset, data):
        """Record that domain ``name`` writes ``data`` at ``offset`` of its node's window,
        after every write issued before in that domain."""
        dom = self.domains[name]
        data = bytes(data)
        if not dom.lo <= offset <= offset + len(data) <= dom.hi:
            raise ValueError(f"{len(data)} bytes at {offset:#x} outside domain {name!r} "
                             f"({dom.lo:#x}..{dom.hi:#x})")
        if data:
            dom.pending.append([offset, data, 0, None])
            dom.issued += len(data)
            self.expected[dom.node][offset:offset + len(data)] = data

    def arrive(self, node, offset, data):
        """Check one write that arrived in ``node``'s window at ``offset``; return True if it
        was the next bytes of its domain."""
        data = bytes(data)
        dom = self.domain_at(node, offset)
        if dom is None or offset + len(data) > dom.hi:
            self._fault("corrupted", f"node {node}: {len(data)} bytes at {offset:#x} outside "
                        "every domain's range")
            return False
        if self._take_in_order(dom, offset, data):
            self.tlps += 1
            self.bytes_checked += len(data)
            dom.arrived += len(data)
            return True
        self._classify(dom, offset, data)
        return False

    def arrive_tlp(self, node, window_base, tlp):
        """:meth:`arrive` for a cocotbext-pcie memory write TLP received at bus address
        ``tlp.address`` by ``node``'s host, whose window starts at bus address
        ``window_base``; the bytes its byte enables select (each enabled run separately)."""
        ok = True
        for address, data in _enabled_runs(tlp):
            ok &= self.arrive(node, address - window_base, data)
        return ok

    def _take_in_order(self, dom, offset, data):
        """Consume ``data`` at ``offset`` if it is the next of ``dom``'s sequence."""
        pending = dom.pending
        if not pending:
            return False
        off, seg_data, pos, _ = pending[0]
        n = len(data)
        if off + pos == offset and n <= len(seg_data) - pos:      # the usual case: fast
            if seg_data[pos:pos + n] != data:
                return False
        else:
            flat = self._flatten(dom, n)
            if [a for a, _, _ in flat] != list(range(offset, offset + n)) or \
                    bytes(v for _, v, _ in flat) != data:
                return False
        self._advance(dom, n)
        return True

    def _advance(self, dom, n):
        """Drop the first ``n`` pending bytes of ``dom`` (they arrived).  Bytes that a later
        write overtook arriving now confirm the reordering."""
        pending = dom.pending
        while n:
            seg = pending[0]
            take = min(n, len(seg[1]) - seg[2])
            if seg[3] is not None:
                self._fault("reordered", seg[3])
                seg[3] = None
            dom.history.append((seg[0] + seg[2], seg[1][seg[2]:seg[2] + take]))
            seg[2] += take
            n -= take
            if seg[2] == len(seg[1]):
                pending.popleft()

    @staticmethod
    def _flatten(dom, limit=None):
        """Return ``[(offset, value, overtaken)]`` of ``dom``'s pending bytes (the first
        ``limit``)."""
        out = []
        for off, data, pos, overtaken in dom.pending:
            for i in range(pos, len(data)):
                out.append((off + i, data[i], overtaken))
                if limit is not None and len(out) >= limit:
                    return out
        return out

    def _classify(self, dom, offset, data):
        """Name the fault of an arrival that is not the next in its domain (slow path)."""
        n = len(data)
        want = list(zip(range(offset, offset + n), data))
        flat = self._flatten(dom)
        pairs = [(a, v) for a, v, _ in flat]
        where = f"domain {dom.name!r}, {n} bytes at {offset:#x}"
        for start in range(1, len(pairs) - n + 1):      # further down: it overtook others
            if pairs[start:start + n] == want:
                # A reordering once the bytes it overtook arrive; if they never do, a loss.
                self._remove(dom, flat, start, n, f"{where} arrived before {start} earlier "
                             f"bytes of its domain (from {flat[0][0]:#x})")
                return
        for off, old in dom.history:                    # already arrived
            if off <= offset and offset + n <= off + len(old) and \
                    old[offset - off:offset - off + n] == data:
                self._fault("duplicated", f"{where} arrived again")
                return
        if [a for a, _ in pairs[:n]] == [a for a, _ in want]:
            bad = sum(1 for (_, v), b in zip(pairs, data) if v != b)
            self._fault("corrupted", f"{where}: {bad} byte(s) differ from the expected")
            self._advance(dom, n)
            return
        first = f"{flat[0][0]:#x}" if flat else "nothing"
        self._fault("corrupted", f"{where} match no issued write (next expected at {first})")

    def _remove(self, dom, flat, start, n, overtaken):
        """Rebuild ``dom.pending`` without bytes ``start .. start+n`` of ``flat`` (they
        arrived); the bytes before them are marked ``overtaken``."""
        for off, value, _ in flat[start:start + n]:
            dom.history.append((off, bytes([value])))
        marked = [(o, v, overtaken) for o, v, _ in flat[:start]] + flat[start + n:]
        pending = []
        for off, value, mark in marked:
            last = pending[-1] if pending else None
            if last and last[0] + len(last[1]) == off and last[3] == mark:
                last[1].append(value)
            else:
                pending.append([off, bytearray([value]), 0, mark])
        dom.pending = deque([o, bytes(d), 0, m] for o, d, _, m in pending)

    def _fault(self, kind, text):
        self.faults[kind] += 1
        if len(self.reports) < self.max_reports:
            self.reports.append(f"{kind}: {text}")

    # -- the end ------------------------------------------------------------------------------

    @property
    def outstanding(self):
        """Bytes issued that have not arrived, over all domains."""
        return sum(d.outstanding for d in self.domains.values())

    def finish(self):
        """Count every byte still pending as lost; return :attr:`faults`."""
        for dom in self.domains.values():
            left = dom.outstanding
            if left:
                first = dom.pending[0]
                self._fault("lost", f"domain {dom.name!r}: {left} bytes never arrived, the "
                            f"first at {first[0] + first[2]:#x}")
                self.faults["lost"] += left - 1
                dom.pending.clear()
        return self.faults

    def check_memory(self, node, memory):
        """Compare ``node``'s window contents ``memory`` with the final value of every byte;
        count each differing run as ``corrupted`` and return the number of bytes differing."""
        want = self.expected[node]
        memory = bytes(memory)
        if memory == want:
            return 0
        bad = [i for i in range(len(want)) if memory[i] != want[i]]
        runs = 1 + sum(1 for a, b in zip(bad, bad[1:]) if b != a + 1)
        self._fault("corrupted", f"node {node}: memory differs from the expected final value "
                    f"at {len(bad)} bytes in {runs} run(s), first at {bad[0]:#x}")
        self.faults["corrupted"] += runs - 1
        return len(bad)

    @property
    def clean(self):
        """No fault of any class."""
        return not any(self.faults.values())

    def summary(self):
        """One line: writes and bytes checked, faults per class."""
        faults = ", ".join(f"{k} {v}" for k, v in self.faults.items())
        return (f"{self.tlps} writes, {self.bytes_checked} bytes checked in order; {faults}; "
                f"{self.outstanding} bytes outstanding")


def _enabled_runs(tlp):
    """Return ``[(bus address, bytes)]`` of the contiguous runs of a memory write's enabled
    bytes (one run for every write our sources make; byte-enable holes split it)."""
    data = bytes(tlp.get_data())
    n = 4 * tlp.length
    first = tlp.first_be
    last = tlp.last_be if tlp.length > 1 else 0xF
    base = tlp.address & ~3
    if first in _CONTIGUOUS[tlp.length > 1] and last in _CONTIGUOUS_LAST:
        lead = (first & -first).bit_length() - 1
        if tlp.length == 1:
            return [(base + lead, data[lead:first.bit_length()])]
        return [(base + lead, data[lead:n - 4 + last.bit_length()])]
    enabled = [True] * n
    for k in range(4):
        enabled[k] = bool(first >> k & 1)
        enabled[n - 4 + k] = enabled[n - 4 + k] and bool(last >> k & 1)
    runs, start = [], None
    for i in range(n + 1):
        on = i < n and enabled[i]
        if on and start is None:
            start = i
        elif not on and start is not None:
            runs.append((base + start, data[start:i]))
            start = None
    return runs


#: Byte enables with no hole: of a one-DW write (any run), of a longer write's first DW (a run
#: up to byte 3), of its last DW (a run from byte 0).
_CONTIGUOUS = {False: {m for m in range(1, 16) if (m >> ((m & -m).bit_length() - 1)) & (
    (m >> ((m & -m).bit_length() - 1)) + 1) == 0}, True: {0xF, 0xE, 0xC, 0x8}}
_CONTIGUOUS_LAST = {0x1, 0x3, 0x7, 0xF}
