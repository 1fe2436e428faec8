"""The PEACH2 board as an Amaranth Intel platform (002 section 3.6, Table 1).

The ordinary resources (RS-232C, DDR3 and its SPD bus) are made with amaranth-boards' resource
helpers, the others named as its board files name them; the pin locations come from
``constraints/peach2_pins.toml``.  No pin of the board is published, so every location is a
placeholder unless that file gives one: placeholder names start with
:data:`PLACEHOLDER`, and the QSF this platform writes keeps their location assignments commented
out under a ``PLACEHOLDER`` line (Quartus then places those pins itself).
"""

import tomllib
from importlib.resources import files
from pathlib import Path

from amaranth.build import Attrs, Clock, Pins, PinsN, Resource, Subsignal
from amaranth.vendor import IntelPlatform
from amaranth_boards.resources import DDR3Resource, I2CResource, UARTResource

__all__ = ["PEACH2Platform", "PLACEHOLDER", "CONSTRAINTS", "PIN_FILE", "SDC_FILE", "load_pins"]

#: The timing and pin files: the repository's ``constraints/`` folder, which installs as the
#: package ``peach2.constraints`` (an editable install reads the folder itself).
CONSTRAINTS = Path(files("peach2.constraints"))
PIN_FILE = CONSTRAINTS / "peach2_pins.toml"
SDC_FILE = CONSTRAINTS / "peach2.sdc"

#: Prefix of a pin whose location is not published.
PLACEHOLDER = "UNPUBLISHED_"

#: PCIe ports: name, whether PERST# is an input (endpoint), an output (root port) or either.
PCIE_PORTS = {"n": "i", "e": "i", "w": "o", "s": "io"}

# Stratix IV I/O standards: transceiver pins (Stratix IV Device Handbook vol. 2, "Transceiver
# Architecture"), PCIe refclk (vendor SDC/Tcl generator: HCSL, INPUT_TERMINATION OFF),
# DDR3 (External Memory Interface Handbook).
_GXB = Attrs(IO_STANDARD="1.4-V PCML")
_REFCLK = Attrs(IO_STANDARD="HCSL", INPUT_TERMINATION="OFF")
_LVCMOS = Attrs(IO_STANDARD="2.5 V")
_SSTL = Attrs(IO_STANDARD="SSTL-15 CLASS I")
_SSTL_DIFF = Attrs(IO_STANDARD="DIFFERENTIAL 1.5-V SSTL CLASS I")


def load_pins(path=PIN_FILE):
    """Read a pin file: ``{resource: {signal: [location or "?", ...]}}``.

    A resource with one signal (``clk100``, ``rst_n``) is ``{resource: {"pins": [...]}}``.
    """
    with open(path, "rb") as f:
        return tomllib.load(f)


class _Pins:
    """Pin locations from a pin file, with placeholders for what is not published."""

    def __init__(self, table):
        self.table = table
        self.placeholders = []

    def __call__(self, resource, signal, count):
        given = list(self.table.get(resource, {}).get(signal, []))
        names = []
        for index in range(count):
            location = given[index] if index < len(given) else "?"
            if location == "?":
                base = resource if signal == "pins" else f"{resource}_{signal}"
                location = f"{PLACEHOLDER}{base}{index if count > 1 else ''}"
                self.placeholders.append(location)
            names.append(location)
        return " ".join(names)


