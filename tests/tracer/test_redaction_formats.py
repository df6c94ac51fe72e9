"""Every secret format the redactor promises to catch, and every look-alike it must keep.

Each row of LEAKS is planted everywhere a secret can enter (an argument value,
JSON text inside an argument, a tool's error message, an idempotency store's
error) and every byte the process writes is scanned: the spans as the OTLP/JSON
file exporter writes them, the OTLP protobuf payload, the results handed back
to the model, and the log records. Each row of BENIGN must come out unchanged.
"""

from __future__ import annotations

import io
import json
import logging
import random
from typing import Any

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from toolspan.tracer import (
    REDACTED,
    CircuitBreaker,
    Executor,
    Redactor,
    RetryBudget,
    Safeguards,
    Tool,
    ToolCall,
    ToolError,
)
from toolspan.tracer.store import MemoryStore, StoreError, _fleet
from toolspan.tracer.testing import FakeClock

# name -> (text that carries the secret, the part that must never be written)
LEAKS: dict[str, tuple[str, str]] = {
    "access_token=": ("GET /cb?access_token=at9Q2mX7pLw4 failed", "at9Q2mX7pLw4"),
    "refresh_token=": ("refresh_token=rt8Zk3VbN1qs&grant=x", "rt8Zk3VbN1qs"),
    "client_secret:": ("client_secret: cs7YhG2fD9kq", "cs7YhG2fD9kq"),
    "json in a string": ('{"password": "pw6Tn4Bv8Mzx", "user": "bob"}', "pw6Tn4Bv8Mzx"),
    "escaped json": ('body={\\"api_key\\": \\"ak5Rf3Ws1Lop\\"}', "ak5Rf3Ws1Lop"),
    "user:pass@host": ("connect bob:up4Jk8Hs2Qwe@db.internal:5432", "up4Jk8Hs2Qwe"),
    "dsn url": ("postgresql://app:dsn3Lk9Pq7Rt@db:5432/prod", "dsn3Lk9Pq7Rt"),
    "redis url": ("redis://:rd2Mn8Xc4Vbz@cache:6379/0", "rd2Mn8Xc4Vbz"),
    "odbc dsn": ("Server=db;User Id=sa;Password=od1Qa5Zx9Wsx;", "od1Qa5Zx9Wsx"),
    "authorization basic": ("Authorization: Basic Ym9iOmJiN1RnNVl1M0lr", "Ym9iOmJiN1RnNVl1M0lr"),
    "bare basic": ("sent Basic Ym9iOmJiN1RnNVl1M0lr upstream", "Ym9iOmJiN1RnNVl1M0lr"),
    "x-amz-signature": (
        "https://b.s3.amazonaws.com/o?X-Amz-Date=20260101&X-Amz-Signature=9f8e7d6c5b4a39281706",
        "9f8e7d6c5b4a39281706",
    ),
    "github_pat_": (
        "github_pat_11AAAAAAA0abcdefghij_KLMNOPQRSTUVWXYZabcdefghij0123456789",
        "KLMNOPQRSTUVWXYZabcdefghij0123456789",
    ),
    "glpat-": ("token glpat-Xy9Zw8Vu7Ts6Rq5Po4Nm here", "Xy9Zw8Vu7Ts6Rq5Po4Nm"),
    "hf_": ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
    "npm_": ("npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    "sendgrid": (
        "SG.Ab1Cd2Ef3Gh4Ij5Kl6.Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7Ij8Kl9Mn0",
        "Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7Ij8Kl9Mn0",
    ),
    "pwd=": ("login pwd=pd4Gh7Jk1Lzx rejected", "pd4Gh7Jk1Lzx"),
    "pass:": ("pass: ps3Df6Gh9Jkl", "ps3Df6Gh9Jkl"),
    "access_key=": ("access_key=ak2Zx5Cv8Bnm", "ak2Zx5Cv8Bnm"),
    "grouped card": ("paid with 4111 1111 1111 1111 today", "4111 1111 1111 1111"),
    "card in context": ("card number 5500005555555559 declined", "5500005555555559"),
}

