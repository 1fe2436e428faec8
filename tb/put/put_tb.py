"""cocotb tests of the put engine inside one PEACH2 chip (docs/put.md).

::

    Host --N model-- peach2 --E/W/S models--> captured
      BAR 0 registers, BAR 2 TCA window, BAR 4 put window

Puts written by the host into BAR 4 (seeded idles and back-pressure on every port) against the
reference model :mod:`peach2.sim.reference.put`: the writes each port sends, byte for byte and in
order, the refusals (PUT_STATUS, PUT_DONE), MSIs; reads and malformed writes into BAR 4; a put
as the first request after reset; the put engine beside PIO stores on the same path.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.pcie.core.tlp import CplStatus

from peach2.params import PUT_BAR, PutError
from peach2.put.descriptor import DATA_BYTES, pack
from peach2.sim.harness import NODE_SIZE, TCA_BAR, MsiCatcher, program_nodes, setup, wait_quiet
from peach2.sim.reference.put import PutWrite, put_outcome
from peach2.sim.run import run_inputs

PARAMS, SEED = run_inputs()
PORTS = ("n", "e", "w", "s")


def _writes(chip, port):
    """``PutWrite`` s of the memory writes ``port`` sent (completions left out)."""
    return [PutWrite.of(port.upper(), tlp) for tlp in chip.sent[port] if not tlp.is_completion()]


async def _bring_up(dut, **kw):
    chip, drv, bars = await setup(dut, **kw)
    base = chip.host.dev.bar_addr[TCA_BAR]
    # Node 0's region maps across 4 GiB in the host: N gets 3-DW and 4-DW headers.
    state = await program_nodes(drv, base, phys=0xC000_0000)
    return chip, drv, bars, base, state


def _random_put(rng, base):
    length = rng.randrange(1, DATA_BYTES + 1)
    node = rng.randrange(4)
    offset = rng.randrange(0, 4096 - length + 1) + 4096 * rng.randrange(1 << 19)
    seq = rng.random() < 0.7
    return pack(dst=base + node * NODE_SIZE + offset, data=rng.randbytes(length),
                seq_addr=base + rng.randrange(4) * NODE_SIZE + 4 * rng.randrange(1 << 28)
                if seq else None, seq_value=rng.getrandbits(32), irq=rng.random() < 0.2)


@cocotb.test()
async def puts_against_model(dut):
    """Random puts to all four ports (every length 1-32, any byte alignment), refused ones among
    them; each port's writes equal the model's, in order; PUT_DONE, PUT_STATUS and the MSIs
    agree; a put is the first request after reset.  Every fifth put has a register read sent
    with it, back to back on N: the read's completion and the put leave the ingress through the
    same crossbar output, and every read is answered right."""
    chip, drv, bars, base, state = await _bring_up(dut)
    msi = MsiCatcher(dut, "")
    await drv.put_set_vector(9)
    rng = random.Random(SEED)
    puts, reads = [], []
    ident = drv.regmap["ID"].value
    for k in range(PARAMS.get("puts", 60)):
        raw = _random_put(rng, base)
        if rng.random() < 0.15:         # refused: unroutable, crossing, or malformed
            kind = rng.randrange(3)
            d = dict(dst=base + 9 * NODE_SIZE, data=b"x") if kind == 0 else \
                dict(dst=base + NODE_SIZE + 4094, data=b"abcd") if kind == 1 else \
                dict(dst=base, data=b"", length=0)
            raw = pack(**d)
        puts.append(raw)
        if k % 5 == 0:
            reads.append(cocotb.start_soon(drv.read_reg("ID")))
        await bars[PUT_BAR].write(64 * rng.randrange(64), raw)
    assert [await r for r in reads] == [ident] * len(reads)
    await wait_quiet(chip)
    await ClockCycles(dut.clk, 200)
    expected = {p.upper(): [] for p in PORTS}
    errors, irqs = [], 0
    for raw in puts:
        error, writes = put_outcome(raw, state)
        for w in writes:
            expected[w.port].append(w)
        if error:
            errors.append(error)
        elif raw[0x15] & 0x02:
            irqs += 1
    for p in PORTS:
        assert _writes(chip, p) == expected[p.upper()], p
    status = await drv.put_status()
    assert status == {"level": 0, "error": errors[-1] if errors else 0,
                      "refused": len(errors)}, (status, errors)
    assert await drv.put_done() == len(puts) - len(errors)
    assert [v for _, v in msi.vectors] == [9] * irqs
    await drv.put_clear()
    assert (await drv.put_status())["refused"] == 0
    chip.check()


@cocotb.test()
async def first_request_after_reset_is_a_put(dut):
    """The first thing the host does after enumeration is a put to E (its routes programmed by
    a PIO-free path: the reset values route nothing, so the put is refused DST_UNROUTABLE);
    then, routes set, a put leaves; reads into BAR 4 are answered UR (READ_REJECTED); a short
    write into BAR 4 is refused WRITE_MALFORMED; the engine goes on after each."""
    chip, drv, bars = await setup(dut, pauses=False)
    base = chip.host.dev.bar_addr[TCA_BAR]
    await bars[PUT_BAR].write(0, pack(dst=base + NODE_SIZE, data=b"first"))
    await ClockCycles(dut.clk, 50)          # PUT_STATUS follows the put a few cycles later
    assert (await drv.put_status())["error"] == PutError.DST_UNROUTABLE
    state = await program_nodes(drv, base, phys=0xC000_0000)
    await drv.put(base + NODE_SIZE + 8, b"second", seq_addr=base + NODE_SIZE, seq_value=2)
    try:                                        # the host sees UR: how it reports it is its own
        await bars[PUT_BAR].read(0, 4, timeout=20, timeout_unit="us")
    except Exception:  # noqa: BLE001
        pass
    urs = [t for t in chip.sent["n"] if t.is_completion() and t.status == CplStatus.UR]
    assert len(urs) == 1, chip.sent["n"]
    await bars[PUT_BAR].write(128, b"12345678")
    await drv.put(base + 3 * NODE_SIZE + 5, b"third")
    await wait_quiet(chip)
    assert _writes(chip, "e") == put_outcome(pack(dst=base + NODE_SIZE + 8, data=b"second",
                                                  seq_addr=base + NODE_SIZE, seq_value=2),
                                             state)[1]
    assert _writes(chip, "s") == [PutWrite("S", base + 3 * NODE_SIZE + 5, b"third")]
    status = await drv.put_status()
    assert status["error"] == PutError.WRITE_MALFORMED and status["refused"] == 2, status
    assert await drv.put_done() == 2
    assert (await drv.counters("N"))["READ_REJECTED"] == 1
    chip.check()
