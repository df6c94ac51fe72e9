"""The kit's faults through real httpx/httpx2 clients and the plain-callable wrapper."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolspan.testing import EffectLedger, Fault, FaultKit
from toolspan.tracer import Executor, Tool, ToolCall, ToolError, parse_retry_after


def _service(kit: FaultKit, http=httpx, honours_keys: bool = True):
    def handle(request):
        if request.method == "POST":
            key = request.headers.get("Idempotency-Key") if honours_keys else None
            kit.ledger.commit("charge", json.loads(request.content)["order"], key=key)
            return http.Response(201, json={"charged": True})
        return http.Response(200, json={"count": kit.ledger.count("charge")})

    return handle


def _client(kit: FaultKit, http=httpx, **service):
    transport = (kit.httpx_transport if http is httpx else kit.httpx2_transport)(
        _service(kit, http, **service)
    )
    return http.Client(base_url="https://svc.example", transport=transport)


@pytest.mark.parametrize("http", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_timeout_after_commit_raises_the_librarys_timeout_and_the_effect_is_counted(http):
    kit = FaultKit([Fault.timeout_after_commit()])
    client = _client(kit, http)
    with pytest.raises(http.ReadTimeout):
        client.post("/charges", json={"order": "o-1"})
    assert kit.ledger.count("charge", "o-1") == 1  # committed, though the client never heard
    assert client.post("/charges", json={"order": "o-1"}).status_code == 201
    assert kit.ledger.max_per_resource() == 2
    assert kit.log == [("POST /charges", "timeout after commit"), ("POST /charges", "ok")]


@pytest.mark.parametrize(
    ("fault", "error", "effects"),
    [
        (Fault.response_lost(), "RemoteProtocolError", 1),
        (Fault.connection_reset(), "ReadError", 0),
    ],
)
@pytest.mark.parametrize("http", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_lost_response_commits_and_a_reset_does_not(http, fault, error, effects):
    kit = FaultKit([fault])
    with pytest.raises(getattr(http, error)):
        _client(kit, http).post("/charges", json={"order": "o-1"})
    assert kit.ledger.count() == effects


@pytest.mark.parametrize("status", [408, 429, 503])
def test_a_status_with_retry_after_in_seconds_commits_nothing(status):
    kit = FaultKit([Fault.http_status(status, retry_after_s=7)])
    response = _client(kit).post("/charges", json={"order": "o-1"})
    assert response.status_code == status
    assert response.headers["Retry-After"] == "7"
    assert kit.ledger.count() == 0


def test_a_retry_after_http_date_is_read_as_at_least_the_seconds_it_stands_for():
    wall = 1_800_000_000.4
    kit = FaultKit([Fault.http_status(503, retry_after_s=3, http_date=True)], wall=lambda: wall)
    response = _client(kit, httpx2).get("/charges")
    value = response.headers["Retry-After"]
    assert value.endswith(" GMT") and not value.isdigit()
    # Rounded up to the whole second an HTTP-date can say: never less than asked.
    assert parse_retry_after(value, now=wall) == pytest.approx(3.6)


def test_a_slow_answer_moves_the_injected_clock_and_nothing_sleeps():
    kit = FaultKit([Fault.slow(30)])
    started = time.monotonic()
    assert _client(kit).post("/charges", json={"order": "o-1"}).status_code == 201
    assert kit.clock() == 30 and time.monotonic() - started < 5
    assert kit.ledger.count() == 1


def test_a_late_commit_is_absent_until_the_clock_reaches_it():
    kit = FaultKit([Fault.late_commit(0.5)])
    client = _client(kit)
    with pytest.raises(httpx.ReadTimeout):
        client.post("/charges", json={"order": "o-1"})
    assert client.get("/charges").json() == {"count": 0}  # a read-back now finds nothing
    assert kit.ledger.pending == 1
    kit.clock.advance(0.5)
    assert client.get("/charges").json() == {"count": 1}  # landed before this request
    assert kit.ledger.pending == 0


def test_settle_lands_every_late_commit():
    kit = FaultKit([Fault.late_commit(2), Fault.late_commit(9)])
    client = _client(kit, honours_keys=False)
    for _ in range(2):
        with pytest.raises(httpx.ReadTimeout):
            client.post("/charges", json={"order": "o-1"})
    assert kit.settle() == 2 and kit.clock() == 9
    assert kit.ledger.max_per_resource() == 2


def test_the_transport_serves_an_async_client_too():
    kit = FaultKit([Fault.timeout_after_commit()])

    async def go():
        transport = kit.httpx_transport(_service(kit))
        async with httpx.AsyncClient(base_url="https://svc.example", transport=transport) as c:
            with pytest.raises(httpx.ReadTimeout):
                await c.post("/charges", json={"order": "o-1"})
            return (await c.post("/charges", json={"order": "o-1"})).status_code

    assert asyncio.run(go()) == 201
    assert kit.ledger.count() == 2


def test_applies_to_spares_the_requests_it_does_not_pick():
    kit = FaultKit([Fault.timeout_after_commit()], applies_to=lambda r: r.method == "POST")
    client = _client(kit)
    assert client.get("/charges").status_code == 200  # not counted by the plan
    with pytest.raises(httpx.ReadTimeout):
        client.post("/charges", json={"order": "o-1"})


def test_the_ledger_replays_a_seen_key_without_a_new_effect():
    ledger = EffectLedger()
    assert ledger.commit("refund", "R-1", key="k")
    assert not ledger.commit("refund", "R-1", key="k")
    assert ledger.commit("refund", "R-2")
    assert (ledger.count("refund"), ledger.replays, ledger.max_per_resource()) == (2, 1, 1)


def test_bad_faults_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="4xx/5xx"):
        Fault.http_status(200)
    with pytest.raises(ValueError, match="finite"):
        Fault.slow(-1)
    with pytest.raises(ValueError, match="Retry-After"):
        Fault.http_status(429, retry_after_s=float("nan"))


def test_the_callable_wrapper_keeps_the_signature_and_raises_classified_failures():
    kit = FaultKit(
        [Fault.timeout_after_commit(), Fault.http_status(429, retry_after_s=2), Fault.ok()]
    )

    def hold(dock_id: str, idempotency_key: str | None = None) -> dict:
        kit.ledger.commit("hold", dock_id, key=idempotency_key)
        return {"held": dock_id}

    tool = Tool("hold", kit.wrap(hold), side_effect="write", idempotent=True)
    assert tool.key_route == "idempotency_key parameter"  # the wrapper kept the parameter
    executor = Executor([tool], **kit.executor_options())
    result = executor.execute(
        ToolCall("hold", "c1", {"dock_id": "D1"}, "conv", idempotency_key="k1")
    )
    assert (result.status, result.attempts) == ("succeeded", 3)
    assert kit.clock.slept[1] >= 2  # the 429's Retry-After
    assert kit.ledger.max_per_resource() == 1 and kit.ledger.replays == 1
    with pytest.raises(ToolError):
        FaultKit([Fault.http_status(503)]).wrap(lambda: None)()


_FAULTS = st.sampled_from(
    [
        Fault.ok(),
        Fault.slow(1),
        Fault.http_status(503, retry_after_s=1),
        Fault.connection_reset(),
        Fault.timeout_after_commit(),
        Fault.response_lost(),
        Fault.late_commit(0.5),
    ]
)


@settings(max_examples=60, deadline=None)
@given(plan=st.lists(_FAULTS, max_size=8), honours_keys=st.booleans())
def test_effects_are_exactly_the_committing_faults_or_one_under_a_key(plan, honours_keys):
    kit = FaultKit(plan)
    client = _client(kit, honours_keys=honours_keys)
    for _ in plan:
        try:
            client.post("/charges", json={"order": "o-1"}, headers={"Idempotency-Key": "k"})
        except httpx.TransportError:
            pass
    kit.settle()
    committing = sum(fault.commits for fault in plan)
    assert kit.ledger.count() == (min(committing, 1) if honours_keys else committing)
    assert len(kit.log) == len(plan) and kit.ledger.pending == 0


@pytest.mark.parametrize(
    ("error", "code"), [(httpx2.ReadTimeout, "timeout"), (httpx2.ReadError, "connection_error")]
)
def test_the_executor_classifies_httpx2_failures_as_it_does_httpx_ones(error, code):
    # Before: an httpx2 timeout escaped the executor as a programming error.
    kit = FaultKit(
        [Fault.timeout_after_commit() if code == "timeout" else Fault.connection_reset()]
    )
    client = _client(kit, httpx2)

    def get_count() -> dict:
        return client.get("/charges").json()

    executor = Executor([Tool("get_count", get_count)], **kit.executor_options())
    result = executor.execute(ToolCall("get_count", "c1", {}, "conv"))
    if code == "timeout":  # retried (a read), and the retry answered
        assert (result.status, result.attempts) == ("succeeded", 2)
    else:  # classified, not retried by the default policy
        assert (result.error_code, result.attempts) == (code, 1)
