"""Control registers: the register map (one Python description) and the register block."""

from .block import CSR, RouteEntry
from .regmap import (
    COUNT_REASONS,
    REGMAP,
    REGS,
    Access,
    CountReason,
    Enumeration,
    Field,
    Group,
    Port,
    Register,
    RegisterMap,
    peach2_regmap,
)

__all__ = [
    "CSR", "RouteEntry",
    "REGMAP", "REGS", "Access", "CountReason", "COUNT_REASONS", "Enumeration", "Field", "Group",
    "Port", "Register", "RegisterMap", "peach2_regmap",
]