# Secrets recognisable only by the key they sit under (or beside, as name/value).
KEYED_LEAKS: dict[str, tuple[Any, str]] = {
    "pwd": ({"pwd": "kp1Xc4Vb7Nmq"}, "kp1Xc4Vb7Nmq"),
    "pass": ({"pass": "kp2Zs5Dx8Cfv"}, "kp2Zs5Dx8Cfv"),
    "access_key": ({"access_key": "kp3Ws6Ed9Rfv"}, "kp3Ws6Ed9Rfv"),
    "accessToken": ({"accessToken": "kp4Qa7Zw1Sxe"}, "kp4Qa7Zw1Sxe"),
    "X-Amz-Signature": ({"X-Amz-Signature": "kp5Ed8Rf2Tgb"}, "kp5Ed8Rf2Tgb"),
    "name/value env": (
        [{"name": "DB_PASSWORD", "value": "kp6Yh9Uj3Ikm"}, {"name": "HOME", "value": "/h"}],
        "kp6Yh9Uj3Ikm",
    ),
    "key/value header": ([{"key": "Authorization", "value": "kp7Ol0Pk4Ijn"}], "kp7Ol0Pk4Ijn"),
    "card key": ({"card": 4111111111111111}, "4111111111111111"),
}

# Fields that only look like secrets: kept exactly as they are.
BENIGN: dict[str, Any] = {
    "session_id": "sess-7f3a9c",
    "prompt_tokens": 1234,
    "completion_tokens": 321,
    "max_output_tokens": 4096,
    "token_budget": 20000,
    "tokenizer": "cl100k_base",
    "auth_method": "oauth2",
    "is_authenticated": True,
    "cookie_consent": "accepted",
    "order_id": 4111111111111111,  # Luhn-valid, but not under a card-ish key
    "created_ms": 1767225600000,
    "passenger_count": 2,
    "classname": "Basic",
}
BENIGN_TEXT = (
    "prompt_tokens: 1234, completion_tokens=321, token_budget: 20000, session_id=sess-7f3a9c, "
    "auth_method: oauth2, order 4111111111111111 at 1767225600000, basic authentication"
)


class FailingStore(MemoryStore):
    """A store whose every call fails with a message that carries secrets."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreError(self.message)

    def record_answer(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreError(self.message)


class BrokenFleet:
    """Budget and breaker state whose every step fails as a Redis error might,
    quoting secrets (installed as the fleet state of a store)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise StoreError(self.message)

        return fail


def written_bytes(spans: Any, results: list[Any], caplog: pytest.LogCaptureFixture) -> list[bytes]:
    finished = spans.all()
    stream = io.StringIO()
    FileSpanExporter(stream=stream).export(finished)
    blobs = [stream.getvalue().encode(), encode_spans(finished).SerializeToString()]
    blobs += [result.to_json().encode() for result in results]
    blobs.append("\n".join(r.getMessage() for r in caplog.records).encode())
    blobs.append(caplog.text.encode())
    return blobs


def assert_absent(secret: str, blobs: list[bytes]) -> None:
    for blob in blobs:
        where = blob.find(secret.encode())
        assert where < 0, f"{secret!r} leaked: {blob[max(0, where - 200) : where + 40]!r}"


def executor(spans: Any, tools: list[Tool], **options: Any) -> Executor:
    clock = FakeClock()
    return Executor(
        tools,
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        **options,
    )


