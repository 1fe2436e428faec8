"""The transmit-side checker of the hard-IP model: what the DUT sends on ``tx_st_*``, beat by beat.

:class:`TxChecker` reads the DUT's 128-bit Avalon-ST transmit pins once per cycle for
:class:`~peach2.sim.hardip.model.HardIPModel`, checks the interface rules the Stratix IV hard IP
imposes on its application (the vendor's user guide) and frames the beats into TLPs
(:func:`~peach2.sim.hardip.avalon.unpack_word`); :func:`tlp_problems` lists what is wrong with a
framed TLP for the link (payload and read sizes, 4 KiB crossings, header size, byte enables).
Rule names in the reports (:class:`Violation`):

- ``tx-ready-latency``: ``tx_st_valid`` high although ``tx_st_ready`` was low two cycles
  earlier (the hard IP's ready latency is 2);
- ``tx-valid-gap``: ``tx_st_valid`` low inside a packet although ``tx_st_ready`` was high two
  cycles earlier (the hard IP needs a packet's beats back to back);
- ``tx-sop-in-packet``, ``tx-outside-packet``, ``tx-eop-missing`` and the codec's framing rules
  (``tx-<FramingError.rule>``): the packet's framing;
- ``tx-mps``, ``tx-4k``, ``tx-mrrs``, ``tx-4dw-below-4g``, ``tx-be``, ``tx-malformed``: the TLP.

Simplification (as in the model's docstring): ``tx_st_err`` on any beat nullifies the packet
(counted in :attr:`TxChecker.nullified`), and the beat count of a nullified packet is not
checked.
"""

from typing import NamedTuple

from cocotbext.pcie.core.tlp import TlpType

from peach2.sim.run import bit_value, resolve_unknown

from .avalon import M32, MEM_REQ, FramingError, stream_layout, unpack_word

__all__ = ["Violation", "TxChecker", "tlp_problems"]


class Violation(NamedTuple):
    """One protocol violation seen on the DUT's TX interface (or RX-side misuse)."""
    rule: str
    cycle: int
    time_ns: float
    message: str

    def __str__(self):
        return f"[{self.rule}] cycle {self.cycle} ({self.time_ns:.1f} ns): {self.message}"


class _TxPacket:
    """A packet being received from the DUT: beats so far (concatenated), expected count."""
    __slots__ = ("word", "beats", "want", "err", "start", "bad")

    def __init__(self, word, want, err, start):
        self.word, self.beats, self.want, self.err = word, 1, want, err
        self.start, self.bad = start, False


class TxChecker:
    """Reads and checks the DUT's ``tx_st_*`` pins one cycle at a time; frames its TLPs.

    Parameters
    ----------
    valid, sop, eop, data, empty : cocotb handles
        The DUT's ``tx_st_valid``, ``tx_st_sop``, ``tx_st_eop``, ``tx_st_data`` (128 bits) and
        ``tx_st_empty``.
    err : cocotb handle or None
        ``tx_st_err`` (None: the DUT has none, never nullifies).
    violate : callable
        ``violate(rule, message)`` records a violation (the model's: it adds the cycle and
        time, and raises in strict mode).

    Members
    -------
    packet : _TxPacket or None
        The packet whose eop has not been seen yet (None between packets).
    nullified : int
        Packets the DUT nullified with ``tx_st_err``.
    started : int or None
        The cycle of the SOP beat of the last packet whose EOP beat was seen.
    """
    __slots__ = ("valid", "sop", "eop", "data", "empty", "err", "violate", "packet", "nullified",
                 "started")

    def __init__(self, valid, sop, eop, data, empty, err, violate):
        self.valid, self.sop, self.eop, self.data, self.empty = valid, sop, eop, data, empty
        self.err, self.violate = err, violate
        self.packet = None
        self.nullified = 0
        self.started = None

    def step(self, ready_then, cycle):
        """Check the beat of cycle ``cycle``; return the TLP it completes, or None.

        ``ready_then`` is the model's ``tx_st_ready`` two cycles before the beat (the hard IP's
        ready latency).  A returned TLP is framed correctly; :func:`tlp_problems` checks it.
        """
        if bit_value(self.valid):
            if not ready_then:
                self.violate("tx-ready-latency",
                             "tx_st_valid=1 but tx_st_ready was 0 two cycles earlier")
            return self._beat(cycle)
        if self.packet is not None and ready_then:
            self.violate("tx-valid-gap", "tx_st_valid=0 inside a packet (started at cycle "
                         f"{self.packet.start}) although tx_st_ready was 1 two cycles earlier")
        return None

    def _beat(self, cycle):
        sop, eop = bit_value(self.sop), bit_value(self.eop)

        text = self.data._handle.get_signal_val_binstr()    # as tlpstream.bit_value
        try:
            data = int(text, 2)
        except ValueError:  # X/Z in don't-care lanes
            data, _ = resolve_unknown(text)
        err = bit_value(self.err) if self.err is not None else 0
        pkt = self.packet
        if sop:
            if pkt is not None:
                self.violate("tx-sop-in-packet",
                             f"sop while the packet started at cycle {pkt.start} has no eop")
            n = stream_layout(data & M32, (data >> 64) & M32, (data >> 96) & M32)[2]
            pkt = self.packet = _TxPacket(data, (n + 3) // 4, err, cycle)
        elif pkt is None:
            self.violate("tx-outside-packet", "valid beat without sop outside a packet")
            return None
        else:
            pkt.word |= data << 128 * pkt.beats
            pkt.beats += 1
            pkt.err |= err
        if eop:
            self.packet, self.started = None, pkt.start
            if pkt.err:
                self.nullified += 1
            elif not pkt.bad:
                try:
                    return unpack_word(pkt.word, pkt.beats, bit_value(self.empty))
                except FramingError as exc:
                    self.violate(f"tx-{exc.rule}", f"{exc} (packet started at cycle "
                                 f"{pkt.start})")
        elif pkt.beats >= pkt.want and not pkt.bad and not pkt.err:
            pkt.bad = True
            self.violate("tx-eop-missing", f"no eop on beat {pkt.beats}, where the header of "
                         f"the packet started at cycle {pkt.start} says it ends")
        return None


def tlp_problems(tlp, mps, mrrs):
    """Yield ``(rule, message)`` for each rule a TLP from the DUT breaks, with max payload size
    ``mps`` and max read request size ``mrrs`` in bytes."""
    ft = tlp.fmt_type
    if tlp.has_data() and tlp.get_payload_size() > mps:
        yield "tx-mps", f"payload {tlp.get_payload_size()} B > max payload size {mps} B"
    if ft in MEM_REQ:
        if (tlp.address & 0xFFF) + 4 * tlp.length > 0x1000:
            yield "tx-4k", "memory request crosses a 4 KiB boundary"
        if ft in (TlpType.MEM_READ, TlpType.MEM_READ_64) and 4 * tlp.length > mrrs:
            yield "tx-mrrs", f"read of {4 * tlp.length} B > max read request {mrrs} B"
        if tlp.get_header_size_dw() == 4 and tlp.address < 1 << 32:
            yield "tx-4dw-below-4g", "4-DW header for an address below 4 GiB"
        if (tlp.length == 1 and tlp.last_be) or (tlp.length > 1 and not
                                                 (tlp.first_be and tlp.last_be)):
            yield "tx-be", f"first_be {tlp.first_be:#x} / last_be {tlp.last_be:#x} " \
                           f"invalid for length {tlp.length}"
    if not tlp.check():
        yield "tx-malformed", "Tlp.check() failed"
