"""One colour per status and error code: every one the trace contract lists has its
own, far from every other in normal vision and under simulated deuteranopia and
protanopia; anything else gets a stable colour that is never one of them."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.dashboard._charts import timeline
from toolspan.dashboard._colours import ALIASES, FALLBACK_PALETTE, STATUS_COLOURS, colour_for

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "trace-contract.md"
MIN_DELTA_E = 7.0  # CIEDE2000, between any two fixed colours, in every vision
MIN_FALLBACK_DELTA_E = 5.0  # between a fallback colour and any fixed one

# Machado, Oliveira & Fernandes (2009), severity 1.0, on linear RGB.
PROTANOPIA = ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
              (-0.003882, -0.048116, 1.051998))  # fmt: skip
DEUTERANOPIA = ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                (-0.011820, 0.042940, 0.968881))  # fmt: skip
VISIONS = {"normal": None, "deuteranopia": DEUTERANOPIA, "protanopia": PROTANOPIA}

Lab = tuple[float, float, float]
Matrix = tuple[tuple[float, float, float], ...]


def contract_names() -> set[str]:
    """Every final status (the table) and error code (the section) the contract lists."""
    text = CONTRACT.read_text(encoding="utf-8")
    statuses_part = text.split("## Final statuses", 1)[1].split("### ", 1)[0]
    statuses = set(re.findall(r"^\| `([a-z_]+)` \|", statuses_part, re.MULTILINE))
    # The section's first paragraph lists the codes (toolspan's, then MCP's).
    codes_part = "\n".join(text.split("## Error codes", 1)[1].strip().split("\n\n")[:1])
    codes = {c for c in re.findall(r"`([a-z0-9_]+)`", codes_part) if not c.endswith("_")}
    # "http_<status> for any HTTP status": the 4xx the statuses table names.
    codes |= {f"http_{n}" for n in re.findall(r"\b(4\d\d)\b", statuses_part)}
    return statuses | codes


def _linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def lab(hex_colour: str, vision: Matrix | None) -> Lab:
    """CIE L*a*b* (D65) of an sRGB colour, as someone with ``vision`` sees it."""
    rgb = [_linear(int(hex_colour[i : i + 2], 16) / 255) for i in (1, 3, 5)]
    if vision is not None:
        rgb = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb, strict=True))))
               for row in vision]  # fmt: skip
    r, g, b = rgb
    xyz = (
        (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047,
        0.2126729 * r + 0.7151522 * g + 0.0721750 * b,
        (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883,
    )
    fx, fy, fz = (v ** (1 / 3) if v > 216 / 24389 else (24389 / 27 * v + 16) / 116 for v in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def delta_e_2000(one: Lab, other: Lab) -> float:
    """CIEDE2000 (Sharma, Wu & Dalal 2005)."""
    (l1, a1, b1), (l2, a2, b2) = one, other
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360
    h2p = math.degrees(math.atan2(b2, a2p)) % 360
    dlp, dcp = l2 - l1, c2p - c1p
    dh = 0.0 if c1p * c2p == 0 else h2p - h1p
    dh = dh - 360 if dh > 180 else dh + 360 if dh < -180 else dh
    dhp = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh) / 2)
    lp_mean, cp_mean = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        hp_mean = h1p + h2p
    elif abs(h1p - h2p) > 180:
        hp_mean = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    else:
        hp_mean = (h1p + h2p) / 2
    t = (1 - 0.17 * math.cos(math.radians(hp_mean - 30))
         + 0.24 * math.cos(math.radians(2 * hp_mean))
         + 0.32 * math.cos(math.radians(3 * hp_mean + 6))
         - 0.20 * math.cos(math.radians(4 * hp_mean - 63)))  # fmt: skip
    rotation = 30 * math.exp(-(((hp_mean - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cp_mean**7 / (cp_mean**7 + 25**7))
    sl = 1 + 0.015 * (lp_mean - 50) ** 2 / math.sqrt(20 + (lp_mean - 50) ** 2)
    sc, sh = 1 + 0.045 * cp_mean, 1 + 0.015 * cp_mean * t
    rt = -math.sin(math.radians(2 * rotation)) * rc
    return math.sqrt((dlp / sl) ** 2 + (dcp / sc) ** 2 + (dhp / sh) ** 2
                     + rt * (dcp / sc) * (dhp / sh))  # fmt: skip


def test_the_delta_e_formula_matches_published_pairs() -> None:
    # Sharma, Wu & Dalal's test data, pairs 1, 7 and 17.
    assert delta_e_2000((50, 2.6772, -79.7751), (50, 0, -82.7485)) == pytest.approx(
        2.0425, abs=1e-4
    )
    assert delta_e_2000((50, 0, 0), (50, -1, 2)) == pytest.approx(2.3669, abs=1e-4)
    assert delta_e_2000((50, 2.5, 0), (73, 25, -18)) == pytest.approx(27.1492, abs=1e-4)


def test_every_status_and_error_code_of_the_contract_has_a_fixed_colour() -> None:
    names = contract_names()
    assert {"succeeded", "circuit_open", "retry_budget", "http_503", "http_409",
            "jsonrpc_parse_error", "mcp_tool_error", "unknown_outcome"} <= names  # fmt: skip
    assert names - set(STATUS_COLOURS) == set()


@pytest.mark.parametrize("vision", VISIONS)
def test_fixed_colours_are_far_apart_in_every_vision(vision: str) -> None:
    labs = {name: lab(colour, VISIONS[vision]) for name, colour in STATUS_COLOURS.items()}
    closest = min(
        (delta_e_2000(labs[a], labs[b]), a, b) for a, b in itertools.combinations(labs, 2)
    )
    assert closest[0] >= MIN_DELTA_E, closest


@pytest.mark.parametrize("vision", VISIONS)
def test_fallback_colours_never_look_like_a_fixed_one(vision: str) -> None:
    matrix = VISIONS[vision]
    assert not set(FALLBACK_PALETTE) & set(STATUS_COLOURS.values())
    closest = min(
        (delta_e_2000(lab(f, matrix), lab(c, matrix)), f, c)
        for f in FALLBACK_PALETTE
        for c in STATUS_COLOURS.values()
    )
    assert closest[0] >= MIN_FALLBACK_DELTA_E, closest


def test_aliases_name_the_same_thing() -> None:
    assert all(colour_for(alias) == colour_for(name) for alias, name in ALIASES.items())
    assert set(ALIASES.values()) <= set(STATUS_COLOURS)


@given(st.text(min_size=1, max_size=40))
def test_any_other_name_gets_a_stable_colour_outside_the_map(name: str) -> None:
    colour = colour_for(name)
    if ALIASES.get(name, name) in STATUS_COLOURS:
        assert colour == STATUS_COLOURS[ALIASES.get(name, name)]
    else:
        # The same on every page and dataset (no per-process hash salt), never a fixed one.
        assert colour in FALLBACK_PALETTE and colour == colour_for(str(name))


# -- the analyzer's requested calls --------------------------------------------------


def test_requested_calls_have_a_fixed_colour_of_their_own() -> None:
    # Not a contract status (the analyzer's, docs/analyzer.md): without its own entry it
    # took a hashed fallback colour, one that other unknown codes share.
    assert "requested" in STATUS_COLOURS
    assert colour_for("requested") == STATUS_COLOURS["requested"] not in FALLBACK_PALETTE


def _timeline_spec() -> dict[str, Any]:
    """The retry timeline of one requested call and one refused one (no attempt ran)."""
    attempts = pd.DataFrame(
        columns=[
            "label",
            "attempt",
            "outcome",
            "start_ms",
            "end_ms",
            "wait_end_ms",
            "duration_ms",
            "delay_s",
        ]
    )
    calls = pd.DataFrame(
        {
            "label": ["1. get_order · call_1 → requested", "2. charge · s2 → circuit_open"],
            "status": ["requested", "circuit_open"],
            "attempts": [0, 0],
        }
    )
    spec: dict[str, Any] = timeline(attempts, calls).to_dict()
    return spec


def test_the_timeline_shows_a_requested_call_in_its_colour_shape_and_words() -> None:
    spec = _timeline_spec()
    layers = {layer["mark"]["type"]: layer for layer in spec["layer"]}
    point = layers["point"]["encoding"]
    scale = point["color"]["scale"]
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    assert colours == {"circuit_open": STATUS_COLOURS["circuit_open"], "requested": "#00001E"}
    # The legend names it for what it is; the marker is a circle, not a refusal's diamond.
    assert "requested (by the model, not run)" in point["color"]["legend"]["labelExpr"]
    shapes = dict(
        zip(point["shape"]["scale"]["domain"], point["shape"]["scale"]["range"], strict=True)
    )
    assert shapes == {"no attempt": "diamond", "requested": "circle"}
    rows = spec["datasets"][layers["point"]["data"]["name"]]
    assert {(r["outcome"], r["marker"], r["note"]) for r in rows} == {
        ("requested", "requested", "requested by the model; no tool span ran it"),
        ("circuit_open", "no attempt", "no attempt: circuit_open"),
    }
