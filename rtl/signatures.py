"""Signatures of the boundaries between PEACH2's blocks, and a view to join flat members.

:class:`DmaControlSignature` is the boundary between the register block
(:class:`~peach2.csr.block.CSR`, member ``dma``) and the DMA controller
(:class:`~peach2.dma.engine.DMA`): the DMA registers of ``docs/registers.md`` as the DMA sees them.
The top joins the two with one ``wiring.connect``.  The bit fields of the registers the DMA
decodes or builds (:data:`DMA_CONFIG_FIELDS`, :data:`CH_CTRL_FIELDS`, :data:`CH_STATUS_FIELDS`)
are described here once: the register map (:mod:`peach2.csr.regmap`) documents them from these
tables and the DMA reads its field positions from them, so ``dma/`` does not import ``csr/``.

:class:`IngressConfigSignature` is the configuration every
:class:`~peach2.router.ingress.Ingress` reads from the register block: the route table, the
traffic enables, the protection windows and the source stamp.  The top fills one interface
object of it from the register block and joins it to the four ingresses with one
``wiring.connect``.

The DMA declares these members flat, under the same names (its own signature, unchanged);
:func:`members_of` collects them into an interface object of the flipped signature, so that
``connect`` checks every name, direction, shape and initial value.
"""

from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .dma.descriptor import Descriptor
from .params import N_DMA_CHANNELS, N_DMA_SLOTS, N_WINDOWS
from .router.common import RouteEntry
from .router.protect import Window

__all__ = ["DmaControlSignature", "IngressConfigSignature", "members_of", "DMA_CONFIG_FIELDS",
           "CH_CTRL_FIELDS", "CH_STATUS_FIELDS", "PUT_STATUS_FIELDS"]

# Bit fields of the DMA registers, ``(name, lsb, width, description)`` rows (the arguments of
# the register map's ``Field``).

#: DMA_CONFIG (``dma_config``).
DMA_CONFIG_FIELDS = (
    ("mps", 0, 2, "max payload size of DMA writes: 0 128 B, 1 256 B, 2 512 B (3 is taken as 2)"),
    ("mrrs", 4, 2, "max read request size: 0 128 B, 1 256 B, 2 512 B (3 is taken as 2)"),
    ("ext_tags", 8, 1, "8-bit tags (the host enabled Extended Tag Field); 0: 5-bit tags, at "
                       "most 32 reads outstanding"),
)

#: CH_CTRL[c] (``ch_ctrl_data``, valid with ``ch_ctrl_stb[c]``).
CH_CTRL_FIELDS = (
    ("start", 0, 1, "walk the chain from CH_HEAD"),
    ("reg_start", 1, 1, "run register-mode slots 0 .. slots-1"),
    ("abort", 2, 1, "stop the running chain (error ABORTED); ignored once its last read is issued"),
    ("queue", 3, 1, "with reg_start: the slots are a queue (0..4 to start with): the channel runs "
                    "what is appended and waits when none is left, until stop"),
    ("append", 4, 1, "a queue: slots more slots follow the last appended (slot numbers wrap "
                     "after 3); refused (CH_STATUS.append_refused) unless the channel runs a "
                     "queue not stopped and at most 4 slots are then held"),
    ("stop", 5, 1, "a queue: end once the slots appended are done (busy falls, no error); "
                   "refused unless the channel runs a queue"),
    ("slots", 8, 3, "register mode: number of slots, 1..4 (a queue: 0..4); append: 1..4"),
    ("adj", 16, 6, "with start: descriptors of the head's size that follow it immediately in "
                   "memory, fetched with it, up to 63 (the most of this and CH_HEAD[4:1])"),
)

#: CH_STATUS[c] (``ch_status``).
CH_STATUS_FIELDS = (
    ("busy", 0, 1, "the channel runs a chain"),
    ("start_ignored", 1, 1, "a start arrived while busy"),
    ("append_refused", 2, 1, "an append or stop was refused since the last accepted start"),
    ("slot_refused", 3, 1, "a SLOT write to a slot the channel holds was dropped since the last "
                           "accepted start"),
    ("error", 4, 4, "error code of the last chain (DMA_ERROR)"),
    ("held", 8, 3, "register mode: slots held (started or appended, not yet closed), 0..4"),
    ("tail", 12, 2, "a queue: the slot the next append starts at"),
)

#: PUT_STATUS (the put engine's ``status``).
PUT_STATUS_FIELDS = (
    ("level", 0, 5, "puts waiting in the queue"),
    ("error", 8, 4, "code of the last put refused (PUT_ERROR; 0: none since PUT_CLEAR)"),
    ("refused", 16, 16, "puts refused since PUT_CLEAR (saturates at 0xFFFF)"),
)