def board_resources(table):
    """Return the board's resources for the pin table ``table`` (see :func:`load_pins`)."""
    pins = _Pins(table)
    resources = [
        Resource("clk100", 0, Pins(pins("clk100", "pins", 1), dir="i"), Clock(100e6), _LVCMOS),
        Resource("rst", 0, PinsN(pins("rst_n", "pins", 1), dir="i"), _LVCMOS),
    ]
    for index, (port, perst_dir) in enumerate(PCIE_PORTS.items()):
        res = f"pcie_{port}"
        resources.append(Resource(
            "pcie", index,
            Subsignal("refclk", Pins(pins(res, "refclk", 1), dir="i"), Clock(100e6), _REFCLK),
            Subsignal("perst", PinsN(pins(res, "perst_n", 1), dir=perst_dir), _LVCMOS),
            # Positive pins of the lanes only: Quartus adds the negative ones of a GXB pair.
            Subsignal("rx", Pins(pins(res, "rx", 8), dir="i"), _GXB),
            Subsignal("tx", Pins(pins(res, "tx", 8), dir="o"), _GXB),
        ))
    # The debug interfaces (002 section 3.5, footnote: Gigabit Ethernet, RS-232C and an LCD
    # module) and the DDR3 SO-DIMM (section 3.6).  The signal sets of the PHY and the LCD are
    # assumptions (pin file); amaranth-boards has helpers for the UART, the DDR3 and the SPD
    # bus, and names the other two as its board files do (``eth_rgmii``, ``lcd_hd44780``).
    resources += [
        UARTResource(0, rx=pins("uart", "rx", 1), tx=pins("uart", "tx", 1), attrs=_LVCMOS),
        Resource("eth_rgmii", 0,
                 Subsignal("rst", PinsN(pins("eth_rgmii", "rst_n", 1), dir="o")),
                 Subsignal("mdc", Pins(pins("eth_rgmii", "mdc", 1), dir="o")),
                 Subsignal("mdio", Pins(pins("eth_rgmii", "mdio", 1), dir="io")),
                 Subsignal("tx_clk", Pins(pins("eth_rgmii", "tx_clk", 1), dir="o")),
                 Subsignal("tx_ctl", Pins(pins("eth_rgmii", "tx_ctl", 1), dir="o")),
                 Subsignal("tx_data", Pins(pins("eth_rgmii", "tx_data", 4), dir="o")),
                 Subsignal("rx_clk", Pins(pins("eth_rgmii", "rx_clk", 1), dir="i"),
                           Clock(125e6)),
                 Subsignal("rx_ctl", Pins(pins("eth_rgmii", "rx_ctl", 1), dir="i")),
                 Subsignal("rx_data", Pins(pins("eth_rgmii", "rx_data", 4), dir="i")),
                 _LVCMOS),
        Resource("lcd_hd44780", 0,
                 Subsignal("rs", Pins(pins("lcd", "rs", 1), dir="o")),
                 Subsignal("rw", Pins(pins("lcd", "rw", 1), dir="o")),
                 Subsignal("e", Pins(pins("lcd", "e", 1), dir="o")),
                 Subsignal("d", Pins(pins("lcd", "d", 8), dir="io")),
                 _LVCMOS),
        DDR3Resource(0, rst_n=pins("ddr3", "reset_n", 1),
                     clk_p=pins("ddr3", "clk", 2), clk_n=pins("ddr3", "clk_n", 2),
                     clk_en=pins("ddr3", "cke", 2), cs_n=pins("ddr3", "cs_n", 2),
                     we_n=pins("ddr3", "we_n", 1), ras_n=pins("ddr3", "ras_n", 1),
                     cas_n=pins("ddr3", "cas_n", 1), a=pins("ddr3", "a", 16),
                     ba=pins("ddr3", "ba", 3), dqs_p=pins("ddr3", "dqs", 8),
                     dqs_n=pins("ddr3", "dqs_n", 8), dq=pins("ddr3", "dq", 64),
                     dm=pins("ddr3", "dm", 8), odt=pins("ddr3", "odt", 2),
                     diff_attrs=_SSTL_DIFF, attrs=_SSTL),
        # The SO-DIMM's SPD EEPROM (JEDEC DDR3 SO-DIMM), as the I2C bus ``ddr3_spd``.
        I2CResource("ddr3_spd", 0, scl=pins("ddr3", "scl", 1), sda=pins("ddr3", "sda", 1),
                    attrs=_LVCMOS),
    ]
    return resources, pins.placeholders


