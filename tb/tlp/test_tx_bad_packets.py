"""AvalonST128TX fed bad internal packets directly (Amaranth simulator).

The RX adapter never produces a packet whose beat count disagrees with its length (it ends bad
packets with ``err``), so these cases are driven straight into the TX adapter: in
store-and-forward every bad packet must be dropped unsent and counted, and the good packets
around it must leave intact.
"""

import random
from dataclasses import replace

from amaranth.sim import Simulator
from cocotbext.pcie.core.tlp import Tlp, TlpType

from peach2.sim.hardip import AvalonBeat, avalon_beats_to_tlp
from peach2.sim.reference import tlp_to_beats
from peach2.tlp.avalon_tx import AvalonST128TX


def _mwr(rng, length):
    t = Tlp()
    t.fmt_type = TlpType.MEM_WRITE_64
    t.set_addr_be_data((rng.randrange(1, 1 << 20) << 32) | (rng.randrange(1 << 16) << 12),
                       rng.randbytes(4 * length))
    return t


async def send(ctx, dut, beats, limit=2000):
    """Drive ``beats`` into the TX adapter's internal stream, one per accepted cycle."""
    for b in beats:
        ctx.set(dut.i_tlp.valid, 1)
        ctx.set(dut.i_tlp.p.hdr.as_value(), b.hdr)
        ctx.set(dut.i_tlp.p.data, b.data)
        ctx.set(dut.i_tlp.p.dw_en, b.dw_en)
        ctx.set(dut.i_tlp.p.first, b.first)
        ctx.set(dut.i_tlp.p.last, b.last)
        ctx.set(dut.i_tlp.p.err, b.err)
        for _ in range(limit):
            if ctx.get(dut.i_tlp.ready):
                break
            await ctx.tick()
        else:
            raise AssertionError(f"TX adapter stopped taking beats for {limit} cycles")
        await ctx.tick()
    ctx.set(dut.i_tlp.valid, 0)


def test_bad_internal_packets_dropped_unsent():
    rng = random.Random(5)
    dut = AvalonST128TX()
    packets = []     # (beats, the TLP if it must leave, else None)
    for n in range(30):
        tlp = _mwr(rng, rng.choice([1, 3, 4, 8, 16]))
        beats = tlp_to_beats(tlp)
        kind = n % 4
        if kind == 1:                          # ends with err
            beats[-1] = replace(beats[-1], err=1)
        elif kind == 2:                        # one beat too many
            beats[-1] = replace(beats[-1], last=0, dw_en=0xF)
            beats.append(replace(beats[-1], first=0, last=1))
        elif kind == 3 and len(beats) > 1:     # one beat short
            beats = beats[:-1]
            beats[-1] = replace(beats[-1], last=1)
        else:
            packets.append((beats, tlp))
            continue
        packets.append((beats, None))
    good = [t for _, t in packets if t is not None]
    seen = _run_tx(dut, [beats for beats, _ in packets])
    assert not any(err for _, err in seen), "store-and-forward must never nullify"
    sent = [avalon_beats_to_tlp(b) for b, _ in seen]
    assert [bytes(t.pack()) for t in sent] == [bytes(t.pack()) for t in good]


def test_counters_for_bad_internal_packets():
    rng = random.Random(6)
    dut = AvalonST128TX()
    tlp = _mwr(rng, 8)
    good = tlp_to_beats(tlp)
    with_err = [*good[:-1], replace(good[-1], err=1)]
    short = [replace(good[0], last=1)]
    result = {}

    async def testbench(ctx):
        ctx.set(dut.tx_st_ready, 1)
        for beats in (good, with_err, short, good):
            await send(ctx, dut, beats)
        await ctx.tick().repeat(100)
        result.update(dropped=ctx.get(dut.dropped_count), malformed=ctx.get(dut.malformed_count),
                      underrun=ctx.get(dut.underrun_count))

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(testbench)
    sim.run()
    assert result == {"dropped": 1, "malformed": 1, "underrun": 0}, result


def _run_tx(dut, packets, cycles=3000):
    """Send ``packets`` (lists of beats) and return the Avalon packets seen: (beats, err)."""
    seen = []

    async def drive(ctx):
        for beats in packets:
            await send(ctx, dut, beats)

    async def collect(ctx):
        ctx.set(dut.tx_st_ready, 1)
        cur = []
        for _ in range(cycles):
            await ctx.tick()
            if ctx.get(dut.tx_st_valid):
                cur.append(AvalonBeat(ctx.get(dut.tx_st_data), ctx.get(dut.tx_st_sop),
                                ctx.get(dut.tx_st_eop), ctx.get(dut.tx_st_empty)))
                if cur[-1].eop:
                    seen.append((cur, ctx.get(dut.tx_st_err)))
                    cur = []

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(drive)
    sim.add_testbench(collect)
    sim.run()
    return seen


def test_overlong_short_packet_beyond_fifo_is_dropped():
    """A header-only TLP followed by more beats than the FIFO holds must not hang TX."""
    rng = random.Random(7)
    dut = AvalonST128TX(depth=64, start_level=1)
    rd = Tlp()
    rd.fmt_type = TlpType.MEM_READ_64
    rd.set_addr_be(1 << 33, 64)
    head = tlp_to_beats(rd)[0]
    monster = [replace(head, last=0)] + [replace(head, first=0, last=0, dw_en=0xF)] * 68 \
        + [replace(head, first=0, last=1, dw_en=0xF)]
    good = _mwr(rng, 8)
    seen = _run_tx(dut, [monster, tlp_to_beats(good)])
    sent = [bytes(avalon_beats_to_tlp(b).pack()) for b, err in seen if not err]
    assert sent == [bytes(good.pack())]


def test_early_err_nullified_with_three_beats_at_least():
    """Cut-through: a TLP ended early by err is nullified, never as a one- or two-beat TLP."""
    rng = random.Random(8)
    dut = AvalonST128TX(depth=64, start_level=1)
    for length in (16, 32):
        for a2 in (0, 1):
            t = Tlp()
            t.fmt_type = TlpType.MEM_WRITE
            t.set_addr_be_data(0x1000 + 4 * a2, rng.randbytes(4 * length))
            beats = tlp_to_beats(t)
            cut = [*beats[:1]]
            cut[-1] = replace(cut[-1], last=1, err=1)
            seen = _run_tx(dut, [cut, tlp_to_beats(t)], cycles=400)
            bad = [b for b, err in seen if err]
            assert len(bad) <= 1 and all(len(b) >= 3 for b in bad), [len(b) for b in bad]
            assert [bytes(avalon_beats_to_tlp(b).pack()) for b, err in seen if not err] == [
                bytes(t.pack())]
