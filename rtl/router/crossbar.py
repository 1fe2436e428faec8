"""Non-blocking crossbar with per-output round-robin between packets."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..tlp.stream import TLPBeat, TLPStream
from ..util import RegisterSlice
from .arbiter import round_robin_after

__all__ = ["Crossbar"]


class Crossbar(wiring.Component):
    """Every input to every output at once; each output serves whole packets in round robin.

    An output locks to the input whose packet it started until that packet's last beat has
    passed, so packets are never interleaved; different outputs move packets from different
    inputs in the same cycle.  Packets from one input to one output leave in the order they
    arrived (inputs are FIFOs).

    Timing (the budget: at most 6 LUT levels between registers).  The grant is registered: each
    output keeps ``pick``, a one-hot register naming the one input it may take a beat from.
    While a packet flows, ``pick`` is its input; in the cycle its last beat moves (or while the
    picked input has no packet for this output), ``pick`` is loaded with the next requester
    after it in round robin, so a packet from another input that was already waiting follows
    with no idle cycle.  When nobody else waits, ``pick`` stays, so the same input's next
    packet also follows with no idle cycle.  A packet reaching an idle output whose ``pick``
    names another input waits one cycle for the grant (one cycle more latency than a
    combinational grant).  The round-robin choice, the beat mux (one-hot AND-OR) and
    ``ready`` toward the inputs are then each a few LUT levels deep; ``ready`` does not depend
    on ``valid``.  Each output is a :class:`~peach2.util.RegisterSlice`: one register stage,
    with a skid register that takes the beat moving in a cycle where the port behind the output
    holds it, so ``ready`` toward the inputs does not depend on that port's ``ready`` either
    (without the slice, a TX adapter's room reached the buffers', CSR's and UR generator's
    registers through the crossbar: 7 to 9 LUT levels).  Fairness: every waiting input is
    served within one round of the others.

    ``reach`` (optional, one mask of outputs per input) names the outputs an input's packets
    can be bound for; the pairs it leaves out get no grant logic at all.  It is the top's
    wiring that makes them impossible (e.g. register completions only ever go to N), so the
    crossbar moves the same beats in the same cycles with or without it; without it, an
    input's ``ready`` is an OR over every output, which put the register block's state
    machine 7 LUT levels behind an output's skid register.  ``i_dest`` bits outside an input's
    ``reach`` are ignored.

    Members
    -------
    i : In(TLPStream()).array(n_in)
    i_dest : In(n_out).array(n_in)
        One-hot destination of the packet whose first beat is at input ``k``.
    o : Out(TLPStream()).array(n_out)
    """

    def __init__(self, n_in, n_out, reach=None):
        self.n_in = n_in
        self.n_out = n_out
        full = (1 << n_out) - 1
        self.reach = tuple(full for _ in range(n_in)) if reach is None else tuple(reach)
        if len(self.reach) != n_in or any(not 0 < r <= full for r in self.reach):
            self._MustUse__silence = True       # refused, so never elaborated: no warning
            raise ValueError(f"reach must be {n_in} non-empty masks of {n_out} outputs, "
                             f"not {reach!r}")
        super().__init__({
            "i":      In(TLPStream()).array(n_in),
            "i_dest": In(n_out).array(n_in),
            "o":      Out(TLPStream()).array(n_out),
        })

    def elaborate(self, platform):
        m = Module()
        n_in, n_out = self.n_in, self.n_out
        # take[j][k]: output j takes a beat of input k this cycle if input k has one.
        take = [[Signal(name=f"take_{j}_{k}") for k in range(n_in)] for j in range(n_out)]

        for j in range(n_out):
            # The output register is a register slice: ``room`` (its ready) is a register, so
            # no input's ``ready`` depends on the port behind this output in the same cycle.
            out = m.submodules[f"out{j}"] = RegisterSlice(TLPBeat)
            wiring.connect(m, wiring.flipped(self.o[j]), out.o)
            o = out.i
            # pick: the one input this output may take from (one-hot, never zero).
            pick = Signal(n_in, name=f"pick_{j}", init=1 << (n_in - 1))
            locked = Signal(name=f"locked_{j}")
            room = Signal(name=f"room_{j}")
            m.d.comb += room.eq(o.ready)

            # Only the inputs whose ``reach`` includes this output take part in its grant.
            reaches = [bool(self.reach[k] >> j & 1) for k in range(n_in)]
            requests = [self.i[k].valid & self.i[k].p.first & self.i_dest[k][j]
                        if reaches[k] else Const(0) for k in range(n_in)]
            # allowed[k]: the picked input's beat at k may go to this output (room aside).
            allowed = [pick[k] & (locked | (self.i[k].p.first & self.i_dest[k][j]))
                       if reaches[k] else Const(0) for k in range(n_in)]
            for k in range(n_in):
                m.d.comb += take[j][k].eq(allowed[k] & room)

            hit = Signal(name=f"hit_{j}")          # a beat moves when there is room
            last = Signal(name=f"last_{j}")        # the picked input's beat ends its packet
            pick_waits = Signal(name=f"pick_waits_{j}")
            m.d.comb += [
                hit.eq(Cat(allowed[k] & self.i[k].valid for k in range(n_in)).any()),
                last.eq(Cat(pick[k] & self.i[k].p.last for k in range(n_in)).any()),
                pick_waits.eq(Cat(pick[k] & requests[k] for k in range(n_in)).any()),
            ]

            # Into the output slice: the beat of the picked input (one-hot AND-OR mux).
            m.d.comb += [
                o.valid.eq(hit),
                o.p.eq(_one_hot_mux(pick, [self.i[k].p.as_value() for k in range(n_in)])),
            ]
            with m.If(room & hit):
                m.d.sync += locked.eq(~last)

            # Next grant.  ``after`` is registered every cycle: the next requester after the
            # input picked in the following cycle (that input itself when nobody else waits).
            # It is loaded into ``pick`` when a packet's last beat moves, so a waiting packet
            # follows with no idle cycle, also after a one-beat packet.  While the picked input
            # has no packet for this output and none is flowing, the choice is taken directly
            # (``idle``); ``after`` is then one choice behind (``stale``), and a packet ending
            # before it has caught up takes the direct choice too.
            after = Signal(n_in, name=f"after_{j}", init=1 << (n_in - 1))
            stale = Signal(name=f"stale_{j}")
            end = Signal(name=f"end_{j}")
            idle = Signal(name=f"idle_{j}")
            found, grant = round_robin_after(requests, pick)
            found_a, grant_a = round_robin_after(requests, after)
            m.d.comb += [
                end.eq(room & hit & last),
                idle.eq(~locked & ~pick_waits & found),
            ]
            m.d.sync += [
                after.eq(Mux(end, Mux(found_a, grant_a, after), Mux(found, grant, pick))),
                stale.eq(Mux(end, stale, idle)),
            ]
            with m.If(end):
                with m.If(stale):
                    with m.If(found):
                        m.d.sync += pick.eq(grant)
                with m.Else():
                    m.d.sync += pick.eq(after)
            with m.Elif(idle):
                m.d.sync += pick.eq(grant)

        for k in range(n_in):
            m.d.comb += self.i[k].ready.eq(Cat(take[j][k] for j in range(n_out)).any())
        return m


def _one_hot_mux(select, values):
    """OR of the ``values`` whose bit of ``select`` is set (``select`` is one-hot or zero)."""
    width = len(values[0])
    result = 0
    for k, value in enumerate(values):
        result = result | (value & select[k].replicate(width))
    return result
