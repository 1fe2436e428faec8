"""The register description and what it generates: docs, C header, JSON, CLI, checks."""

import json
import shutil
import subprocess

import pytest

from peach2.cli import main
from peach2.csr import render
from peach2.csr.regmap import (
    REGMAP,
    REGS,
    Access,
    CountReason,
    DmaError,
    Field,
    Port,
    Register,
    RegisterMap,
    peach2_regmap,
)
from peach2.sim.run import ROOT

REGEN = "peach2 regmap --format md -o docs/registers.md"


def test_docs_registers_md_is_current():
    path = ROOT / "docs" / "registers.md"
    assert path.exists(), f"docs/registers.md is missing; generate it with: {REGEN}"
    assert path.read_text() == render.to_markdown(REGMAP), \
        f"docs/registers.md is stale (rtl/csr/regmap.py changed); regenerate it with: {REGEN}"


def test_map_matches_the_specification():
    """Spot checks of the map against its specification: values written down independently of
    the description (ID, VERSION, CONFIG, offsets)."""
    assert REGS["ID"].value == 0x50434832
    assert REGS["VERSION"].decode(REGS["VERSION"].value) == {"major": 0, "minor": 2}
    assert REGS["CONFIG"].decode(REGS["CONFIG"].value) == {
        "n_routes": 8, "s_is_rc": 1, "n_ports": 4, "buffer_beats": 128}
    expect = {"NODE": 0x00C, "OFFSET_LO": 0x010, "OFFSET_HI": 0x014, "CONTROL": 0x018,
              "COUNTER_CLEAR": 0x01C, "PCIE_ID": 0x030, "MSI": 0x034}
    assert {n: REGS[n].offset for n in expect} == expect
    assert REGS["PORT_STATUS"].offset_of("S") == 0x02C
    assert REGS["ROUTE_TARGET"].offset_of(3) == 0x100 + 32 * 3 + 0x18
    assert REGS["COUNT"].offset_of(("E", "UR_SENT")) == 0x800 + 4 * (1 * 16 + 10)
    assert REGS["COUNT"].offset_of((Port.W, CountReason.POISONED)) == 0x800 + 4 * (2 * 16 + 7)
    assert REGS["ROUTE_TARGET"].encode(port=3, enable=1) == 0x8000_0003
    assert REGS["CONTROL"].encode(pio_enable=1, route_enable=1) == 3
    assert [r.access for r in REGMAP if r.group == "ROUTE"] == [Access.RW] * 7
    assert REGMAP.at(0x844) == (REGS["COUNT"], 17)
    assert REGMAP.at(0x04C) is None
    assert REGS["CH_CTRL"].offset_of(2) == 0x388 and REGS["SLOT_COUNT"].offset_of((1, 2)) == 0x5A0
    assert peach2_regmap(n_routes=16)["ROUTE_TARGET"].offset_of(15) == 0x2F8


def test_field_and_index_errors():
    with pytest.raises(ValueError, match="2 bit"):
        REGS["ROUTE_TARGET"].encode(port=4)
    with pytest.raises(KeyError, match="no field"):
        REGS["CONTROL"].encode(dma_enable=1)
    with pytest.raises(IndexError, match="out of range"):
        REGS["ROUTE_MASK_LO"].offset_of(8)
    with pytest.raises(IndexError, match="not one of"):
        REGS["COUNT"].offset_of(("X", 0))
    with pytest.raises(IndexError, match="give an index"):
        REGS["COUNT"].offset_of()
    with pytest.raises(KeyError, match="no register"):
        REGMAP["NOPE"]


def test_map_checks():
    """A map with overlaps or misfit fields is refused with a clear error."""
    ok = Register("A", 0x0, Access.RW, "a")
    with pytest.raises(ValueError, match="overlaps"):
        RegisterMap("x", "x", 0x100, [ok, Register("B", 0x0, Access.RW, "b")])
    with pytest.raises(ValueError, match="overlaps"):
        RegisterMap("x", "x", 0x100, [ok, Register("B", 0x0, Access.RW, "b", dims=(4,),
                                                   stride=8, reserved=frozenset())])
    with pytest.raises(ValueError, match="does not fit"):
        RegisterMap("x", "x", 0x100, [Register("B", 0x0, Access.RW, "b",
                                               fields=(Field("f", 30, 4),))])
    with pytest.raises(ValueError, match="overlaps another field"):
        RegisterMap("x", "x", 0x100, [Register("B", 0x0, Access.RW, "b",
                                               fields=(Field("f", 0, 4), Field("g", 3, 1)))])
    with pytest.raises(ValueError, match="beyond"):
        RegisterMap("x", "x", 0x100, [Register("B", 0xf0, Access.RW, "b", dims=(8,))])
    with pytest.raises(ValueError, match="multiples of 4"):
        RegisterMap("x", "x", 0x100, [Register("B", 0x2, Access.RW, "b")])
    with pytest.raises(ValueError, match="reserved bits"):
        RegisterMap("x", "x", 0x100, [Register("B", 0x0, Access.CONST, "b", value=0x10,
                                               fields=(Field("f", 0, 4),))])
    with pytest.raises(ValueError, match="n_routes must be 1..16"):
        peach2_regmap(n_routes=17)
    with pytest.raises(ValueError, match="buffer_beats"):
        peach2_regmap(buffer_beats=1 << 16)


