"""The outcome of one property's run."""

from dataclasses import dataclass

__all__ = ["Result"]


@dataclass
class Result:
    """``status`` is ``proved``, ``bounded`` (no counterexample within ``depth`` cycles),
    ``failed`` (``trace``: the counterexample as a VCD, ``gtkw``: its GTKWave save file,
    ``where``: the failed assertion's source line) or ``error`` (the tools failed: ``where``
    holds the end of the log)."""

    label: str
    status: str
    depth: int
    seconds: float
    workdir: object
    trace: object = None
    gtkw: object = None
    where: str = ""

    @property
    def ok(self):
        return self.status in ("proved", "bounded")

    def line(self):
        """One line for the report."""
        if self.status == "proved":
            what = f"proved (k-induction, k = {self.depth})"
        elif self.status == "bounded":
            what = f"bounded to {self.depth} cycles"
        elif self.status == "failed":
            what = f"failed: {self.where}; trace {self.trace}, GTKWave {self.gtkw}"
        else:
            what = f"error: {self.where}"
        return f"{self.label}: {what} ({self.seconds:.1f} s)"
