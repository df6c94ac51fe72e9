"""Tools without a schema get one from their signature: bad arguments never raise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from toolspan.tracer import Executor, Tool, ToolCall, tool
from toolspan.tracer._signature import schema_from_signature


def _call(arguments: Any, name: str = "get_weather") -> ToolCall:
    return ToolCall(name=name, call_id="c1", arguments=arguments, conversation_id="conv")


def weather(city: str, days: int = 1, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    return {"city": city, "days": days, "unit": unit}


def test_the_schema_follows_the_signature() -> None:
    assert schema_from_signature(weather) == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "unit": {"enum": ["c", "f"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    declared = Tool("get_weather", weather)
    assert declared.openai_schema()["function"]["parameters"] == schema_from_signature(weather)


def test_optional_and_open_ended_signatures() -> None:
    def search(query: str | None, *, limit: float = 1.0, **filters: Any) -> None: ...

    assert schema_from_signature(search) == {
        "type": "object",
        "properties": {"query": {"type": ["string", "null"]}, "limit": {"type": "number"}},
        "required": ["query"],
    }

    class Lookup:  # a callable object: its __call__ is the signature
        def __call__(self, order_id: str) -> None: ...

    assert schema_from_signature(Lookup())["required"] == ["order_id"]  # type: ignore[index]


def test_unknown_missing_and_mistyped_arguments_are_invalid_arguments(
    make_executor: Callable[..., Executor],
) -> None:
    ran: list[dict[str, Any]] = []

    def get_weather(city: str, days: int = 1) -> dict[str, Any]:
        ran.append({"city": city, "days": days})
        return {"ok": True}

    executor = make_executor([Tool("get_weather", get_weather)])
    unknown = executor.execute(_call({"city": "Oslo", "cty": "Oslo"}))
    missing = executor.execute(_call({}))
    mistyped = executor.execute(_call({"city": "Oslo", "days": "two"}))
    for result in (unknown, missing, mistyped):
        assert (result.ok, result.status, result.attempts) == (False, "invalid_arguments", 0)
    assert "'cty'" in unknown.message
    assert "city" in missing.message
    assert "days" in mistyped.message
    assert ran == []
    assert executor.execute(_call({"city": "Oslo"})).ok
    assert ran == [{"city": "Oslo", "days": 1}]


def test_an_explicit_schema_wins(make_executor: Callable[..., Executor]) -> None:
    def get_weather(**anything: Any) -> dict[str, Any]:
        return anything

    strict = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    executor = make_executor([Tool("get_weather", get_weather, parameters=strict)])
    assert executor.execute(_call({})).status == "invalid_arguments"
    assert executor.execute(_call({"city": "Oslo", "extra": 1})).ok


def test_the_decorator_derives_it_too(make_executor: Callable[..., Executor]) -> None:
    @tool(name="get_weather")
    def get_weather(city: str) -> str:
        """Today's weather."""
        return city

    assert get_weather.parameters == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    result = make_executor([get_weather]).execute(_call({"town": "Oslo"}))
    assert result.status == "invalid_arguments"
