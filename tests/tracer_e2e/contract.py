"""The attribute table of docs/trace-contract.md, read from the document itself.

Tests check received spans against the published page, so the code, the
page and what goes over the wire cannot drift apart unnoticed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "trace-contract.md"

# Contract type -> the OTLP ``AnyValue`` field that must carry it.
WIRE_TYPES = {
    "string": "string_value",
    "int": "int_value",
    "double": "double_value",
    "bool": "bool_value",
}

# An attribute row: | `name` | type | on | meaning |
_ROW = re.compile(
    r"^\| `(?P<name>[a-z_]+\.[a-z_.]+)` \| (?P<type>string|int|double|bool) \| (?P<on>[^|]+) \|",
    re.M,
)


@dataclass(frozen=True)
class Declared:
    name: str
    wire_type: str
    on_call: bool
    on_attempt: bool


def declared_attributes() -> dict[str, Declared]:
    """Every attribute row of the contract, by name."""
    rows = {}
    for match in _ROW.finditer(CONTRACT.read_text(encoding="utf-8")):
        on = match["on"]
        rows[match["name"]] = Declared(
            name=match["name"],
            wire_type=WIRE_TYPES[match["type"]],
            on_call="call" in on,
            on_attempt="attempt" in on,
        )
    if len(rows) < 30:  # the table moved or changed shape: fail loudly, not vacuously
        raise AssertionError(f"only {len(rows)} attribute rows found in {CONTRACT}")
    return rows
