"""What a cocotb test module is given by its pytest side: parameters and seed.

:func:`peach2.sim.run.runner.run_cocotb` hands a run its ``params`` as JSON in ``PEACH2_PARAMS`` and
its ``seed`` in ``PEACH2_SEED``; every cocotb module reads them through :func:`run_inputs`::

    PARAMS, SEED = run_inputs()
"""

import json
import os

__all__ = ["PARAMS_ENV", "SEED_ENV", "run_inputs"]

PARAMS_ENV = "PEACH2_PARAMS"
SEED_ENV = "PEACH2_SEED"


def run_inputs():
    """Return ``(params, seed)`` of this cocotb run: a dict (``{}`` when unset) and an int (0).

    Raises ``ValueError`` with a one-line message when either variable is malformed.
    """
    text = os.environ.get(PARAMS_ENV, "{}")
    try:
        params = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{PARAMS_ENV} is not JSON ({exc}): {text[:80]!r}") from None
    if not isinstance(params, dict):
        raise ValueError(f"{PARAMS_ENV} must be a JSON object, not {type(params).__name__}")
    seed = os.environ.get(SEED_ENV, "0")
    try:
        return params, int(seed)
    except ValueError:
        raise ValueError(f"{SEED_ENV} must be an integer, not {seed!r}") from None