def test_json_describes_every_register():
    doc = json.loads(render.to_json(REGMAP))
    assert doc["size"] == 0x1000 and doc["params"]["n_routes"] == 8
    by_name = {r["name"]: r for r in doc["registers"]}
    assert set(by_name) == set(REGS)
    for reg in REGMAP:
        j = by_name[reg.name]
        assert j["offset"] == reg.offset and j["access"] == reg.access.value
        assert [(f["name"], f["lsb"], f["width"]) for f in j["fields"]] == \
            [(f.name, f.lsb, f.width) for f in reg.all_fields]
        if reg.dims:
            assert j["dims"] == list(reg.dims) and j["stride"] == reg.stride
    assert by_name["ID"]["value"] == 0x50434832
    assert [e["name"] for e in doc["enums"]["COUNT_REASON"]] == [r.name for r in CountReason]
    assert doc["groups"][0] == {"name": "ROUTE", "base": 0x100, "stride": 0x20, "count": 8,
                                "doc": "route table entry i"}
    assert [(g["name"], g["base"], g["count"]) for g in doc["groups"][1:]] == \
        [("CH", 0x300, 4), ("SLOT", 0x400, 16), ("WIN", 0x900, 8)]
    assert [e["name"] for e in doc["enums"]["DMA_ERROR"]] == [e.name for e in DmaError]


C_PROGRAM = r"""
#include <stdio.h>
#include "peach2_regs.h"
int main(void) {
    printf("ID %u %u\n", PEACH2_ID_OFFSET, PEACH2_ID_VALUE);
    printf("CONFIG %u %u\n", PEACH2_CONFIG_OFFSET, PEACH2_CONFIG_VALUE);
    printf("CONTROL_ROUTE_ENABLE %u\n", PEACH2_CONTROL_ROUTE_ENABLE_MASK);
    printf("PORT_STATUS_S %u\n", PEACH2_PORT_STATUS_OFFSET(PEACH2_PORT_S));
    printf("PORT_STATUS_LTSSM %u %u\n", PEACH2_PORT_STATUS_LTSSM_MASK,
           PEACH2_PORT_STATUS_LTSSM_SHIFT);
    printf("ROUTE_7 %u\n", PEACH2_ROUTE_OFFSET(7));
    printf("ROUTE_UPPER_HI_5 %u\n", PEACH2_ROUTE_UPPER_HI_OFFSET(5));
    printf("ROUTE_TARGET_ENABLE %u\n", PEACH2_ROUTE_TARGET_ENABLE_MASK);
    printf("COUNT_E_UR_SENT %u\n",
           PEACH2_COUNT_OFFSET(PEACH2_PORT_E, PEACH2_COUNT_REASON_UR_SENT));
    printf("MSI %u\n", PEACH2_MSI_OFFSET);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_header_compiles_and_agrees(tmp_path):
    (tmp_path / "peach2_regs.h").write_text(render.to_c_header(REGMAP))
    (tmp_path / "main.c").write_text(C_PROGRAM)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-o", str(tmp_path / "main"),
                    str(tmp_path / "main.c")], check=True, cwd=tmp_path)
    out = subprocess.run([str(tmp_path / "main")], check=True, capture_output=True,
                         text=True).stdout
    got = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in out.splitlines()}
    ltssm = next(f for f in REGS["PORT_STATUS"].fields if f.name == "ltssm")
    enable = next(f for f in REGS["ROUTE_TARGET"].fields if f.name == "enable")
    route_enable = next(f for f in REGS["CONTROL"].fields if f.name == "route_enable")
    assert got == {
        "ID": [REGS["ID"].offset, REGS["ID"].value],
        "CONFIG": [REGS["CONFIG"].offset, REGS["CONFIG"].value],
        "CONTROL_ROUTE_ENABLE": [route_enable.mask],
        "PORT_STATUS_S": [REGS["PORT_STATUS"].offset_of("S")],
        "PORT_STATUS_LTSSM": [ltssm.mask, ltssm.lsb],
        "ROUTE_7": [REGS["ROUTE_MASK_LO"].offset_of(7)],
        "ROUTE_UPPER_HI_5": [REGS["ROUTE_UPPER_HI"].offset_of(5)],
        "ROUTE_TARGET_ENABLE": [enable.mask],
        "COUNT_E_UR_SENT": [REGS["COUNT"].offset_of(("E", "UR_SENT"))],
        "MSI": [REGS["MSI"].offset],
    }


@pytest.mark.parametrize("fmt,writer", [("md", render.to_markdown), ("c", render.to_c_header),
                                        ("json", render.to_json)])
def test_cli(fmt, writer, tmp_path, capsys):
    assert main(["regmap", "--format", fmt]) == 0
    assert capsys.readouterr().out == writer(REGMAP)
    out = tmp_path / "sub" / f"regs.{fmt}"
    assert main(["regmap", "--format", fmt, "-o", str(out)]) == 0
    assert out.read_text() == writer(REGMAP)
