"""The receive side of the hard-IP model: TLPs queued toward the DUT, sent on ``rx_st_*``.

:class:`RxStream` holds what :class:`~peach2.sim.hardip.model.HardIPModel` has to deliver to the DUT
(TLPs from the link after their BAR lookup, TLPs and raw beats injected by a test) and puts one
128-bit Avalon-ST beat per cycle on the DUT's ``rx_st_*`` pins when the model lets it (the
model applies the ready latency of ``rx_st_ready``).  Framing is
:func:`~peach2.sim.hardip.avalon.tlp_to_avalon_beats`'s.

Simplifications (as in the model's docstring): ``rx_st_mask`` holds back non-posted requests
after at most ``mask_slack`` more of them started, and posted requests and completions pass
held-back non-posted requests (legal PCIe ordering); the flow-control credits of a TLP are
returned to the link when its EOP beat reaches the DUT; ``cpl_space`` optionally checks that
the completions waiting for the DUT fit the room it reserved (rule ``rx-cpl-overflow``).
"""

from collections import deque

from cocotb.triggers import Event

from peach2.sim.run import bit_value

from .avalon import tlp_to_avalon_beats

__all__ = ["RxStream"]


class RxStream:
    """TLPs and raw beats on their way to the DUT, one ``rx_st_*`` beat per :meth:`step`.

    Parameters
    ----------
    outs : list of pin writers
        The model's writers (``hardip._Out``) of ``rx_st_data``, ``_sop``, ``_eop``,
        ``_empty``, ``_bardec``, ``_be`` and ``_err``, in this order.
    valid : pin writer
        The writer of ``rx_st_valid``.
    mask : cocotb handle or None
        The DUT's ``rx_st_mask`` (None: never masked).
    mask_slack : int
        Non-posted requests that may still start after ``rx_st_mask`` is seen high.
    idle_inside_packets : bool
        Let the idle generator drop ``rx_st_valid`` inside a packet too, not only between.
    cpl_space : tuple of int or None
        (headers, bytes) of completions that may wait for the DUT (checked when given).
    rng : random.Random or None
        Drives random bits on don't-care data (dirty mode) when given.
    violate : callable
        ``violate(rule, message)``, the model's.

    Members
    -------
    tlps : int
        TLPs delivered to the DUT (raw beats not counted).
    on_rx : callable or None
        ``on_rx(tlp, bardec)`` when a TLP's EOP beat is presented to the DUT.
    idle_gen : iterator or None
        Each value 1 holds ``rx_st_valid`` low for one cycle.
    idle_event : cocotb Event
        Set when the queues have run empty.
    """

    def __init__(self, outs, valid, mask, *, mask_slack, idle_inside_packets, cpl_space, rng,
                 violate):
        self.outs, self.valid, self.mask = outs, valid, mask
        self.mask_slack, self.idle_inside_packets = mask_slack, idle_inside_packets
        self.cpl_space, self.rng, self.violate = cpl_space, rng, violate
        # posted+completions and non-posted queues of (sequence, tlp, bardec, beats)
        self.posted, self.nonposted = deque(), deque()
        self.seq = 0
        self.current, self.index = None, 0
        self.np_slack = mask_slack
        self.cpl_headers = self.cpl_bytes = 0
        self.idle_event = Event()
        self.idle_event.set()
        self.idle_gen = None
        self.tlps = 0
        self.on_rx = None

    @property
    def depth(self):
        """TLPs (and raw packets) waiting or being sent."""
        return len(self.posted) + len(self.nonposted) + (self.current is not None)

    def quiet(self):
        """Nothing to send, ``rx_st_valid`` low and no idle generator to step."""
        return (self.current is None and not self.posted and not self.nonposted
                and not self.valid.val and self.idle_gen is None)

    def enqueue(self, tlp, bardec):
        """Queue ``tlp`` for the DUT with BAR hits ``bardec``."""
        if tlp.is_completion() and self.cpl_space is not None:
            self.cpl_headers += 1
            self.cpl_bytes += tlp.get_payload_size()
            if self.cpl_headers > self.cpl_space[0] or self.cpl_bytes > self.cpl_space[1]:
                self.violate("rx-cpl-overflow", f"{self.cpl_headers} completions / "
                             f"{self.cpl_bytes} B waiting, completion space is "
                             f"{self.cpl_space}")
        (self.nonposted if tlp.is_nonposted() else self.posted).append(
            (self.seq, tlp, bardec, None))
        self.seq += 1
        self.idle_event.clear()

    def enqueue_beats(self, beats):
        """Queue raw beats, in order with the TLPs (as posted)."""
        self.posted.append((self.seq, None, 0, list(beats)))
        self.seq += 1
        self.idle_event.clear()

    def restart(self):
        """In reset: ``rx_st_valid`` low; a packet cut by reset starts again."""
        self.index = 0
        self.valid.set(0)

    def _pick(self):
        pc, np = self.posted, self.nonposted
        if np and (not pc or np[0][0] < pc[0][0]):
            if self.mask is not None and bit_value(self.mask):
                if self.np_slack > 0:
                    self.np_slack -= 1
                    return np.popleft()
                return pc.popleft() if pc else None
            self.np_slack = self.mask_slack
            return np.popleft()
        return pc.popleft() if pc else None

    def step(self, allowed):
        """One cycle: the next beat if ``allowed`` (the DUT was ready) and not idled, else
        ``rx_st_valid`` low."""
        if self.current is None:
            entry = self._pick()
            if entry is None:
                if self.valid.val:
                    self._go_idle()
                return
            _, tlp, bardec, beats = entry
            if beats is None:
                beats = tlp_to_avalon_beats(tlp, bardec, self.rng)
            self.current, self.index = (tlp, bardec, beats), 0
        if allowed:
            gen = self.idle_gen
            if (gen is None or (self.index and not self.idle_inside_packets)
                    or not next(gen, 0)):
                tlp, bardec, beats = self.current
                b = beats[self.index]
                o = self.outs
                o[0].set(b.data)
                o[1].set(int(b.sop))
                o[2].set(int(b.eop))
                o[3].set(b.empty)
                o[4].set(b.bardec)
                o[5].set(b.be)
                o[6].set(int(b.err))
                self.valid.set(1)
                self.index += 1
                if self.index == len(beats):
                    self._done(tlp, bardec)
                return
        if self.valid.val:
            self._go_idle()

    def _go_idle(self):
        self.valid.set(0)
        if self.rng is not None:  # don't-care while valid is low
            o, rng = self.outs, self.rng
            o[0].set(rng.getrandbits(128))
            o[1].set(rng.getrandbits(1))
            o[2].set(rng.getrandbits(1))

    def _done(self, tlp, bardec):
        self.current = None
        if tlp is None:  # raw beats from enqueue_beats
            if not self.posted and not self.nonposted:
                self.idle_event.set()
            return
        self.tlps += 1
        tlp.release_fc()
        if tlp.is_completion() and self.cpl_space is not None:
            self.cpl_headers -= 1
            self.cpl_bytes -= tlp.get_payload_size()
        if self.on_rx is not None:
            self.on_rx(tlp, bardec)
        if not self.posted and not self.nonposted:
            self.idle_event.set()
