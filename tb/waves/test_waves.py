"""Waveforms (docs/sim/run.md, "Waveforms"): a recorded run's FST holds every signal that its
GTKWave save file names, on each simulator the suite supports.

``run_cocotb(waves=True)`` writes ``build/waves/<name>.fst`` and ``build/waves/<name>.gtkw``;
GTKWave looks each ``trace`` line of the save file up in the FST's hierarchy, and a name it
cannot find shows nothing.  The FST is read with ``pywellen`` (the package registry's wheel of
the wellen waveform library).
"""

from pathlib import Path

import pytest

from peach2.sim.run import SIM_ENV, SIMULATORS, WAVES, run_cocotb
from peach2.util import RegisterSlice

HERE = Path(__file__).resolve().parent


def gtkw_traces(path):
    """The signal names a GTKWave save file shows (its lines that are not directives)."""
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and line[0] not in "[@-*#":
            out.append(line)
    return out


def gtkw_dumpfile(path):
    for line in Path(path).read_text().splitlines():
        if line.startswith("[dumpfile]"):
            return line.split(None, 1)[1].strip().strip('"')
    return None


def fst_signals(path):
    """Every variable of the FST as ``scope.sub.name`` (bit ranges dropped)."""
    from pywellen import Waveform
    wave = Waveform(str(path))
    return {v.full_name.split("[")[0].strip() for v in wave.all_vars()}


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_fst_holds_the_save_files_signals(simulator, monkeypatch):
    monkeypatch.setenv(SIM_ENV, simulator)      # each simulator, whatever --sim says
    name = f"waves-slice-{simulator}"
    fst, gtkw = WAVES / f"{name}.fst", WAVES / f"{name}.gtkw"
    for old in (fst, gtkw):
        old.unlink(missing_ok=True)
    run_cocotb(component=RegisterSlice(16), toplevel="register_slice", test_module="slice_tb",
               name=name, test_dir=HERE, seed=1, waves=True)
    assert fst.is_file() and gtkw.is_file(), f"no waveform recorded in {WAVES}"
    assert Path(gtkw_dumpfile(gtkw)) == fst, "the save file names another dump file"
    traces = gtkw_traces(gtkw)
    ports = {"clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready",
             "o__payload"}
    assert {t.rsplit(".", 1)[-1] for t in traces} == ports, traces
    signals = fst_signals(fst)
    missing = [t for t in traces if t not in signals]
    assert not missing, (f"{simulator}: the save file names {missing} which the FST does not "
                         f"hold (it has e.g. {sorted(signals)[:6]})")
