"""``peach2.put.engine.PutEngine`` alone (Amaranth simulator) against the reference model
``peach2.sim.reference.put`` (docs/put.md): every put's writes, byte for byte and in order, or its
refusal; the counters, the MSI strobes; the queue's back-pressure; the first put after reset; the
latency through the engine."""

import random

import pytest
from amaranth.sim import Simulator

from peach2.params import PUT_QUEUE, PutError
from peach2.put.descriptor import DATA_BYTES, pack
from peach2.put.engine import PutEngine
from peach2.sim.harness.router import mwr
from peach2.sim.reference.put import PutWrite, put_outcome
from peach2.sim.reference.router import RouteEntry, RouterState
from peach2.sim.reference.stream import Beat, beats_to_tlp, tlp_to_beats

PORTS = ("N", "E", "W", "S")
NODE = 1 << 32                      # each node's TCA region: 4 GiB


def at(node, offset=0):
    """TCA address ``offset`` into node ``node``'s region (regions start at 4 GiB)."""
    return (node + 1) * NODE + offset


#: Nodes 0-3 leave through N, E, W, S; node 7's entry is disabled; nothing else is mapped.
STATE = RouterState(routes=[RouteEntry(~(NODE - 1) & (2**64 - 1), at(n), at(n), port)
                            for n, port in enumerate(PORTS)]
                    + [RouteEntry(~(NODE - 1) & (2**64 - 1), at(7), at(7), "E", False)],
                    offset=at(0) - 0x4000_0000)     # node 0 maps at host 0x4000_0000
BAR_BASE = 0xF000_0000              # where the host mapped BAR 4 (any address: the BAR hit counts)


def _dut():
    return PutEngine(n_routes=8)


def _set_routes(ctx, dut, down=()):
    for k in range(8):
        e = dut.routes[k]
        if k < len(STATE.routes):
            r = STATE.routes[k]
            ctx.set(e.mask, r.mask)
            ctx.set(e.lower, r.lower)
            ctx.set(e.upper, r.upper)
            ctx.set(e.port, PORTS.index(r.port))
            ctx.set(e.enable, int(r.enable))
        else:
            ctx.set(e.enable, 0)
    ctx.set(dut.route_down, sum(1 << k for k, r in enumerate(STATE.routes) if r.port in down))
    ctx.set(dut.node_offset, STATE.offset)
    ctx.set(dut.requester_id, 0x0100)


def _write_beats(raw, slot=0, *, malform=None):
    """The beats of the 64-byte write of ``raw`` into put slot ``slot``, or of a malformed
    write: "short" (32 bytes), "offset" (at a 32-byte offset), "be" (a partial last DW),
    "err" (cut short with err after two beats)."""
    address = BAR_BASE + 64 * slot
    if malform == "short":
        tlp = mwr(address, raw[:32])
    elif malform == "offset":
        tlp = mwr(address + 32, raw)
    elif malform == "be":
        tlp = mwr(address, raw[:63])
    else:
        tlp = mwr(address, raw)
    beats = tlp_to_beats(tlp, bar=1 << 4)
    if malform == "err":
        last = beats[1]
        beats = [beats[0], Beat(last.hdr, last.data, last.dw_en, 0, 1, 1, last.bar)]
    return beats


def _set_beat(ctx, port, beat):
    p = port.p
    ctx.set(p.hdr.as_value(), beat.hdr)
    ctx.set(p.data, beat.data)
    ctx.set(p.dw_en, beat.dw_en)
    ctx.set(p.first, beat.first)
    ctx.set(p.last, beat.last)
    ctx.set(p.err, beat.err)
    ctx.set(p.bar, beat.bar)


def _get_beat(ctx, port):
    p = port.p
    return Beat(ctx.get(p.hdr.as_value()), ctx.get(p.data), ctx.get(p.dw_en), ctx.get(p.first),
                ctx.get(p.last), ctx.get(p.err), ctx.get(p.bar))


