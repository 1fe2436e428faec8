"""The equivalence proof (``tb/synth/equivalence.py``) on small designs: it proves a renamed
but identical machine equal, and refuses one that differs in a next state, a reset value, a
memory or a register it cannot pair.  The real use, the DMA before and after its split into components,
is the slow test ``test_dma_split_proved_equal`` (``python -m pytest -m slow
tb/synth/test_equivalence.py``, 163 s here); the whole-core proofs are in ``docs/dma.md``.
"""

import subprocess

import pytest
from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, ClockSignal, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from equivalence import NotEquivalent, prove, prove_rtlil


class _Toy(wiring.Component):
    """A counter that writes its count into a small memory and reads it back."""
    en: In(1)
    count: Out(8)
    back: Out(8)

    def __init__(self, reg="cnt", step=1, reset=0, depth=16, sub=False):
        self.reg, self.step, self.reset, self.depth, self.sub = reg, step, reset, depth, sub
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        cnt = Signal(8, name=self.reg, init=self.reset)
        with m.If(self.en):
            m.d.sync += cnt.eq(cnt + self.step)
        mem = Memory(shape=8, depth=self.depth, init=[])
        if self.sub:        # the same memory one level down, as a split puts it
            inner = Module()
            inner.submodules.mem = mem
            m.submodules.writer = inner
        else:
            m.submodules.mem = mem
        wr, rd = mem.write_port(), mem.read_port()
        # Nothing below is a plain alias of the counter's bits: an alias's name would pair it.
        m.d.comb += [wr.addr.eq(cnt[:4] ^ 1), wr.data.eq(cnt + 1), wr.en.eq(self.en),
                     rd.addr.eq(cnt[:4] - 1), self.back.eq(rd.data), self.count.eq(cnt ^ 0xA5)]
        return m


def _prove(tmp_path, gate, renamed=None, gold=None):
    for name, top in (("gold", gold or _Toy()), ("gate", gate)):
        (tmp_path / f"{name}.il").write_text(rtlil.convert(top, name="top", emit_src=False))
    return prove_rtlil(tmp_path, renamed or {}, log=lambda s: None)


def test_renamed_register_and_hierarchy_proved_equal(tmp_path):
    registers, ports, cells = _prove(tmp_path, _Toy(reg="counter", sub=True),
                                     renamed={"cnt": ("counter", 0)})
    assert registers == 8           # the counter (the read port keeps its own register)
    assert ports == 2               # a write port and a read port
    assert cells > registers


def test_other_next_state_refused(tmp_path):
    with pytest.raises(NotEquivalent, match=r"not proved equal \(7\): .*next state of cnt\[1\]"):
        _prove(tmp_path, _Toy(step=3))


def test_other_reset_value_refused(tmp_path):
    with pytest.raises(NotEquivalent, match=r"start from other values: cnt\[0\]"):
        _prove(tmp_path, _Toy(reset=1))


def test_other_memory_refused(tmp_path):
    with pytest.raises(NotEquivalent, match="memories differ"):
        _prove(tmp_path, _Toy(depth=32))


def test_unpaired_register_refused(tmp_path):
    with pytest.raises(ValueError, match="registers without a partner: cnt"):
        _prove(tmp_path, _Toy(reg="counter"))


class _Sum(wiring.Component):
    """A register loaded with ``a + 1``, written two ways."""
    a: In(8)
    o: Out(8)

    def __init__(self, other_way):
        self.other_way = other_way
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        r = Signal(8, name="r")
        mid = Signal(8, name="mid")
        m.d.comb += mid.eq(self.a - 1 if self.other_way else self.a + 1)
        m.d.sync += r.eq(mid + 2 if self.other_way else mid)
        m.d.comb += self.o.eq(r)
        return m


def test_logic_written_another_way_proved_equal(tmp_path):
    """``mid`` means another thing in each, the register's next state is ``a + 1`` in both."""
    registers, _, outputs = _prove(tmp_path, _Sum(True), gold=_Sum(False))
    assert (registers, outputs) == (8, 9)      # 8 next states, the output o


class _Two(wiring.Component):
    """Two memories named ``mem``, in ``writer`` and ``receiver`` (one name once the hierarchy
    the DMA split added is stripped) or in ``writer`` and ``other``."""
    en: In(1)
    back: Out(16)

    def __init__(self, step=1, clash=True):
        self.step, self.clash = step, clash
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        cnt = Signal(8, name="cnt")
        m.d.sync += cnt.eq(cnt + 1)
        for k, where in enumerate(("writer", "receiver" if self.clash else "other")):
            mem = Memory(shape=8, depth=16, init=[])
            inner = Module()
            inner.submodules.mem = mem
            m.submodules[where] = inner
            wr, rd = mem.write_port(), mem.read_port(domain="comb")
            m.d.comb += [wr.addr.eq(cnt[:4] ^ k), wr.data.eq(cnt + self.step * k), wr.en.eq(1),
                         rd.addr.eq(cnt[:4] + 3), self.back[8 * k:8 * k + 8].eq(rd.data)]
        return m


def test_memories_of_one_stripped_name_refused(tmp_path):
    assert _prove(tmp_path, _Two(step=1, clash=False), gold=_Two(clash=False))[1] == 4
    with pytest.raises(ValueError, match=r"memories \w+\.mem and \w+\.mem are both mem"):
        _prove(tmp_path, _Two(step=2), gold=_Two())


class _Clocked(wiring.Component):
    """``r <= a + 1`` in clock domain ``domain`` (clocked by ``clk2`` unless ``sync``)."""
    a: In(8)
    o: Out(8)
    clk2: In(1)
    rst2: In(1)

    def __init__(self, domain="sync", async_reset=False):
        self.domain, self.async_reset = domain, async_reset
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        if self.domain != "sync":
            m.domains += ClockDomain(self.domain, async_reset=self.async_reset)
            m.d.comb += [ClockSignal(self.domain).eq(self.clk2),
                         ResetSignal(self.domain).eq(self.rst2)]
        r = Signal(8, name="r")
        m.d[self.domain] += r.eq(self.a + 1)
        m.d.comb += self.o.eq(r ^ 0x5A)
        return m


def test_other_clock_and_async_reset_refused(tmp_path):
    with pytest.raises(NotEquivalent, match="clocked by other inputs"):
        _prove(tmp_path, _Clocked("fast"), gold=_Clocked())
    with pytest.raises(ValueError, match=r"not logic in the new version: \$adff"):
        _prove(tmp_path, _Clocked("fast", async_reset=True), gold=_Clocked())


def _have(*commits):
    from equivalence import ROOT
    return all(subprocess.run(["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=ROOT,
                              capture_output=True).returncode == 0 for c in commits)


@pytest.mark.slow
@pytest.mark.skipif(not _have("a603616", "855043f"),
                    reason="needs the commits a603616 and 855043f (a full clone, not a shallow one)")
def test_dma_split_proved_equal(tmp_path):
    """The claim about the DMA: the split into components (a603616 -> 855043f) left it
    the same machine.  About 3 minutes (``docs/dma.md``, "Code structure")."""
    registers, ports, outputs = prove("a603616", "855043f", "dma", tmp_path, log=lambda s: None)
    assert (registers, ports, outputs) == (13646, 22, 13740)
