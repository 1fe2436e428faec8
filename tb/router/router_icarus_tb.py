"""cocotb side of ``test_router_icarus.py``: the two reduced cases of ``linkdown_tb`` and
``protect_tb`` in one module, so one Icarus simulation runs both."""

from linkdown_tb import read_after_reset  # noqa: F401
from protect_tb import window_rules  # noqa: F401