def _run(writes, *, down=(), ready=1.0, gaps=0.0, seed=0, cycles=None, hold=None):
    """Send ``writes`` (lists of beats) into a fresh engine and collect what it does.

    Returns a dict: ``packets`` (``(port, Tlp)`` in order), ``taken`` (cycle each write's last
    beat was taken), ``first_out`` (cycle of each packet's first beat), ``status``, ``done``,
    ``msi`` (strobes seen), ``ready_low`` (cycles ``i_req.ready`` was 0 with a beat waiting).
    ``hold`` (cycles) keeps ``o_wr.ready`` at 0 from the start for that long.
    """
    rng = random.Random(seed)
    dut = _dut()
    out = {"packets": [], "taken": [], "first_out": [], "msi": 0, "ready_low": 0}
    queue = [b for w in writes for b in w]
    total = cycles or 40 * len(writes) + 200

    async def bench(ctx):
        _set_routes(ctx, dut, down)
        beats, cur = [], 0
        for cycle in range(total):
            present = cur < len(queue) and rng.random() >= gaps
            ctx.set(dut.i_req.valid, int(present))
            if present:
                _set_beat(ctx, dut.i_req, queue[cur])
            rdy = int(rng.random() < ready and (hold is None or cycle >= hold))
            ctx.set(dut.o_wr.ready, rdy)
            i_taken = present and ctx.get(dut.i_req.ready)
            if present and not i_taken:
                out["ready_low"] += 1
            o_valid = ctx.get(dut.o_wr.valid)
            if o_valid and rdy:
                beat = _get_beat(ctx, dut.o_wr)
                if beat.first:
                    out["first_out"].append(cycle)
                    dest = ctx.get(dut.o_dest)
                beats.append(beat)
                if beat.last:
                    assert dest & (dest - 1) == 0 and dest, dest
                    out["packets"].append((PORTS[dest.bit_length() - 1], beats_to_tlp(beats)))
                    beats = []
            out["msi"] += ctx.get(dut.msi_req)
            await ctx.tick()
            if i_taken:
                if queue[cur].last:
                    out["taken"].append(cycle)
                cur += 1
        assert cur == len(queue), f"only {cur} of {len(queue)} beats were taken"
        out["status"] = ctx.get(dut.status)
        out["done"] = ctx.get(dut.done)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    return out


def _random_put(rng):
    """A put that should be sent: to one of nodes 0-3, any length and alignment, the page kept."""
    length = rng.choice([1, 2, 3, 4, 5, 7, 8, 12, 16, 31, 32, rng.randrange(1, DATA_BYTES + 1)])
    node = rng.randrange(4)
    offset = rng.randrange(0, 4096 - length + 1) + 4096 * rng.randrange(1 << 8)
    dst = at(node, offset)
    seq = rng.random() < 0.6
    seq_addr = at(rng.randrange(4), 4 * rng.randrange(1 << 20)) if seq else None
    return pack(dst=dst, data=rng.randbytes(length), seq_addr=seq_addr,
                seq_value=rng.getrandbits(32), irq=rng.random() < 0.3)


def _bad_put(rng, kind):
    """A put the engine must refuse, of ``kind``."""
    good = dict(dst=at(1, 64), data=rng.randbytes(8), seq_addr=at(2), seq_value=5)
    if kind == "magic":
        return pack(**good, control=0xD4 | 1 << 10)
    if kind == "reserved_bit":
        return pack(**good, control=0xD5 | 1 << 10 | 1 << 8)
    if kind == "reserved_field":
        return pack(**good, reserved=1)
    if kind == "length0":
        return pack(**good, length=0)
    if kind == "length33":
        return pack(**good, length=DATA_BYTES + 1)
    if kind == "seq_misaligned":
        return pack(**{**good, "seq_addr": at(2, 2)})
    if kind == "crosses":
        return pack(**{**good, "dst": at(1, 4096 - 4)})
    if kind == "unroutable":
        return pack(**{**good, "dst": at(9)})
    if kind == "seq_unroutable":
        return pack(**{**good, "seq_addr": at(7)})        # a disabled entry
    raise ValueError(kind)


BAD = ("magic", "reserved_bit", "reserved_field", "length0", "length33", "seq_misaligned",
       "crosses", "unroutable", "seq_unroutable")
MALFORMED = ("short", "offset", "be", "err")


def _expect(puts, down=()):
    """The model's packets, error codes and counts for ``puts`` (``(raw, well_formed)``)."""
    packets, errors, msi = [], [], 0
    for raw, ok in puts:
        error, writes = put_outcome(raw, STATE, well_formed=ok, down=down)
        packets += writes
        if error != PutError.NONE:
            errors.append(error)
        elif raw[0x15] & 0x02:          # irq
            msi += 1
    return packets, errors, msi


def _check(out, puts, down=()):
    packets, errors, msi = _expect(puts, down)
    got = [PutWrite.of(port, tlp) for port, tlp in out["packets"]]
    assert got == packets
    assert out["done"] == sum(1 for raw, ok in puts
                              if put_outcome(raw, STATE, well_formed=ok, down=down)[0] == 0)
    assert out["msi"] == msi
    status = out["status"]
    assert status >> 16 == len(errors)
    assert (status >> 8) & 0xF == (errors[-1] if errors else 0)
    assert status & 0x1F == 0                       # the queue drained


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_puts_match_the_model(seed):
    """Random good puts (every length 1-32 and byte alignment, 3- and 4-DW addresses after the
    offset, completion writes to other nodes, irq), every refused kind and every malformed
    write among them; random gaps on the input and back-pressure on the output."""
    rng = random.Random(seed)
    cases = [(_random_put(rng), None) for _ in range(40)]
    cases += [(_bad_put(rng, kind), None) for kind in BAD]
    cases += [(_random_put(rng), kind) for kind in MALFORMED]
    rng.shuffle(cases)
    puts = [(raw, kind is None) for raw, kind in cases]
    writes = [_write_beats(raw, slot=rng.randrange(64), malform=kind) for raw, kind in cases]
    out = _run(writes, ready=0.7, gaps=0.3, seed=seed)
    _check(out, puts)
    # Both header forms leave: node 0's addresses minus the offset are below 4 GiB (3 DW),
    # the other nodes' (at 8 GiB and up) are not (4 DW).
    sizes = {tlp.get_header_size_dw() for _, tlp in out["packets"]}
    assert sizes == {3, 4}, sizes


