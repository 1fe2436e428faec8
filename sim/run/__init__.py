"""Running simulations: the cocotb runner glue (Icarus and Verilator), the test environment,
the per-edge ticker, handshake probes and signal readers.
"""

from .env import PARAMS_ENV, SEED_ENV, run_inputs
from .probe import HandshakeProbe
from .provenance import commit, run_info, run_sentence, started
from .runner import (
    BUILD,
    FRESH_SEEDS_ENV,
    ROOT,
    SIM_BUILD,
    SIM_ENV,
    SIMULATORS,
    WAVES,
    WAVES_ENV,
    emit_verilog,
    fresh_seed,
    pick_simulator,
    require_iverilog,
    run_cocotb,
    waves_requested,
    write_gtkw,
)
from .signals import bit_value, resolve_unknown
from .ticker import EdgeTicker
from .verilator import (
    MIN_VERSION,
    Runner,
    build,
    build_library,
    fst_build_args,
    module_sources,
    require_verilator,
    verilator_env,
)

__all__ = ["PARAMS_ENV", "SEED_ENV", "run_inputs", "HandshakeProbe", "commit", "started",
           "run_info", "run_sentence", "ROOT", "BUILD", "SIM_BUILD",
           "WAVES", "WAVES_ENV", "FRESH_SEEDS_ENV", "fresh_seed", "SIMULATORS", "SIM_ENV",
           "require_iverilog", "pick_simulator",
           "emit_verilog", "waves_requested", "write_gtkw", "run_cocotb", "bit_value",
           "resolve_unknown", "EdgeTicker", "MIN_VERSION", "require_verilator", "verilator_env",
           "fst_build_args", "build", "build_library", "module_sources", "Runner"]