@pytest.mark.parametrize("name", list(LEAKS))
def test_every_format_is_caught_in_every_written_byte(name, spans, caplog):
    text, secret = LEAKS[name]
    caplog.set_level(logging.DEBUG)

    def fail(**_: Any) -> Any:
        raise ToolError.from_status(400, f"upstream said {text}")

    run = executor(spans, [Tool("echo", lambda **kw: {"ok": 1}), Tool("fail", fail)])
    results = [
        run.execute(ToolCall("echo", "c1", {"note": text}, conversation_id="conv")),
        run.execute(
            ToolCall("echo", "c2", {"body": json.dumps({"note": text})}, conversation_id="conv")
        ),
        run.execute(ToolCall("fail", "c3", {"q": 1}, conversation_id="conv")),
    ]
    for store in (FailingStore(f"redis said {text}"),):
        guarded = executor(
            spans, [Tool("echo", lambda **kw: {"ok": 1})], safeguards=Safeguards(store=store)
        )
        results.append(guarded.execute(ToolCall("echo", "c4", {"q": 1}, conversation_id="conv")))
        write = executor(
            spans,
            [
                Tool(
                    "charge",
                    lambda **kw: {"ok": 1},
                    side_effect="write",
                    idempotent=True,
                    key_passed="scripted",
                )
            ],
            safeguards=Safeguards(store=store),
        )
        results.append(
            write.execute(
                ToolCall("charge", "c5", {"q": 1}, conversation_id="conv", idempotency_key="k1")
            )
        )
    assert results[-1].status == "store_unavailable"
    assert any("store" in r.getMessage() for r in caplog.records)  # the logs were written
    assert_absent(secret, written_bytes(spans, results, caplog))


@pytest.mark.parametrize("name", list(KEYED_LEAKS))
def test_every_secret_key_is_caught_in_every_written_byte(name, spans, caplog):
    value, secret = KEYED_LEAKS[name]
    run = executor(spans, [Tool("echo", lambda **kw: {"ok": 1})])
    results = [
        run.execute(ToolCall("echo", "c1", {"payload": value}, conversation_id="conv")),
        run.execute(ToolCall("echo", "c2", json.dumps({"payload": value}), conversation_id="conv")),
    ]
    assert_absent(secret, written_bytes(spans, results, caplog))


def test_benign_fields_are_kept(spans):
    run = executor(spans, [Tool("echo", lambda **kw: {"ok": 1})])
    assert run.execute(ToolCall("echo", "c1", dict(BENIGN), conversation_id="conv")).ok
    (call,) = spans.calls()
    recorded = json.loads(str(spans.attrs(call)["gen_ai.tool.call.arguments"]))
    assert recorded == BENIGN
    assert Redactor().text(BENIGN_TEXT) == BENIGN_TEXT


@pytest.mark.parametrize("name", list(BENIGN))
def test_each_benign_key_is_not_secret(name):
    assert not Redactor().is_secret_key(name)


def test_random_long_integers_are_almost_never_scrubbed():
    # One 13-19 digit integer in ten passes the Luhn check by chance: order ids
    # and millisecond timestamps must not be masked for it.
    rng = random.Random(10)
    numbers = [rng.randrange(10 ** (n - 1), 10**n) for n in rng.choices(range(13, 20), k=20_000)]
    redactor = Redactor()
    as_values = redactor.value({"ids": numbers, "first": numbers[0]})
    kept_values = sum(a == b for a, b in zip(as_values["ids"], numbers, strict=True))
    kept_text = sum(str(n) in redactor.text(f"order {n} shipped") for n in numbers)
    assert kept_values >= len(numbers) * 0.999
    assert kept_text >= len(numbers) * 0.999
    # Under a card-ish key the same numbers are cards: about one in ten is masked.
    as_cards = sum(redactor.value({"card": n})["card"] == REDACTED for n in numbers)
    assert len(numbers) * 0.05 < as_cards < len(numbers) * 0.15


@pytest.mark.parametrize("name", list(LEAKS))
def test_budget_and_breaker_store_errors_are_redacted_in_the_log(name, spans, caplog):
    text, secret = LEAKS[name]
    caplog.set_level(logging.DEBUG)
    store = MemoryStore()
    with _fleet._STATES_LOCK:
        _fleet._STATES[store] = BrokenFleet(f"redis said {text}")  # type: ignore[assignment]
    run = executor(
        spans,
        [Tool("echo", lambda **kw: {"ok": 1})],
        retry_budget=RetryBudget(store=store),
        circuit_breaker=CircuitBreaker(store=store),
    )
    results = [run.execute(ToolCall("echo", "c1", {"q": 1}, conversation_id="conv"))]
    assert results[0].ok
    assert any("store failed" in r.getMessage() for r in caplog.records)
    assert_absent(secret, written_bytes(spans, results, caplog))
