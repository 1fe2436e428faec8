"""Write protection: the window check of a remote write, and the log of refused writes.

The idea is Tofu's STAG (004, section 4.3: a node registers the memory a remote node may write
by RDMA); the registers are PROT_* and WIN[w] (``docs/registers.md``), the rules are in
``docs/errors.md``, "Write protection".  :func:`window_verdict` is used by
:class:`~peach2.router.ingress.Ingress` (stage A); :class:`ProtectionLog` keeps PROT_STATUS and
PROT_SOURCES.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..params import N_NODES, N_PORTS
from ..util import not_below
from .table import request_address

__all__ = ["Window", "PAGE_BITS", "window_verdict", "crosses_page", "ProtectionLog",
           "window_view"]

#: Windows are whole 4 KiB pages.
PAGE_BITS = 12

#: One protection window as the ingress sees it (registers WIN[w]): pages ``base`` to ``limit``
#: (inclusive, address bits [63:12]); it applies to a write when ``open`` and its source node's
#: bit of ``sources`` is set; ``writable`` 0 makes it read-only.
Window = data.StructLayout({
    "base":     64 - PAGE_BITS,
    "limit":    64 - PAGE_BITS,
    "open":     1,
    "writable": 1,
    "sources":  N_NODES,
})


def crosses_page(hdr):
    """Return a 1-bit value: the memory request ``hdr`` crosses a 4 KiB boundary.

    DW address bits [11:2] plus the length in DWs (0 meaning 1024) beyond 1024.  The PCIe base
    specification forbids such requests; the check refuses them, so "the first byte is in the
    window" is "the whole TLP is"."""
    length = hdr.common.length
    dws = Cat(length, length == 0)                     # 1..1024
    start = request_address(hdr)[2:PAGE_BITS]
    return (start + dws) > (1 << (PAGE_BITS - 2))


def window_verdict(hdr, windows):
    """Return ``(passed, denied)``, each a list of one 1-bit value per window, for the memory
    write ``hdr``.

    ``passed[w]``: its first byte's page lies in window ``w``, open, writable and admitting its
    source; ``denied[w]``: the same with ``w`` read-only.  The source node is
    requester ID bits [15:8]; a value of ``N_NODES`` or more is admitted by no window.  The page
    compares are borrow chains (as the route table's, :func:`~peach2.router.table.route_matches`),
    the source bit a 16:1 multiplexer.
    """
    # The page of each header format, compared separately (so that no LUT level choosing the
    # format lies before the carry chains, where it would be shared with the route compare).
    four = hdr.common.fmt.as_value()[0]
    page4 = Cat(hdr.mem64.address_lo[PAGE_BITS - 2:], hdr.mem64.address_hi)
    page3 = hdr.mem32.address[PAGE_BITS - 2:]
    source = hdr.mem32.requester_id[8:]
    known = source[4:] == 0
    passed, denied = [], []
    for w in windows:
        inside = Mux(four, not_below(page4, w.base) & not_below(w.limit, page4),
                     not_below(page3, w.base) & not_below(w.limit, page3))
        applies = w.open & inside & known & w.sources.bit_select(source[:4], 1)
        passed.append(applies & w.writable)
        denied.append(applies & ~w.writable)
    return passed, denied


def window_view(csr, regmap, w):
    """Return the :data:`Window` value of window ``w`` from the register block ``csr``'s
    ``WIN_*`` ports (the fields' positions from ``regmap``)."""
    def field(name, fname):
        reg = regmap[name]
        f = next(f for f in reg.all_fields if f.name == fname)
        return getattr(csr, reg.port_name)[w][f.lsb:f.lsb + f.width]
    return Cat(
        field("WIN_BASE_LO", "addr"), getattr(csr, "win_base_hi")[w],
        field("WIN_LIMIT_LO", "addr"), getattr(csr, "win_limit_hi")[w],
        field("WIN_CTRL", "open"), field("WIN_CTRL", "writable"),
        field("WIN_SOURCES", "nodes"))


class ProtectionLog(wiring.Component):
    """PROT_STATUS and PROT_SOURCES: what the windows refused since the last PROT_CLEAR.

    Members
    -------
    refused : In(N_PORTS)
        One-cycle strobe per port (bit = port number): a write was refused.
    source : In(ArrayLayout(8, N_PORTS))
        Its source (requester ID bits [15:8]), valid with the strobe.
    clear : In(1)
        PROT_CLEAR written with ``clear`` set; a refusal in the same cycle is kept.
    status : Out(16)
        PROT_STATUS: ``valid`` [0], ``port`` [2:1], ``source`` [15:8] of the last refusal
        (the lowest-numbered port's when several come in one cycle).
    sources : Out(32)
        PROT_SOURCES: bit n for a refused source n < N_NODES, bit 31 for any other.
    """

    def __init__(self):
        super().__init__({
            "refused": In(N_PORTS),
            "source":  In(data.ArrayLayout(8, N_PORTS)),
            "clear":   In(1),
            "status":  Out(16),
            "sources": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        seen = Signal(32)
        now = []                        # per port: the PROT_SOURCES bits it sets this cycle
        for p in range(N_PORTS):
            src = self.source[p]
            bits = [src == k for k in range(N_NODES)] + [Const(0)] * (31 - N_NODES)
            now.append(Cat(*bits, src[4:].any()) & self.refused[p].replicate(32))
        m.d.sync += seen.eq((seen & ~self.clear.replicate(32)) | _or(now))
        m.d.comb += self.sources.eq(seen)
        with m.If(self.clear):
            m.d.sync += self.status.eq(0)
        for p in reversed(range(N_PORTS)):
            # The last assignment wins: the lowest-numbered port of this cycle is recorded.
            with m.If(self.refused[p]):
                m.d.sync += self.status.eq(Cat(Const(1, 1), Const(p, 2), Const(0, 5),
                                               self.source[p]))
        return m


def _or(values):
    """The bitwise OR of equally wide values."""
    result = values[0]
    for v in values[1:]:
        result = result | v
    return result
