"""Traffic generators of the bad-input tests (``bad_input_tb.py``): broken and unforwardable TLPs.

Builders of requests the chip never forwards (config, I/O, atomics), unsolicited completions,
messages, framing damage (:func:`add_framing_errors`), and :class:`Traffic`, which mixes them
with good writes on every port and keeps what the reference model
(:mod:`peach2.sim.reference.router`) says must come of each; :func:`run_phase` injects one mix and
checks deliveries, UR completions and the COUNT registers.
"""
from collections import Counter, defaultdict

from cocotb.triggers import ClockCycles
from cocotbext.pcie.core.tlp import CplStatus, Tlp, TlpType
from cocotbext.pcie.core.utils import PcieId

from peach2.sim.hardip import damage, tlp_to_avalon_beats
from peach2.sim.harness import (
    HOST_ID,
    NODE_SIZE,
    PORTS,
    REASONS,
    TCA_BAR,
    check_delivered,
    decide,
    mrd,
    mwr,
    node_write,
    requests_sent,
    sample_outcomes,
    seq_of,
    wait_until,
)
from peach2.sim.reference import translate

#: Requester IDs of the injected requests: never the host's 00:00.0, so that completions toward N
#: stay in the captures instead of going to the host (see ChipHarness._default_pass).
REQUESTER = PcieId(0x41, 0, 0)
REG_READER = PcieId(0x42, 0, 0)


def random_request(rng, fmt_type, *, address=0, data=None, tag=None, requester=REQUESTER):
    """Return a ``fmt_type`` request from ``requester``; random tag (unless given), TC, attr."""
    tlp = Tlp()
    tlp.fmt_type = fmt_type
    tlp.requester_id = requester
    tlp.tag = rng.randrange(1024) if tag is None else tag
    tlp.tc = rng.randrange(8)
    tlp.attr = rng.randrange(8)
    if data is not None:
        tlp.set_addr_be_data(address, data)
    else:
        tlp.set_addr_be(address, 4)
    return tlp


def unforwarded_request(rng, kind):
    """Return a non-posted request of a type the chip never forwards (config, I/O, atomics)."""
    if kind in ("cfg_rd0", "cfg_wr0", "cfg_rd1", "cfg_wr1"):
        ft = {"cfg_rd0": TlpType.CFG_READ_0, "cfg_wr0": TlpType.CFG_WRITE_0,
              "cfg_rd1": TlpType.CFG_READ_1, "cfg_wr1": TlpType.CFG_WRITE_1}[kind]
        data = rng.randbytes(4) if "wr" in kind else None
        tlp = random_request(rng, ft, address=4 * rng.randrange(1024), data=data)
        tlp.completer_id = PcieId(rng.randrange(1, 256), rng.randrange(32), rng.randrange(8))
        return tlp
    if kind in ("io_rd", "io_wr"):
        data = rng.randbytes(4) if kind == "io_wr" else None
        ft = TlpType.IO_WRITE if data else TlpType.IO_READ
        return random_request(rng, ft, address=4 * rng.randrange(1 << 30), data=data)
    ft, size = {"fetch_add": (TlpType.FETCH_ADD, 4), "swap64": (TlpType.SWAP_64, 8),
                "cas": (TlpType.CAS, 8), "cas64": (TlpType.CAS_64, 16)}[kind]
    high = 1 << 32 if ft in (TlpType.SWAP_64, TlpType.CAS_64) else 0
    return random_request(rng, ft, address=high + size * rng.randrange(1 << 20),
                    data=rng.randbytes(size))


def completion(rng, *, data=None, ep=False):
    """Return a completion nobody asked the chip for."""
    tlp = Tlp()
    tlp.fmt_type = TlpType.CPL_DATA if data else TlpType.CPL
    tlp.requester_id = PcieId(rng.randrange(256), 0, 0)
    tlp.completer_id = PcieId(rng.randrange(1, 256), 0, 0)
    tlp.tag = rng.randrange(256)
    tlp.ep = ep
    if data:
        tlp.set_data(data)
        tlp.byte_count = len(data)
        tlp.lower_address = 4 * rng.randrange(32)
    return tlp


def message(rng, *, data=None):
    """Return ``(tlp, beats)`` of a vendor-defined message (cocotbext-pcie cannot pack one)."""
    tlp = Tlp()
    tlp.fmt_type = TlpType.MSG_DATA_LOCAL if data else TlpType.MSG_LOCAL
    tlp.requester_id = REQUESTER
    tlp.tag = rng.randrange(256)
    if data:
        tlp.set_data(data)          # its Length, for the coverage's size bin
    # Framed like a 4-DW request whose address has bit 2 clear: payload from stream DW 4.
    carrier = mwr(1 << 32, data) if data else mrd(1 << 32, 4)
    beats = tlp_to_avalon_beats(carrier, 0, rng)
    length = len(data) // 4 if data else 0
    dw0 = (0b011 if data else 0b001) << 29 | 0x14 << 24 | length
    dw1 = int(tlp.requester_id) << 16 | tlp.tag << 8 | 0x7F        # Vendor_Defined Type 1
    beats[0] = beats[0]._replace(data=dw0 | dw1 << 32, be=0)
    return tlp, beats


