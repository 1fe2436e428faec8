"""cocotb tests of one PEACH2 chip under bad input: every kind on every port, errors found late,
locked reads.  Dropped, counted, UR-answered as the reference model
(:mod:`peach2.sim.reference.router`) says; nothing else disturbed.  Traffic generators in
``traffic.py``, harness in :mod:`peach2.sim.harness.router`.
"""
import random
from collections import Counter, defaultdict

import cocotb
from bad_traffic import (
    REG_READER,
    REQUESTER,
    Traffic,
    add_framing_errors,
    completion,
    message,
    random_request,
    run_phase,
    unforwarded_request,
    ur_completions,
)
from cocotbext.pcie.core.tlp import TlpType

from peach2.sim.hardip import damage, tlp_to_avalon_beats
from peach2.sim.harness import (
    CSR_BAR,
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
    program_nodes,
    setup,
    wait_quiet,
)
from peach2.sim.harness.coverage import Coverage
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()


@cocotb.test()
async def bad_input(dut):
    """Every kind of bad input on every port: dropped, counted, UR-answered, nothing disturbed.

    Three phases, each with good writes (routed by a 4-node table, to N translated) mixed in on
    every port and random pauses everywhere:

    1. windows open: unroutable writes; config, I/O and atomic requests; messages; reads from
       E/W/S and host reads into the TCA window; host requests hitting no BAR of ours;
       completions; poisoned writes, reads and completions; framing errors and ``rx_st_err``;
    2. CONTROL.PIO_ENABLE=0: host writes into the TCA window (register writes and reads on N go on);
    3. CONTROL.ROUTE_ENABLE=0: writes arriving on E/W/S.
    """
    chip, drv, bars = await setup(dut, pauses=PARAMS.get("pauses", True))
    rng = random.Random(SEED + 3)
    base = chip.host.dev.bar_addr[TCA_BAR]
    csr_base = chip.host.dev.bar_addr[CSR_BAR]
    # Node 0's region maps across 4 GiB in the host, so N sees 3-DW and 4-DW rewrites.
    state = await program_nodes(drv, base, phys=0xC000_0000)
    n_good = PARAMS.get("good", 24)
    cov = Coverage()
    times = PARAMS.get("times", 1)

    # -- phase 1: windows open --------------------------------------------------------------
    t = Traffic(state, rng, base)
    for p in PORTS:
        bar = 1 << TCA_BAR if p == "n" else 0

        def unroutable(p=p, bar=bar):
            node = rng.randrange(9, 16)
            t.write(p, node)
            if p != "n":                # E/W/S: anywhere in the 64-bit space
                tlp = mwr(rng.randrange(base) & ~3, t.next_seq().to_bytes(4, "little"))
                assert t.add(p, tlp, bar).reason == "UNROUTABLE"
        t.unit(p, unroutable, 2 * times)
        for kind in ("cfg_rd0", "cfg_wr0", "cfg_rd1", "cfg_wr1", "io_rd", "io_wr", "fetch_add",
                     "swap64", "cas", "cas64"):
            t.unit(p, lambda p=p, kind=kind: t.add(p, unforwarded_request(rng, kind)), times)
        for data in (None, rng.randbytes(8)):
            def msg(p=p, data=data):
                tlp, beats = message(rng, data=data)
                assert t.add(p, tlp, 0, beats).reason == "UNSUPPORTED"
            t.unit(p, msg, times)
        t.unit(p, lambda p=p: t.add(p, completion(rng)), times)
        t.unit(p, lambda p=p: t.add(p, completion(rng, data=rng.randbytes(16))), times)

        def read(p=p, bar=bar):
            node = rng.randrange(4)
            length = rng.choice([4, 64, 256])
            tlp = mrd(base + node * NODE_SIZE + 256 * rng.randrange(1 << 20), length,
                      requester=REQUESTER, tag=rng.randrange(1024))
            assert t.add(p, tlp, bar).reason == "READ_REJECTED"
        t.unit(p, read, 2 * times)

        def poisoned(p=p, bar=bar):
            w = node_write(rng, t.next_seq(), base, rng.randrange(4))
            r = mrd(base + 64 * rng.randrange(1 << 20), 4, tag=rng.randrange(1024))
            c = completion(rng, data=rng.randbytes(4))
            for tlp, bd in ((w, bar), (r, bar), (c, 0)):
                tlp.ep = True
                assert t.add(p, tlp, bd).reason == "POISONED"
        t.unit(p, poisoned, times)
        add_framing_errors(t, p, bar, times)
    # Host requests that hit no BAR of ours (the hard IP would not pass them; the chip must
    # still refuse them) and hit BAR 1 (not implemented; BAR 4, the put window, is tb/put's).
    for bardec in (0, 1 << 1):
        t.unit("n", lambda bd=bardec: t.add("n", node_write(rng, t.next_seq(), base, 1), bd),
               times)
        t.unit("n", lambda bd=bardec: t.add("n", mrd(base + 64 * rng.randrange(1 << 20), 8,
                                                     tag=rng.randrange(256)), bd), times)
    t.mix(good_nodes=range(4), n_good=n_good)
    await run_phase(chip, drv, t, "open", cov=cov)

    # -- phase 2: PIO window closed ----------------------------------------------------------
    await drv.enable(pio=False, route=True)
    state.pio_enable = False
    t = Traffic(state, rng, base)
    t.unit("n", lambda: t.write("n", rng.randrange(16)), 6 * times)
    t.unit("n", lambda: t.add("n", mrd(base + 64 * rng.randrange(1 << 20), 4,
                                       tag=rng.randrange(256)), 1 << TCA_BAR), times)
    reg_reads = []

    def register_write_read():
        value = rng.randrange(16)
        node_reg = csr_base + drv.offset("NODE")
        assert t.add("n", mwr(node_reg, value.to_bytes(4, "little")), 1 << CSR_BAR).action \
            == "csr"
        tag = len(reg_reads)
        assert t.add("n", mrd(node_reg, 4, requester=REG_READER, tag=tag), 1 << CSR_BAR).action \
            == "csr"
        reg_reads.append((tag, value))
    t.unit("n", register_write_read, 6)
    t.mix(good_nodes=range(4), n_good=n_good // 2)
    await run_phase(chip, drv, t, "pio closed", reg_reads, cov=cov)

    # -- phase 3: routing closed -------------------------------------------------------------
    await drv.enable(pio=True, route=False)
    state.pio_enable, state.route_enable = True, False
    t = Traffic(state, rng, base)
    for p in ("e", "w", "s"):
        t.unit(p, lambda p=p: t.write(p, rng.randrange(16)), 6 * times)
        t.unit(p, lambda p=p: t.add(p, mrd(base + 64 * rng.randrange(1 << 20), 4,
                                           tag=rng.randrange(256))), times)
    t.mix(good_nodes=range(4), n_good=n_good // 2)
    await run_phase(chip, drv, t, "routing closed", cov=cov)
    chip.check()
    if PARAMS.get("coverage"):
        cov.save(PARAMS["coverage"])


@cocotb.test()
async def late_errors(dut):
    """Framing errors and ``rx_st_err`` found after a TLP's first beat left the RX adapter.

    The RX adapter passes such a TLP on cut-through and marks its last beat ``err``; it counts
    MALFORMED or RX_ERR.  Nothing else may happen: no second drop reason, no UR completion (the
    TLP is not a request anyone can trust), no TX_TLPS on a port it never leaves from.
    """
    chip, drv, bars = await setup(dut, pauses=False)
    rng = random.Random(SEED + 4)
    base = chip.host.dev.bar_addr[TCA_BAR]
    await program_nodes(drv, base, phys=0x3_0000_0000)
    await drv.clear_counters()

    cfg = unforwarded_request(rng, "cfg_wr0")
    cfg.address &= ~4                                       # two beats
    io = unforwarded_request(rng, "io_wr")
    io.address &= ~4                                        # two beats
    lost = node_write(rng, 1, base, 12, length=16)          # no route
    to_w = node_write(rng, 2, base, 2, length=16)           # routed to W
    poisoned = node_write(rng, 3, base, 3, length=16)       # routed to S, poisoned
    poisoned.ep = True
    cases = [(cfg, "long", "MALFORMED"), (io, "err_late", "RX_ERR"),
             (lost, "err_late", "RX_ERR"), (to_w, "short", "MALFORMED"),
             (poisoned, "long", "MALFORMED")]
    want = Counter()
    for tlp, how, reason in cases:
        assert len(tlp_to_avalon_beats(tlp)) >= 2
        chip.models["e"].inject_beats(damage(rng, tlp_to_avalon_beats(tlp, 0, rng), how))
        want[reason] += 1
        dut._log.info("E <- %s %s: expect %s only", tlp.fmt_type.name, how, reason)
    good = node_write(rng, 4, base, 3, length=4)
    chip.models["e"].inject(good)
    await wait_quiet(chip)

    problems = []
    counts = await drv.counters()
    got = {r: counts["E"][r] for r in REASONS + ("UR_SENT",)}
    if got != {r: want[r] for r in got}:
        problems.append(f"COUNT[E]: {got}, expected {dict(want)} and 0 elsewhere")
    urs = ur_completions(chip, "e")
    if urs:
        problems.append(f"E answered with {len(urs)} UR completion(s), for requester/tag "
                        f"{[(c.requester_id, c.tag) for c in urs]}")
    if counts["W"]["TX_TLPS"] != 0:
        problems.append(f"COUNT[W][TX_TLPS] = {counts['W']['TX_TLPS']}: W sent nothing")
    if counts["S"]["TX_TLPS"] != 1:
        problems.append(f"COUNT[S][TX_TLPS] = {counts['S']['TX_TLPS']}: S sent one TLP")
    check_delivered(chip, {"s": [("e", 4, good)]})
    chip.check()
    assert not problems, "\n".join(problems)


@cocotb.test()
async def locked_read(dut):
    """Locked memory reads (MRdLk) on every port, N into both BARs: UNSUPPORTED, answered UR.

    The reference model lists MRdLk with neither reads nor writes: unsupported.  A completion for
    a locked read is CplLk (PCIe base specification, completion types), and the requester must get
    one, so a MRdLk into the register BAR must not vanish in the register block.
    """
    chip, drv, bars = await setup(dut, pauses=False)
    rng = random.Random(SEED + 5)
    base = chip.host.dev.bar_addr[TCA_BAR]
    state = await program_nodes(drv, base, phys=0x3_0000_0000)
    await drv.clear_counters()
    want = {p: Counter() for p in PORTS}
    sent = defaultdict(list)
    for p, bardec in (("n", 1 << TCA_BAR), ("n", 1 << CSR_BAR), ("e", 0), ("w", 0), ("s", 0)):
        address = (base if bardec != 1 << CSR_BAR else chip.host.dev.bar_addr[CSR_BAR]) + 0x40
        tlp = random_request(rng, TlpType.MEM_READ_LOCKED_64, address=address)
        tlp.tag = rng.randrange(256)
        d = decide(state, p, tlp, bardec)
        dut._log.info("%s <- MRdLk bar %d: model says %s", p.upper(), bardec, d)
        if bardec != 1 << CSR_BAR:
            assert (d.action, d.reason, d.ur) == ("drop", "UNSUPPORTED", True), d
        want[p]["UNSUPPORTED"] += 1
        want[p]["UR_SENT"] += 1
        sent[p].append(tlp)
        chip.models[p].inject(tlp, bardec=bardec)
    await wait_quiet(chip)

    problems = []
    counts = await drv.counters()
    for p in PORTS:
        got = {r: counts[p.upper()][r] for r in REASONS + ("UR_SENT",)}
        if got != {r: want[p][r] for r in got}:
            problems.append(f"COUNT[{p.upper()}]: {+Counter(got)}, expected {dict(want[p])}")
        cpls = [t for t in chip.sent[p] if t.is_completion() and t.requester_id != HOST_ID]
        answered = [(c.fmt_type.name, c.status.name, c.tag) for c in cpls]
        expected = [("CPL_LOCKED", "UR", r.tag) for r in sent[p]]
        if answered != expected:
            problems.append(f"port {p}: completions {answered}, expected {expected}")
    chip.check()
    assert not problems, "\n".join(problems)
