"""The tracer's decisions as the analyzer sees them: verified repeats are not unsafe."""

from __future__ import annotations

import random

from sample_traces._otel import DeterministicTelemetry
from toolspan.analyzer import Analyzer
from toolspan.tracer import Executor, Tool, ToolCall, ToolError
from toolspan.tracer.testing import FakeClock


def _findings(tmp_path, tools, write_tools=()):
    telemetry = DeterministicTelemetry()
    clock = FakeClock()
    executor = Executor(
        tools,
        tracer_provider=telemetry.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
    )
    result = executor.execute(ToolCall("post", "c1", {"text": "hi"}, conversation_id="conv"))
    telemetry.write_jsonl(tmp_path / "t.jsonl")
    with Analyzer() as analyzer:
        analyzer.ingest([tmp_path / "t.jsonl"])
        analyzer.set_write_tools(write_tools)
        return result, [(f.kind, f.tool) for f in analyzer.findings()]


def _times_out_once():
    answers = iter([ToolError("timeout"), {"posted": True}])

    def post(text):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return post


def test_a_repeat_verified_by_read_back_is_not_an_unsafe_retry(tmp_path):
    tool = Tool(
        "post",
        _times_out_once(),
        side_effect="write",
        read_back=lambda text: None,
        commit_window_s=0,  # the service never acts after it answered
    )
    result, findings = _findings(tmp_path, [tool])
    assert (result.status, result.attempts) == ("succeeded", 2)
    assert findings == []


def test_a_write_declared_as_a_read_is_caught_when_named(tmp_path):
    result, findings = _findings(tmp_path, [Tool("post", _times_out_once())], write_tools=("post",))
    assert result.attempts == 2
    assert findings == [("unsafe_retry", "post")]