def test_misaligned_node_offset_keeps_headers_and_beats_in_step():
    """A node offset with bits [1:0] set (found by ``peach2 prove put``: the first engine took
    them into the N-bound address, so a write's header announced one DW more than its beats):
    the offset comes off the DW address, every byte keeps its lane, headers agree with beats."""
    global STATE
    saved = STATE
    STATE = RouterState(routes=saved.routes, offset=saved.offset + 3)
    try:
        rng = random.Random(11)
        puts = [(pack(dst=at(0, rng.randrange(4096 - 32) + 4096 * k),
                      data=rng.randbytes(rng.randrange(1, 33)),
                      seq_addr=at(0, 8 * rng.randrange(512))), True) for k in range(12)]
        out = _run([_write_beats(raw) for raw, _ in puts])
        _check(out, puts)
        assert all(port == "N" for port, _ in out["packets"])
    finally:
        STATE = saved


def test_link_down_refuses_the_put_whole():
    """A put whose data or completion write is routed through a port whose link is down is
    refused with DST_LINK_DOWN and nothing of it leaves; puts to other ports go on."""
    rng = random.Random(5)
    puts = [(pack(dst=at(1, 8), data=b"12345678"), True),                         # E: down
            (pack(dst=at(2, 8), data=b"abcdefgh", seq_addr=at(1)), True),          # seq on E
            (pack(dst=at(2, 16), data=rng.randbytes(32), seq_addr=at(3)), True)]
    out = _run([_write_beats(raw) for raw, _ in puts], down=("E",))
    _check(out, puts, down=("E",))
    assert out["status"] >> 16 == 2 and (out["status"] >> 8) & 0xF == PutError.DST_LINK_DOWN


def test_full_queue_back_pressures_and_loses_nothing():
    """With the output held, the engine takes the puts its queue holds and the one it works on,
    then holds ``i_req.ready`` low; once the output moves, every put leaves in order."""
    rng = random.Random(7)
    puts = [(pack(dst=at(1, 64 * k), data=rng.randbytes(8), seq_addr=at(1, 8192)), True)
            for k in range(PUT_QUEUE + 4)]
    hold = 400
    out = _run([_write_beats(raw) for raw, _ in puts], hold=hold, cycles=1200)
    assert out["ready_low"] > 0
    assert sum(1 for t in out["taken"] if t < hold) == PUT_QUEUE + 1
    _check(out, puts)


def test_first_put_after_reset_and_latency():
    """A put offered in the first cycle after reset is sent; its first beat leaves a fixed
    number of cycles after its write's last beat was taken (docs/put.md), and back-to-back
    8-byte puts with completion writes leave one every PUT_CYCLES cycles."""
    rng = random.Random(9)
    puts = [(pack(dst=at(1, 8 * k), data=rng.randbytes(8), seq_addr=at(1, 4096)), True)
            for k in range(32)]
    out = _run([_write_beats(raw) for raw, _ in puts])
    _check(out, puts)
    assert out["taken"][0] == 3                     # four beats, from cycle 0
    assert out["first_out"][0] - out["taken"][0] == LATENCY
    starts = out["first_out"][::2]                 # data writes (each followed by its seq)
    steady = [b - a for a, b in zip(starts[8:], starts[9:])]
    assert set(steady) == {PUT_CYCLES}, steady


#: Cycles from a put's last beat taken to its first beat leaving (queue, CHECK, ROUTE, DECIDE,
#: the output register),
#: and between back-to-back 8-byte puts with completion writes (docs/put.md).
LATENCY = 7
PUT_CYCLES = 6


def test_docs_tables_are_current():
    """docs/put.md's descriptor table is the one ``to_markdown`` makes, and its error table
    names every code of PUT_ERROR_TABLE."""
    from pathlib import Path

    from peach2.params import PUT_ERROR_TABLE
    from peach2.put.descriptor import to_markdown
    text = (Path(__file__).parents[2] / "docs" / "put.md").read_text()
    begin = "<!-- put table: generated by peach2.put.descriptor.to_markdown() -->\n"
    table = text[text.index(begin) + len(begin):text.index("<!-- put table: end -->")]
    assert table == to_markdown(), "regenerate docs/put.md's table: to_markdown()"
    for name, code, _ in PUT_ERROR_TABLE[1:]:
        assert f"| {code} | `{name}` |" in text, name
