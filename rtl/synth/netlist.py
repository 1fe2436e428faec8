"""Logic depth of a Yosys JSON netlist: register-to-register paths in LUT levels.

A stand-in for ``ltp -noff`` that also works across separately synthesised blocks and says which
blocks a path crosses.  Every register, memory with a clocked read port and core pin starts and
ends paths; a LUT adds one level; a carry chain adds one level where a path enters it (through
the LUT in front of the adder) and none along it, so the depth is "LUT levels outside carry
chains", the measure of the synthesis goal (6 levels, ``docs/synthesis.md``).
"""

import re
from collections import Counter, defaultdict

__all__ = ["cell_model", "Graph", "Path"]

_FF = re.compile(r"^\$_(S?DFF|DFF|ALDFF|DLATCH|SR)")


def _base_type(cell_type):
    """``$paramod\\MISTRAL_ALUT_ARITH\\LUT0=...`` -> ``MISTRAL_ALUT_ARITH``."""
    if cell_type.startswith("$paramod"):
        return cell_type.split("\\")[1]
    return cell_type


def cell_model(cell):
    """Return ``(kind, arcs, seq_inputs, seq_outputs)`` of a Yosys JSON cell.

    ``kind`` is the cell's area class ("lut", "arith", "ff", "mem", "none" or "other");
    ``arcs`` lists ``(input bits, output bits, levels)`` of its combinational paths;
    ``seq_inputs``/``seq_outputs`` are the bits where register-to-register paths end/start.
    """
    kind = _base_type(cell["type"])
    conn = cell["connections"]
    dirs = cell.get("port_directions", {})
    inputs = [b for p, bits in conn.items() if dirs.get(p) == "input" for b in bits]
    outputs = [b for p, bits in conn.items() if dirs.get(p) == "output" for b in bits]
    if kind == "$lut" or kind.startswith("MISTRAL_ALUT") and kind != "MISTRAL_ALUT_ARITH" \
            or kind == "MISTRAL_NOT":
        return "lut", [(inputs, outputs, 1)], [], []
    if kind == "MISTRAL_ALUT_ARITH":
        lut_in = [b for p in ("A", "B", "C", "D0", "D1") for b in conn.get(p, [])]
        return "arith", [(lut_in, outputs, 1), (conn.get("CI", []), outputs, 0)], [], []
    if _FF.match(kind) or kind == "MISTRAL_FF":
        return "ff", [], inputs, outputs
    if kind == "$mem_v2":
        return "mem", *_mem_v2(cell)
    if kind == "MISTRAL_MLAB":          # asynchronous read port: a LUT-RAM read, one level
        read = [b for b in conn.get("B1ADDR", [])]
        return "mem", [(read, conn.get("B1DATA", []), 1)], \
            [b for b in inputs if b not in read], []
    if kind == "MISTRAL_M10K":
        return "mem", [], inputs, outputs
    if kind in ("$scopeinfo", "MISTRAL_CLKBUF") or not outputs:
        return "none", [(inputs, outputs, 0)] if outputs else [], [], []
    return "other", [(inputs, outputs, 1)], [], []


def _mem_v2(cell):
    """Arcs of a ``$mem_v2``: an asynchronous read port is one level from address to data."""
    p, conn = cell["parameters"], cell["connections"]
    n_rd, abits, width = int(p["RD_PORTS"], 2), int(p["ABITS"], 2), int(p["WIDTH"], 2)
    clocked = [bit == "1" for bit in reversed(p["RD_CLK_ENABLE"])] if n_rd else []
    arcs, seq_in, seq_out = [], [], []
    for port in range(n_rd):
        addr = conn["RD_ADDR"][port * abits:(port + 1) * abits]
        data = conn["RD_DATA"][port * width:(port + 1) * width]
        if clocked[port]:
            seq_in += addr + conn["RD_EN"][port:port + 1]
            seq_out += data
        else:
            arcs.append((addr, data, 1))
    for name in ("WR_ADDR", "WR_DATA", "WR_EN"):
        seq_in += conn.get(name, [])
    return arcs, seq_in, seq_out


class Path:
    """A register-to-register path: ``levels`` and the cells on it as ``(block, name)``."""

    def __init__(self, levels, start, end, cells, nets=()):
        self.levels, self.start, self.end, self.cells = levels, start, end, cells
        self.nets = list(nets)      # names of the nets along the path, start to end

    @property
    def blocks(self):
        """Blocks the path crosses, in order, each named once per stay."""
        out = []
        for block in [self.start[0]] + [b for b, _ in self.cells] + [self.end[0]]:
            if not out or out[-1] != block:
                out.append(block)
        return out


