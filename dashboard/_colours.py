"""One colour per final status, attempt outcome and error code, on every page and dataset.

The fixed map covers every status and error code of docs/trace-contract.md
(and the common 4xx codes), and the analyzer's ``requested`` (a call the model
asked for that no tool span shows running). The first eight are Okabe-Ito's palette, given to
the values seen most; the rest were picked greedily from an sRGB grid to be as
far as possible (CIEDE2000) from every colour already chosen, in normal vision
and under simulated deuteranopia and protanopia (Machado et al. 2009), so that
no two are closer than ΔE 7 in any of the three (tests/dashboard/test_colours.py
checks it). A value outside the map (a new ``http_<status>``, an application's
own code) gets a colour from a separate fallback palette, chosen by a hash of
its name: the same on every page and dataset, and never one of the map's.
"""

from __future__ import annotations

import hashlib

__all__ = ["ALIASES", "FALLBACK_PALETTE", "STATUS_COLOURS", "colour_for"]

STATUS_COLOURS: dict[str, str] = {
    # Okabe-Ito, for what a retry dashboard shows most.
    "succeeded": "#009E73",
    "http_503": "#D55E00",
    "timeout": "#E69F00",
    "http_429": "#F0E442",
    "attempt_limit": "#0072B2",
    "wait_budget": "#56B4E9",
    "permanent_error": "#CC79A7",
    "unsafe_retry": "#000000",
    # The rest of the contract's statuses and error codes.
    "http_500": "#960000",
    "(none)": "#4B5A5A",
    "deadline_exceeded": "#0F2D69",
    "retry_budget": "#69E1B4",
    "circuit_open": "#0000D2",
    "loop_blocked": "#5A694B",
    "http_502": "#5A2D2D",
    "idempotency_conflict": "#A5D2E1",
    "connection_error": "#3C87FF",
    "unknown_outcome": "#3C2D3C",
    "http_504": "#FF5A78",
    "read_back_required": "#694B78",
    "http_408": "#B43C00",
    "in_progress": "#A5D278",
    "invalid_arguments": "#876987",
    "http_409": "#5A1EFF",
    "store_unavailable": "#3C963C",
    "http_400": "#C39696",
    "turn_budget": "#1E4BA5",
    "invalid_response": "#87C3B4",
    "http_404": "#69000F",
    "unknown_tool": "#96D2FF",
    "http_422": "#B42D3C",
    "mcp_tool_error": "#5AB4C3",
    "http_401": "#FF5A4B",
    "http_403": "#5A5AFF",
    "jsonrpc_internal_error": "#0F4B5A",
    "mcp_input_required": "#D2B496",
    "jsonrpc_invalid_params": "#967887",
    "jsonrpc_method_not_found": "#2D87C3",
    "jsonrpc_invalid_request": "#876969",
    "jsonrpc_parse_error": "#2D0F96",
    "mcp_invalid_result": "#00005A",
    "quarantined": "#B4F0E1",
    "mcp_input_refused": "#A5FFB4",
    # The analyzer's status of a call the model only requested (no tool span
    # ran it): not a failure, not a success. Picked last by the same rule,
    # also ΔE >= 5 from the fallback palette; the farthest colour of the grid.
    "requested": "#00001E",
}

# Names for the same thing: an attempt's "ok" is a call's "succeeded"; the
# pages' placeholder for a missing outcome is the one for a missing status.
ALIASES = {"ok": "succeeded", "(unknown)": "(none)"}

# Picked after the map, by the same rule: ΔE ≥ 5.9 from every colour above.
FALLBACK_PALETTE: tuple[str, ...] = (
    "#2D5A2D",
    "#F087C3",
    "#B47869",
    "#00A5FF",
    "#3C9696",
    "#964B96",
    "#FFB44B",
    "#7878A5",
    "#00B496",
    "#964B69",
    "#783C4B",
    "#780F4B",
)


def colour_for(name: str) -> str:
    """The colour of a status, outcome or error code: fixed, or by a hash of its name."""
    fixed = STATUS_COLOURS.get(ALIASES.get(name, name))
    if fixed is not None:
        return fixed
    # A stable hash (not hash(), which is salted per process).
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return FALLBACK_PALETTE[int.from_bytes(digest[:4], "big") % len(FALLBACK_PALETTE)]
