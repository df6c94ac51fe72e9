"""The proxy's stdio lines: what it reads keeps its bytes, and reads as the SDK reads it."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import jsonrpc_message_adapter

from toolspan.tracer.integrations.mcp_proxy._stdio import parse_line, wire_of

_int64 = st.integers(-(2**63), 2**63 - 1)  # the SDK's ids and codes; orjson's integers
_json = st.recursive(
    st.none() | st.booleans() | _int64 | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_ids = _int64 | st.text(min_size=1)
_params = st.dictionaries(st.text(), _json, max_size=3)
_messages = st.one_of(
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": _ids, "method": st.text()}),
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "method": st.text()}, optional={"params": _params}
    ),
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": _ids, "result": _params}),
    st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": _ids,
            "error": st.fixed_dictionaries({"code": _int64, "message": st.text()}),
        }
    ),
)
# What a sender may do that a serialiser of the SDK's models would not.
_styles = st.fixed_dictionaries(
    {
        "ensure_ascii": st.booleans(),
        "sort_keys": st.booleans(),
        "separators": st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]),
    }
)


@given(message=_messages, style=_styles, extra=st.dictionaries(st.just("x-vendor"), _json))
def test_a_line_read_keeps_its_bytes_and_reads_as_the_sdk_reads_it(message, style, extra):
    line = json.dumps({**message, **extra}, **style).encode()
    parsed = parse_line(line + b"\n")
    expected = jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert parsed.model_dump(by_alias=True) == expected.model_dump(by_alias=True)
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:  # NaN, Infinity, integers beyond 64 bits: serialised anew
        assert wire_of(parsed) is None
    else:
        assert wire_of(parsed) == line  # relayed as these bytes, whatever their style


def test_a_changed_message_has_no_line_and_a_bad_one_is_refused():
    parsed = parse_line(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\n')
    assert wire_of(parsed.model_copy(update={"id": "http-1"})) is None  # serialised anew
    for bad in (b"[1, 2]", b"not json", b'{"jsonrpc": "1.0", "id": 1, "method": "x"}'):
        with pytest.raises(ValueError):
            parse_line(bad)
