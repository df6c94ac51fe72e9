"""Redaction rules, and the leak test: no planted secret in any exported byte."""

from __future__ import annotations

import io
import logging

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from toolspan.tracer import REDACTED, Redactor, Tool, ToolCall, ToolError

from .conftest import Scripted

# Every shape the contract promises to catch, as values that would leak.
SECRET_VALUES = {
    "bearer": "Bearer abcDEF123456ghiJKL789",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlMTIzNDU",
    "openai": "sk-proj-4f9A8b7C6d5E4f3G2h1I",
    "anthropic": "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack": "xoxb-123456789012-abcdefghij",
    "card": "4111 1111 1111 1111",
    "card_plain": "card 5500005555555559",
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD\n-----END RSA PRIVATE KEY-----"
    ),
}
# Secrets that are only recognisable by the key they sit under.
SECRET_KEYS = {
    "password": "hunter2-plain",
    "passwd": "pw-plain-77",
    "client_secret": "cs-plain-88",
    "refreshToken": "rt-plain-99",
    "Authorization": "Basic dXNlcjpwYXNz",
    "X-Api-Key": "plainkey123",
    "private_key": "pk-plain-11",
    "session_token": "sess-plain-22",
    "cookie": "c=plain-33",
    "csrf_token": "csrf-plain-44",
    "XSRF": "xsrf-plain-55",
    "jwt": "jwt-plain-66",
    "ssn": "ssn-123-45-6789",
    "credit_card": "cc-plain-77",
    "card-number": "cn-plain-88",
    "CVV": "cvv-plain-737",
    "credentials": {"user": "u", "pass": "cred-plain-99"},
    "db_password": "dbpw-plain-00",
}


def all_secrets() -> list[str]:
    plain = [v for v in SECRET_KEYS.values() if isinstance(v, str)]
    plain.append("cred-plain-99")
    fragments = [
        v.split()[-1] if " " in v and not v.startswith("4111") else v
        for v in SECRET_VALUES.values()
    ]
    return plain + fragments + ["MIIBOgIBAAJBAKj34GkxFhD", "4111111111111111"]


@pytest.mark.parametrize("key", list(SECRET_KEYS))
def test_secret_keys_are_redacted_whatever_their_case_and_separators(key):
    redacted = Redactor().value({key: SECRET_KEYS[key], "city": "Oslo"})
    assert redacted[key] == REDACTED and redacted["city"] == "Oslo"


@pytest.mark.parametrize("name", list(SECRET_VALUES))
def test_secret_values_are_redacted_anywhere_in_text(name):
    text = f"upstream said: {SECRET_VALUES[name]} (retry later)"
    redacted = Redactor().text(text)
    assert REDACTED in redacted and "upstream said" in redacted
    for fragment in all_secrets():
        if fragment in SECRET_VALUES[name]:
            assert fragment not in redacted


def test_nested_objects_and_lists():
    value = {"items": [{"note": "call me", "token": "t-1"}, ["Bearer abcdefgh12345678"]], "n": 4}
    assert Redactor().value(value) == {
        "items": [{"note": "call me", "token": REDACTED}, [REDACTED]],
        "n": 4,
    }


def test_non_luhn_numbers_and_ordinary_fields_survive():
    redactor = Redactor()
    assert redactor.text("order 1234567890123 shipped") == "order 1234567890123 shipped"
    # Luhn-valid, but an order number: only a card-ish key or grouping makes a card.
    assert redactor.text("order 4111111111111111 shipped") == "order 4111111111111111 shipped"
    assert redactor.value({"order_id": 4111111111111111}) == {"order_id": 4111111111111111}
    assert redactor.value({"max_tokens": 200, "author": "Ada"}) == {
        "max_tokens": 200,
        "author": "Ada",
    }
    assert redactor.value({"card": 4111111111111111}) == {"card": REDACTED}


def test_allow_and_deny_lists():
    redactor = Redactor(
        deny_keys=["email"], allow_keys=["session_name"], extra_patterns=[r"ACME-\d{6}"]
    )
    out = redactor.value({"email": "a@b.c", "session_name": "standup", "ref": "ACME-123456"})
    assert out == {"email": REDACTED, "session_name": "standup", "ref": REDACTED}


def test_key_value_pairs_in_free_text():
    assert "s3cr3t" not in Redactor().text("login failed: password=s3cr3t user=bob")


def test_ids_are_never_scrubbed(make_executor, spans):
    odd_ids = ToolCall("token_lookup", "call_token_1", {"q": 1}, conversation_id="session-secret-1")
    make_executor([Tool("token_lookup", Scripted({"ok": 1}))]).execute(odd_ids)
    attrs = spans.attrs(spans.call())
    assert attrs["gen_ai.conversation.id"] == "session-secret-1"
    assert attrs["gen_ai.tool.call.id"] == "call_token_1"
    assert attrs["gen_ai.tool.name"] == "token_lookup"


def test_leak_no_planted_secret_in_any_exported_byte(make_executor, spans, caplog):
    arguments = {
        **SECRET_KEYS,
        "note": " / ".join(SECRET_VALUES.values()),
        "nested": [dict(SECRET_VALUES)],
    }
    error_text = "upstream rejected " + " ".join(SECRET_VALUES.values()) + " password=hunter2-plain"
    received: list[dict] = []

    def tool_fn(**kwargs):
        received.append(kwargs)
        if len(received) == 1:
            raise ToolError.from_status(503, error_text)
        if len(received) == 2:
            raise ValueError(error_text)  # a programming error, recorded then raised
        return {"ok": True}

    executor = make_executor(
        [
            Tool("leaky", tool_fn),
            Tool(
                "strict",
                Scripted({"ok": 1}),
                parameters={"type": "object", "properties": {"password": {"type": "integer"}}},
            ),
        ]
    )
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ValueError):
        executor.execute(ToolCall("leaky", "c1", arguments, conversation_id="conv"))
    results = [
        executor.execute(ToolCall("leaky", "c2", arguments, conversation_id="conv")),
        executor.execute(
            ToolCall("strict", "c3", {"password": "hunter2-plain"}, conversation_id="conv")
        ),
        executor.execute(
            ToolCall("leaky", "c4", '{"password": "hunter2-plain", ', conversation_id="conv")
        ),
    ]
    assert received[0] == arguments  # the tool always gets the original arguments

    finished = spans.all()
    stream = io.StringIO()
    FileSpanExporter(stream=stream).export(finished)
    exported = [stream.getvalue().encode(), encode_spans(finished).SerializeToString()]
    exported += [r.to_json().encode() for r in results]
    exported.append(caplog.text.encode())
    for blob in exported:
        for secret in all_secrets():
            where = blob.find(secret.encode())
            assert where < 0, f"{secret!r} leaked: {blob[max(0, where - 300) : where + 40]!r}"
    assert b"[REDACTED]" in exported[0]
