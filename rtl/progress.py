"""Progress lines of the ``peach2`` command's long steps, on standard error.

One line per step as it starts, with the seconds since the command started::

    [   0.0 s] elaborating the peach2 core...
    [   4.1 s] converting to Verilog (RTLIL, Yosys)...
    [  31.7 s] compiling in Icarus Verilog...

Standard output keeps only the results (file names, reports), so it can be redirected.
"""

import sys
import time

__all__ = ["Progress"]


class Progress:
    """Prints ``[<elapsed> s] <text>`` lines to ``stream`` (standard error by default).

    Parameters
    ----------
    stream : file or None
        Where the lines go; ``None`` is standard error at the time of each line (so pytest's
        capture sees them).
    clock : callable
        Seconds, monotonic (``time.monotonic``).
    """

    def __init__(self, stream=None, clock=time.monotonic):
        self._stream = stream
        self._clock = clock
        self._start = clock()

    @property
    def elapsed(self):
        """Seconds since this object was made."""
        return self._clock() - self._start

    def __call__(self, text):
        """Print one progress line: ``text`` after the elapsed time."""
        stream = self._stream or sys.stderr
        print(f"[{self.elapsed:6.1f} s] {text}", file=stream, flush=True)
