"""Test-only top: Stratix IV RX adapter -> internal TLP stream -> TX adapter.

::

    hard-IP model (RX side) --> AvalonST128RX --o_tlp--+--> AvalonST128TX --> hard-IP model (TX side)
                                                       |
                                                    mon_* (internal stream, for a monitor)

The internal stream is brought out on flat ``mon_*`` ports so a testbench can check the RX
adapter's output against the stream reference model independently of the TX adapter.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from peach2.tlp.avalon_rx import AvalonST128RX
from peach2.tlp.avalon_tx import AvalonST128TX
from peach2.tlp.layouts import TLPHeader
from peach2.util import forward_members, members_with_prefix

__all__ = ["Loopback"]


class Loopback(wiring.Component):
    """RX adapter looped back into the TX adapter.

    Members
    -------
    rx_st_*, tx_st_* :
        The hard IP's application interface, as on the adapters.
    mon_* : Out
        The internal stream between the adapters (``valid``, ``ready`` and payload fields).
    rx_err_count, rx_malformed_count, tx_underrun_count, tx_malformed_count, tx_dropped_count : Out(32)
        The adapters' counters.
    """

    def __init__(self, *, tx_start_level=None, tx_depth=512):
        self.rx = AvalonST128RX()
        self.tx = AvalonST128TX(start_level=tx_start_level, depth=tx_depth)
        super().__init__({
            **members_with_prefix(self.rx, "rx_st_"),
            **members_with_prefix(self.tx, "tx_st_"),
            "tx_cred":            wiring.In(36),
            "mon_valid":          Out(1),
            "mon_ready":          Out(1),
            "mon_hdr":            Out(TLPHeader.as_shape().size),
            "mon_data":           Out(128),
            "mon_dw_en":          Out(4),
            "mon_first":          Out(1),
            "mon_last":           Out(1),
            "mon_err":            Out(1),
            "mon_bar":            Out(8),
            "rx_err_count":       Out(32),
            "rx_malformed_count": Out(32),
            "tx_underrun_count":  Out(32),
            "tx_malformed_count": Out(32),
            "tx_dropped_count":   Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx = rx = self.rx
        m.submodules.tx = tx = self.tx
        forward_members(m, rx, self, members_with_prefix(rx, "rx_st_"))
        forward_members(m, tx, self, members_with_prefix(tx, ("tx_st_", "tx_cred")))
        wiring.connect(m, rx.o_tlp, tx.i_tlp)
        s = rx.o_tlp
        m.d.comb += [
            self.mon_valid.eq(s.valid),
            self.mon_ready.eq(s.ready),
            self.mon_hdr.eq(s.p.hdr),
            self.mon_data.eq(s.p.data),
            self.mon_dw_en.eq(s.p.dw_en),
            self.mon_first.eq(s.p.first),
            self.mon_last.eq(s.p.last),
            self.mon_err.eq(s.p.err),
            self.mon_bar.eq(s.p.bar),
            self.rx_err_count.eq(rx.err_count),
            self.rx_malformed_count.eq(rx.malformed_count),
            self.tx_underrun_count.eq(tx.underrun_count),
            self.tx_malformed_count.eq(tx.malformed_count),
            self.tx_dropped_count.eq(tx.dropped_count),
        ]
        return m