# The Amaranth QSF template with one change: a placeholder pin's location is commented out.
_QSF_TEMPLATE = r"""
    # {{autogenerated}}
    {% if get_override("nproc") -%}
        set_global_assignment -name NUM_PARALLEL_PROCESSORS {{get_override("nproc")}}
    {% endif %}

    {% for file in platform.iter_files(".v") -%}
        set_global_assignment -name VERILOG_FILE {{file|tcl_quote}}
    {% endfor %}
    {% for file in platform.iter_files(".sv") -%}
        set_global_assignment -name SYSTEMVERILOG_FILE {{file|tcl_quote}}
    {% endfor %}
    {% for file in platform.iter_files(".vhd", ".vhdl") -%}
        set_global_assignment -name VHDL_FILE {{file|tcl_quote}}
    {% endfor %}
    set_global_assignment -name VERILOG_FILE {{name}}.v
    set_global_assignment -name TOP_LEVEL_ENTITY {{name}}

    set_global_assignment -name FAMILY {{platform.family|tcl_quote}}
    set_global_assignment -name DEVICE {{platform.device}}{{platform.package}}{{platform.speed}}{{platform.suffix}}
    {% for port_name, pin_name, attrs in platform.iter_port_constraints_bits() -%}
        {% if pin_name.startswith(platform.placeholder) -%}
            # PLACEHOLDER (pin not published, constraints/peach2_pins.toml): set_location_assignment -to {{port_name|tcl_quote}} PIN_{{pin_name}}
        {% else -%}
            set_location_assignment -to {{port_name|tcl_quote}} PIN_{{pin_name}}
        {% endif -%}
        {% for key, value in attrs.items() -%}
            set_instance_assignment -to {{port_name|tcl_quote}} -name {{key}} {{value|tcl_quote}}
        {% endfor %}
    {% endfor %}

    set_global_assignment -name GENERATE_RBF_FILE ON

    {{get_override("add_settings")|default("# (add_settings placeholder)")}}
"""


class PEACH2Platform(IntelPlatform):
    """The PEACH2 board: Stratix IV GX EP4SGX530KH40C2, four PCIe Gen2 x8 ports, DDR3 SO-DIMM.

    002 section 3.6 and Table 1 describe the board: N on the card edge, E and W on x8 cable
    connectors, S on a x16 cable connector with 8 lanes wired, one DDR3 SO-DIMM.  The papers
    name the FPGA "Stratix IV GX 530, 290" (prototypes with either); this platform is the 530 in
    the KH40 package, speed grade C2 (EP4SGX530KH40C2, the DE4-class part).

    Resources
    ---------
    clk100 : free-running 100 MHz clock (assumed, see the pin file); the default clock.
    rst : board reset, active low on the pin; the default reset.
    pcie 0..3 : ports N, E, W, S: ``refclk`` (100 MHz), ``perst`` (PERST#, an output on W),
        ``rx``/``tx`` (8 lanes, positive pins).
    uart 0 : RS-232C (``rx``, ``tx``; through a level shifter, assumed).
    eth_rgmii 0 : the Gigabit Ethernet PHY (RGMII assumed).
    lcd_hd44780 0 : the LCD module (HD44780-type, 8-bit bus, assumed).
    ddr3 0 : the SO-DIMM's signals (64-bit, two ranks; ``clk_en`` is CKE).
    ddr3_spd 0 : the SO-DIMM's SPD EEPROM (I2C ``scl``, ``sda``).

    Attributes
    ----------
    placeholders : list of str
        Pins whose location is not published (class attribute).
    """

    device = "EP4SGX530"
    package = "KH40"
    speed = "C2"
    family = "Stratix IV"
    placeholder = PLACEHOLDER
    default_clk = "clk100"
    default_rst = "rst"
    resources, placeholders = board_resources(load_pins())
    connectors = []

    quartus_file_templates = {
        **IntelPlatform.quartus_file_templates,
        "{{name}}.qsf": _QSF_TEMPLATE,
    }

    def __init__(self, *, on_convert=None, **kwargs):
        """``on_convert()``, if given, is called once the design is elaborated, before the
        conversion to Verilog and the project files (a progress line)."""
        super().__init__(**kwargs)
        self._on_convert = on_convert

    def toolchain_prepare(self, fragment, name, **kwargs):
        if self._on_convert is not None:
            self._on_convert()
        return super().toolchain_prepare(fragment, name, **kwargs)