class Traffic:
    """What to inject on every port, and what the reference model says must come of it.

    Build it from *units*: callables that add a few TLPs when called.  :meth:`mix` shuffles the
    units of each port and calls them in that order, so sequence numbers follow injection order.

    Members
    -------
    expected : dict
        Out port -> ``[(source port, seq, Tlp as it must leave)]``.
    urs : dict
        Port -> requests it must answer with an Unsupported Request completion, in order.
    counts : dict
        Port -> :class:`collections.Counter` of COUNT reasons (``UR_SENT`` included).
    outcomes : list
        ``(port, tlp, decision or (dest, error))`` of every TLP, for the coverage
        (:func:`peach2.sim.harness.sample_outcomes`).
    """

    def __init__(self, state, rng, base):
        self.state, self.rng, self.base = state, rng, base
        self.units = {p: [] for p in PORTS}
        self.items = {p: [] for p in PORTS}
        self.expected = defaultdict(list)
        self.urs = defaultdict(list)
        self.counts = {p: Counter() for p in PORTS}
        self.outcomes = []
        self.seq = 0

    def next_seq(self):
        self.seq += 1
        return self.seq

    def add(self, port, tlp, bardec=0, beats=None, reason=None):
        """Queue ``tlp`` (or raw ``beats`` standing for it) on ``port``; return the decision.

        Without ``reason`` the reference model decides.  With it (framing errors, which the
        model never sees) the TLP must be dropped unanswered and counted under ``reason`` only.
        """
        decision = None
        if reason is not None:
            self.counts[port][reason] += 1
            self.outcomes.append((port, tlp, ("drop", reason)))
        else:
            decision = decide(self.state, port, tlp, bardec)
            self.outcomes.append((port, tlp, decision))
            if decision.action == "forward":
                out = decision.port.lower()
                want = translate(self.state, tlp) if out == "n" else tlp
                self.expected[out].append((port, seq_of(tlp), want))
            elif decision.action == "drop":
                self.counts[port][decision.reason] += 1
                if decision.ur:
                    self.urs[port].append(tlp)
                    self.counts[port]["UR_SENT"] += 1
        self.items[port].append((tlp, bardec, beats))
        return decision

    def write(self, port, node, **kwargs):
        """Queue a MWr into ``node``'s region (from the host's side of the TCA BAR on N)."""
        tlp = node_write(self.rng, self.next_seq(), self.base, node, **kwargs)
        return self.add(port, tlp, 1 << TCA_BAR if port == "n" else 0)

    def unit(self, port, fn, times=1):
        self.units[port].extend([fn] * times)

    def mix(self, good_nodes, n_good):
        """Shuffle each port's units with ``n_good`` writes to ``good_nodes``; build the items.

        Every port ends with a good write, so no broken packet is left waiting for a successor.
        """
        for p in PORTS:
            units = self.units[p] + [lambda p=p: self.write(p, self.rng.choice(good_nodes))] \
                * n_good
            self.rng.shuffle(units)
            for fn in units:
                fn()
            self.write(p, self.rng.choice(good_nodes))

    def inject(self, chip):
        for p in PORTS:
            for tlp, bardec, beats in self.items[p]:
                if beats is None:
                    chip.models[p].inject(tlp, bardec=bardec)
                else:
                    chip.models[p].inject_beats(beats)


def ur_completions(chip, port):
    return [t for t in chip.sent[port] if t.is_completion() and t.status == CplStatus.UR]


def check_urs(chip, port, requests):
    """Assert ``port`` sent exactly one UR completion per request in ``requests``, in order."""
    got = ur_completions(chip, port)
    assert len(got) == len(requests), (
        f"port {port}: {len(got)} UR completions, expected {len(requests)}: "
        f"{[(c.requester_id, c.tag) for c in got][:8]} vs "
        f"{[(r.fmt_type.name, r.requester_id, r.tag) for r in requests][:8]}")
    completer = chip.models["n"].pcie_id
    for req, cpl in zip(requests, got):
        want = (TlpType.CPL, CplStatus.UR, req.requester_id, req.tag, completer, int(req.tc),
                int(req.attr))
        have = (cpl.fmt_type, cpl.status, cpl.requester_id, cpl.tag, cpl.completer_id,
                int(cpl.tc), int(cpl.attr))
        assert have == want, f"port {port}: UR {cpl!r} answers {req!r}; expected {want}"


