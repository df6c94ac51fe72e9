"""OTLP/gRPC past its bounds (issue 41): the receiver counts the calls in flight
and the bytes of bodies queued itself and, past either bound, answers
RESOURCE_EXHAUSTED carrying a RetryInfo (which the Python, Go and Collector
exporters retry), where grpcio's own refusal carried none."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from toolspan.serve._grpc import GrpcLimits, _Admission

from .conftest import wait_for
from .test_grpc_concurrency import _stored_span_ids

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _protobuf(trace: int, spans: int) -> bytes:
    """One ExportTraceServiceRequest of ``spans`` tool spans in one trace."""
    request = ExportTraceServiceRequest()
    items = request.resource_spans.add().scope_spans.add().spans
    for n in range(spans):
        span = items.add()
        span.trace_id = trace.to_bytes(16, "big")
        span.span_id = (trace * 100_000 + n + 1).to_bytes(8, "big")
        span.name = "execute_tool lookup"
        span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
        for key, value in (("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "x")):
            attribute = span.attributes.add()
            attribute.key, attribute.value.string_value = key, value
    body: bytes = request.SerializeToString()
    return body


def _retry_delay_s(error: Any) -> float:
    """The RetryInfo of a refusal, checked to be the same in both trailers."""
    trailers = dict(error.trailing_metadata())
    info = RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
    status = Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == error.code().value[0]
    [detail] = status.details
    packed = RetryInfo()
    assert detail.Unpack(packed) and packed == info
    return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)


def test_past_the_call_bound_the_refusal_is_resource_exhausted_with_a_retry_info(serve):
    server = serve(max_grpc_calls=1, retry_after_s=0.5)
    release = threading.Event()

    def held() -> Iterator[bytes]:
        release.wait(30)  # the call is open, its body not sent yet
        yield _protobuf(1, 3)

    with grpc.insecure_channel(f"127.0.0.1:{server.settings.grpc_port}") as channel:
        raw = channel.unary_unary(METHOD, request_serializer=bytes, response_deserializer=bytes)
        streaming = channel.stream_unary(
            METHOD, request_serializer=bytes, response_deserializer=bytes
        )
        first = streaming.future(held(), timeout=60)
        wait_for(lambda: server.grpc.admission.calls == 1)
        with pytest.raises(grpc.RpcError) as raised:
            raw(_protobuf(2, 3), timeout=30)
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert raised.value.details() == "more than 1 gRPC calls at once"
        # 0.5 s to twice that, spread so that the refused do not all come back at once.
        assert 0.5 <= _retry_delay_s(raised.value) < 1.0
        release.set()
        assert first.code() == grpc.StatusCode.OK
        raw(_protobuf(3, 3), timeout=30)  # the call that left made room
    assert server.grpc.refused == 1
    assert len(_stored_span_ids(server)) == 6


def test_a_full_queue_of_bodies_refuses_before_it_grows(serve):
    """60 bodies of about 160 KB at once against a queue of 500 KB: the
    queue never holds more than its bound, the refused are told to retry
    later, and what was acknowledged is spooled."""
    bound = 500_000
    server = serve(max_grpc_queued_bytes=bound)
    bodies = [_protobuf(trace, 2_000) for trace in range(1, 61)]
    assert all(100_000 < len(body) < bound for body in bodies)
    with grpc.insecure_channel(f"127.0.0.1:{server.settings.grpc_port}") as channel:
        raw = channel.unary_unary(METHOD, request_serializer=bytes, response_deserializer=bytes)
        calls = [raw.future(body, timeout=120) for body in bodies]
        codes = [call.code() for call in calls]
    refused = [call for call, code in zip(calls, codes, strict=True) if code != grpc.StatusCode.OK]
    assert refused and len(refused) < len(calls)
    for call in refused:
        assert call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert call.details() == f"more than {bound:,} bytes of gRPC requests wait"
        assert 1.0 <= _retry_delay_s(call) < 2.0
    assert 0 < server.grpc.admission.peak_queued_bytes <= bound
    assert len(_stored_span_ids(server)) == 2_000 * (len(calls) - len(refused))


_OPS = st.lists(
    st.one_of(
        st.just(("enter", 0)),
        st.just(("leave", 0)),
        st.tuples(st.just("queue"), st.integers(1, 300)),
        st.just(("dequeue", 0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, max_calls=st.integers(1, 5), max_bytes=st.integers(1, 600))
def test_the_admission_queues_while_the_bounds_allow_and_never_past_them(
    ops: list[tuple[str, int]], max_calls: int, max_bytes: int
) -> None:
    admission = _Admission(GrpcLimits(max_calls=max_calls, max_queued_bytes=max_bytes))
    inside, queued, most = 0, [], 0  # the calls let in, the bodies queued, the most calls in
    for op, size in ops:
        if op == "enter":
            refused = admission.enter() is not None
            assert refused == (inside >= max_calls or sum(queued) >= max_bytes)
            inside += not refused
            most = max(most, inside)
        elif op == "leave" and inside:
            admission.leave()
            inside -= 1
        elif op == "queue":
            refused = admission.queue(size) is not None
            # Refused only when it would not fit; a lone body always fits.
            assert refused == (bool(queued) and sum(queued) + size > max_bytes)
            queued += [] if refused else [size]
        elif op == "dequeue" and queued:
            admission.dequeue(queued.pop(0))
        assert (admission.calls, admission.queued_bytes) == (inside, sum(queued))
        assert admission.peak_calls == most
        assert admission.calls <= max_calls
        assert admission.queued_bytes <= max(max_bytes, max(queued, default=0))
    assert admission.peak_queued_bytes <= max(max_bytes, 300)