class Graph:
    """Nets of several flat Yosys modules joined at their ports, and their path depths.

    Nets are ``(scope, bit)``; :meth:`join` makes two nets one (a port connection).
    """

    def __init__(self):
        self._parent = {}
        self._cells = []            # (block, end label, arcs, seq_in, seq_out, cell name)
        self._names = {}            # net -> a public name
        self._starts = set()
        self._ends = []             # (net, block, label)
        self.counts = defaultdict(Counter)
        self.memories = defaultdict(list)       # block -> sizes of LUT-RAM memories

    def _find(self, net):
        parent = self._parent
        root = net
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(net, net) != root:
            parent[net], net = root, parent[net]
        return root

    def join(self, a, b):
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[ra] = rb

    def add_module(self, scope, block, module, skip=()):
        """Add the cells of a flat JSON ``module`` whose nets live in ``scope``, except those
        whose type is in ``skip`` (instances of other modules, joined with :meth:`join`)."""
        names = self._names
        for name, net in module.get("netnames", {}).items():
            if not net.get("hide_name"):
                for index, bit in enumerate(net["bits"]):
                    if isinstance(bit, int):
                        label = name if len(net["bits"]) == 1 else f"{name}[{index}]"
                        old = names.get((scope, bit))
                        if old is None or len(label) < len(old):   # the plainest name
                            names[(scope, bit)] = label
        for name, cell in module["cells"].items():
            if cell["type"] in skip:
                continue
            kind, arcs, seq_in, seq_out = cell_model(cell)
            self.counts[block][kind] += 1
            self.counts[block][_base_type(cell["type"])] += 1
            if kind == "mem" and cell["type"] == "$mem_v2":
                p = cell["parameters"]
                bits = int(p["SIZE"], 2) * int(p["WIDTH"], 2)
                self.counts[block]["mem_bits"] += bits
                if "0" in p["RD_CLK_ENABLE"]:           # asynchronous read: LUT RAM
                    self.counts[block]["mlab_bits"] += bits
                    self.memories[block].append(bits)

            def nets(bits):
                return [(scope, b) for b in bits if isinstance(b, int)]
            # A path into a register is named after the register, into a memory after it.
            end = name if kind == "mem" or not seq_out else None
            self._cells.append((block, end, [(nets(i), nets(o), w) for i, o, w in arcs],
                                nets(seq_in), nets(seq_out), name))

    def add_start(self, net):
        self._starts.add(net)

    def add_end(self, net, block, label):
        self._ends.append((net, block, label))

    def name(self, net):
        return self._names.get(net, f"{net[0]}:{net[1]}")

    def paths(self):
        """Return the deepest path into every endpoint, deepest first."""
        find = self._find
        fanin = defaultdict(list)           # net -> [(in net, levels, cell)]
        starts = {find(n) for n in self._starts}
        ends = [(find(n), block, label) for n, block, label in self._ends]
        for block, end, arcs, seq_in, seq_out, name in self._cells:
            for out in seq_out:
                starts.add(find(out))
            label = (block, name)
            for inputs, outputs, levels in arcs:
                roots = [find(i) for i in inputs]
                for out in outputs:
                    fanin[find(out)].extend((i, levels, label) for i in roots)
            for net in seq_in:
                ends.append((find(net), block, end or self.name(seq_out[0])))
        arrival, via = {}, {}
        for net in starts:
            arrival[net] = 0
        for root, _, _ in ends:
            self._arrive(root, fanin, arrival, via)
        named = {}

        def rank(label):        # names from the design first, then the plainest
            return ("MISTRAL" in label or "$" in label, len(label))
        for n, label in self._names.items():
            root = find(n)
            if root not in named or rank(label) < rank(named[root][1]):
                named[root] = (n[0], label)

        def describe(root):
            if root not in named or rank(named[root][1])[0]:
                return "~"          # a net the mapping made up
            return "/".join(named[root])
        paths = []
        for net, block, label in ends:
            cells, start, nets = [], net, [net]
            while start in via:
                start, cell = via[start]
                cells.append(cell)
                nets.append(start)
            cells.reverse()
            nets.reverse()
            start_block = cells[0][0] if cells else block
            paths.append(Path(arrival[net], (start_block, self.name(start)), (block, label),
                              cells, [describe(n) for n in nets]))
        paths.sort(key=lambda p: -p.levels)
        return paths

    @staticmethod
    def _arrive(root, fanin, arrival, via):
        """Depth of ``root``: iterative depth-first search; a combinational loop counts 0."""
        stack, open_ = [(root, False)], set()
        while stack:
            net, expanded = stack.pop()
            if net in arrival:
                continue
            if not expanded:
                if net in open_:                # on the current path: a loop
                    continue
                open_.add(net)
                stack.append((net, True))
                stack.extend((i, False) for i, _, _ in fanin.get(net, ())
                             if i not in arrival and i not in open_)
                continue
            open_.discard(net)
            best, best_via = 0, None
            for i, levels, cell in fanin.get(net, ()):
                depth = arrival.get(i, 0) + levels
                if depth > best:
                    best, best_via = depth, (i, cell)
            arrival[net] = best
            if best_via is not None:
                via[net] = best_via