async def run_phase(chip, drv, traffic, name, reg_reads=(), cov=None):
    """Inject ``traffic``, wait for its results, check them and the counters; return counts.

    ``reg_reads`` are ``(tag, value)`` of register reads injected on N by ``REG_READER``
    (``value`` None: answered Completer Abort without data).  ``cov``, a
    :class:`~peach2.sim.harness.Coverage`, samples the traffic once it is checked.
    """
    await drv.clear_counters()
    for p in PORTS:
        chip.sent[p].clear()
    traffic.inject(chip)
    for model in chip.models.values():
        await model.rx_idle()

    def done():
        return all(len(requests_sent(chip, p)) >= len(traffic.expected[p])
                   and len(ur_completions(chip, p)) >= len(traffic.urs[p]) for p in PORTS)
    await wait_until(chip, done, f"phase {name}: delivery")
    await ClockCycles(chip.dut.clk, 300)        # anything extra would show up by now

    check_delivered(chip, traffic.expected)
    for p in PORTS:
        check_urs(chip, p, traffic.urs[p])
        others = [t for t in chip.sent[p] if t.is_completion() and t.status != CplStatus.UR
                  and not (p == "n" and t.requester_id in (HOST_ID, REG_READER))]
        assert not others, f"port {p}: unexpected completions {others[:3]}"
    reads = [t for t in chip.sent["n"] if t.is_completion() and t.requester_id == REG_READER]
    assert [(t.fmt_type, t.status, t.tag, bytes(t.get_data())) for t in reads] == [
        (TlpType.CPL_DATA, CplStatus.SC, tag, value.to_bytes(4, "little")) if value is not None
        else (TlpType.CPL, CplStatus.CA, tag, b"") for tag, value in reg_reads], \
        f"register reads on N: {reads}"

    counts = await drv.counters()
    for p in PORTS:
        want = {r: traffic.counts[p][r] for r in REASONS + ("UR_SENT",)}
        got = {r: counts[p.upper()][r] for r in want}
        assert got == want, f"phase {name}, port {p}: COUNT {got}, expected {want}"
    if cov is not None:
        sample_outcomes(cov, chip, traffic.outcomes)
    dut = chip.dut
    dut._log.info("phase %s: %s forwarded, URs %s, drops %s", name,
                  {p: len(traffic.expected[p]) for p in PORTS},
                  {p: len(traffic.urs[p]) for p in PORTS},
                  {p: dict(+traffic.counts[p]) for p in PORTS})
    return counts


def add_framing_errors(t, port, bardec, times=1):
    """Units of TLPs broken in framing or flagged ``rx_st_err``, on ``port``.

    Errors the RX adapter sees on the start-of-packet beat hit any kind of TLP; errors it sees
    later hit routed writes only (their head has left cut-through; the TX adapter drops them).
    """
    rng = t.rng

    def victim(kind):
        if kind == "mrd":
            return mrd(t.base + rng.randrange(4) * NODE_SIZE + 8 * rng.randrange(1 << 20), 4,
                       tag=rng.randrange(256)), bardec
        if kind == "cpl":
            return completion(rng), 0
        if kind == "cfg_rd0":
            return unforwarded_request(rng, "cfg_rd0"), 0
        if kind in ("mwr1", "mwr_2beat"):
            # A 3-DW header (below 4 GiB, no route there): one beat with address bit 2 set, two
            # with it clear.  Its framing error shows on the first beat.
            address = 8 * rng.randrange(1 << 28) + (4 if kind == "mwr1" else 0)
            return mwr(address, t.next_seq().to_bytes(4, "little")), bardec
        if kind == "cfg_wr0_2beat":
            tlp = unforwarded_request(rng, "cfg_wr0")
            tlp.address &= ~4
            return tlp, 0
        node = rng.randrange(4)
        return node_write(rng, t.next_seq(), t.base, node, length=rng.choice([8, 17, 64])), \
            bardec

    def broken(kind, how, reason, then_good=False):
        def fn():
            tlp, bd = victim(kind)
            beats = tlp_to_avalon_beats(tlp, bd, rng)
            assert len(beats) == {"mrd": 1, "cpl": 1, "cfg_rd0": 1, "mwr1": 1}.get(kind, 2) \
                or kind == "mwr", (kind, len(beats))
            t.add(port, tlp, bd, damage(rng, beats, how), reason)
            if then_good:               # the next start of packet ends the broken one
                t.write(port, rng.randrange(4))
        t.unit(port, fn, times)

    for kind in ("mrd", "cpl", "cfg_wr0_2beat", "mwr"):
        broken(kind, "err_sop", "RX_ERR")
    for kind in ("mrd", "cpl", "cfg_rd0", "mwr1"):
        broken(kind, "long", "MALFORMED")
        broken(kind, "empty", "MALFORMED")
        broken(kind, "no_eop", "MALFORMED", then_good=True)
    for kind in ("mwr_2beat", "cfg_wr0_2beat"):
        broken(kind, "short", "MALFORMED")
    broken("mwr", "stray", "MALFORMED")
    # Found after the head has left: routed writes only.
    for how in ("short", "long", "empty"):
        broken("mwr", how, "MALFORMED")
    broken("mwr", "no_eop", "MALFORMED", then_good=True)
    broken("mwr", "err_late", "RX_ERR")
