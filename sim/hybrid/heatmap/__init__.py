"""Which links a hybrid collective's steps use: every TCA cable's and InfiniBand port's
utilisation over time, as a heatmap under each node's phases (``docs/hybrid.md``, "Which
links a step uses").

- :func:`heat_run`: one hybrid collective on the machine with the links' trace on
  (:class:`peach2.sim.system.link_trace.LinkTrace`), its result ready to draw
  (:func:`heat_entry` makes it from any traced run);
- :func:`draw`: the picture; :func:`rows`, :func:`utilisation`: its rows and colours;
- ``python -m peach2.sim.hybrid.heatmap --collective allgather --out ...``: one picture
  (:data:`PICTURES`), its result saved beside it.
"""

from .draw import draw, rows, utilisation
from .run import PICTURES, heat_entry, heat_run

__all__ = ["draw", "rows", "utilisation", "PICTURES", "heat_run", "heat_entry"]