class DmaControlSignature(wiring.Signature):
    """The DMA registers, from the register block's side (``Out``: registers to the DMA).

    Members
    -------
    dma_config, dma_timeout : Out(32)
        Registers DMA_CONFIG and DMA_TIMEOUT (implemented bits; others 0).
    ch_head_lo, ch_head_hi, ch_cfg : Out(ArrayLayout(32, N_DMA_CHANNELS))
        CH_HEAD_LO[c], CH_HEAD_HI[c], CH_CFG[c].
    ch_ctrl_stb : Out(ArrayLayout(1, N_DMA_CHANNELS)) ; ch_ctrl_data : Out(32)
        A one-cycle strobe per channel whose CH_CTRL was written, and the value written
        (enabled bytes, implemented bits), valid with the strobe and held after it.
    slots : Out(ArrayLayout(Descriptor, N_DMA_CHANNELS * N_DMA_SLOTS))
        Register-mode slot ``N_DMA_SLOTS * c + s``: the SLOT_*[c][s] registers at the byte
        offsets of the same fields in a descriptor (``DMA_SLOT_MEMBERS`` of the register map);
        the bytes no slot register covers (``next``, ``reserved``) are 0.
    slot_held : In(N_DMA_CHANNELS * N_DMA_SLOTS)
        Per slot, registered: its channel holds it (started or appended, not yet closed); a
        write to it is dropped, as is a write to a slot of a channel whose CH_CTRL was written
        in the last two cycles (while the write's changes reach ``slot_held``).
    slot_refused : Out(ArrayLayout(1, N_DMA_CHANNELS))
        A one-cycle strobe per channel a write to one of whose slots was dropped (registered).
    ch_status, ch_desc_done, ch_bytes_lo, ch_bytes_hi, ch_desc_addr_lo, ch_desc_addr_hi
        : In(ArrayLayout(32, N_DMA_CHANNELS)) -- the channels' status registers, read as given.
    """

    def __init__(self):
        arr = data.ArrayLayout(32, N_DMA_CHANNELS)
        super().__init__({
            "dma_config":      Out(32),
            "dma_timeout":     Out(32),
            "ch_head_lo":      Out(arr),
            "ch_head_hi":      Out(arr),
            "ch_cfg":          Out(arr),
            "ch_ctrl_stb":     Out(data.ArrayLayout(1, N_DMA_CHANNELS)),
            "ch_ctrl_data":    Out(32),
            "slots":           Out(data.ArrayLayout(Descriptor, N_DMA_CHANNELS * N_DMA_SLOTS)),
            "slot_held":       In(N_DMA_CHANNELS * N_DMA_SLOTS),
            "slot_refused":    Out(data.ArrayLayout(1, N_DMA_CHANNELS)),
            "ch_status":       In(arr),
            "ch_desc_done":    In(arr),
            "ch_bytes_lo":     In(arr),
            "ch_bytes_hi":     In(arr),
            "ch_desc_addr_lo": In(arr),
            "ch_desc_addr_hi": In(arr),
        })


class IngressConfigSignature(wiring.Signature):
    """What an ingress reads from the registers, from the register block's side (``Out``).

    Members
    -------
    route : Out(ArrayLayout(RouteEntry, n_routes))
        The route table (registers ROUTE[i]).
    pio_enable, route_enable : Out(1)
        CONTROL bits.
    windows : Out(ArrayLayout(Window, N_WINDOWS))
        The protection windows (registers WIN[w]).
    protect_enable, stamp : Out(1)
        PROT_CONTROL bits.
    stamp_id : Out(16)
        The requester ID a stamped write carries: ``NODE.node_id`` in bits [15:8] (the bus
        number), the chip's own device and function (from PCIE_ID) in bits [7:0].
    route_down : Out(n_routes)
        Per route entry, a register: the entry's port is dropping traffic (its link is down,
        :class:`~peach2.router.linkstate.LinkState`).
    """

    def __init__(self, n_routes):
        super().__init__({
            "route":          Out(data.ArrayLayout(RouteEntry, n_routes)),
            "pio_enable":     Out(1),
            "route_enable":   Out(1),
            "windows":        Out(data.ArrayLayout(Window, N_WINDOWS)),
            "protect_enable": Out(1),
            "stamp":          Out(1),
            "stamp_id":       Out(16),
            "route_down":     Out(n_routes),
        })


class _MembersOf:
    """An interface object: ``signature`` and the attributes of its member names."""

    def __init__(self, signature, owner):
        self.signature = signature
        for name in signature.members:
            setattr(self, name, getattr(owner, name))


def members_of(owner, signature):
    """Return an interface object of ``signature`` whose members are ``owner``'s attributes of
    the same names (``owner`` is usually a component that declares them flat).

    ``wiring.connect`` checks the object against ``signature``; an attribute ``owner`` lacks
    raises ``AttributeError`` here.
    """
    return _MembersOf(signature, owner)
