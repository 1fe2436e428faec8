"""Reading cocotb signal handles: values with X/Z resolved, fast integer reads."""

__all__ = ["bit_value", "resolve_unknown"]


def resolve_unknown(value):
    """Return (integer with X/Z read as 0, mask of the X/Z bits) of a cocotb ``LogicArray`` or
    its bit string."""
    text = str(value)
    known = int(text.translate(str.maketrans("xXzZuUwW-", "000000000")), 2)
    unknown = int("".join("0" if c in "01" else "1" for c in text), 2)
    return known, unknown


def bit_value(sig):
    """Return the integer value of handle ``sig``, 0 while it holds X/Z (before reset).

    Read as the simulator's bit string through the handle's GPI object, which is what
    ``sig.value`` does before it builds a ``Logic``/``LogicArray`` that is only turned into an
    integer here: the per-cycle models read two pins per cycle each, and the object was most
    of the cost (``cocotb==2.1.0`` is pinned; ``_handle`` is its GPI handle).
    """
    try:
        return int(sig._handle.get_signal_val_binstr(), 2)
    except ValueError:
        return 0
