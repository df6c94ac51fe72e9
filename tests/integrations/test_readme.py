"""The README's five-minute tour, run as written, on a real OpenAI SDK completion."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from examples.agent import Planned, Request
from examples.scripted_api import MODEL, ScriptedAPI
from toolspan.tracer import Executor
from toolspan.tracer.testing import FakeClock

README = Path(__file__).resolve().parents[2] / "README.md"


def tour_snippet() -> str:
    text = README.read_text()
    section = text[text.index("### 1. Instrument a tool") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


class FakeWeatherHttp:
    """The remote weather service: a 503 first, then the weather."""

    def __init__(self) -> None:
        self.calls = 0

    def get(self, url: str, params: dict) -> SimpleNamespace:
        self.calls += 1
        if self.calls == 1:
            return SimpleNamespace(status_code=503, json=lambda: {})
        return SimpleNamespace(status_code=200, json=lambda: {"city": params["city"], "temp_c": 21})


def test_the_tour_snippet_works_with_real_sdk_tool_call_objects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    clock = FakeClock()  # the snippet's executor waits on it instead of sleeping
    monkeypatch.setattr(Executor, "_default_sleep", staticmethod(clock.sleep))
    model = ScriptedAPI("chat", [Request("weather?", [[Planned("get_weather", {"city": "Oslo"})]])])
    completion = model.openai_client().chat.completions.create(model=MODEL, messages=[])
    http = FakeWeatherHttp()
    scope = {
        "http": http,
        "completion": completion,
        "messages": [],
        "session_id": "s1",
        "request_id": "r1",
        "turn_id": "t1",
    }
    exec(compile(tour_snippet(), "README.md", "exec"), scope)
    scope["telemetry"].shutdown()

    (message,) = scope["messages"]
    assert message["tool_call_id"] == completion.choices[0].message.tool_calls[0].id
    body = json.loads(message["content"])
    assert (body["status"], body["attempts"], body["data"]) == (
        "succeeded",
        2,
        {"city": "Oslo", "temp_c": 21},
    )
    assert http.calls == 2 and len(clock.slept) == 1
    # (Where the spans went is not checked: setup_telemetry installs the global
    # tracer provider, which an earlier test in this process may already have set.)
