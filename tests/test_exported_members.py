"""The public API is what ``__all__`` lists, and every listed name is documented
(as httpx's test_exported_members.py checks its package)."""

from __future__ import annotations
import __future__

import importlib
import inspect
import types

import pytest

PUBLIC_MODULES = [
    "toolspan.tracer",
    "toolspan.tracer.store",
    "toolspan.tracer.integrations.mcp_proxy",
    "toolspan.analyzer",
    "toolspan.dashboard",
    "toolspan.serve",
    "toolspan.testing",
]


def _public_names(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # subpackages are reached by path
        and not isinstance(value, __future__._Feature)  # ``from __future__ import annotations``
        and name != "TYPE_CHECKING"
    }


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_name_is_exported(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert _public_names(module) <= exported, "public but not in __all__"
    assert len(module.__all__) == len(exported), "listed twice in __all__"
    missing = [item for item in exported if not hasattr(module, item)]
    assert not missing, f"in __all__ but not defined: {missing}"


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_exported_class_and_function_is_documented(name: str) -> None:
    module = importlib.import_module(name)
    undocumented = [
        item
        for item in module.__all__
        if (inspect.isclass(value := getattr(module, item)) or inspect.isfunction(value))
        and not (inspect.getdoc(value) or "").strip()
    ]
    assert not undocumented, f"exported without a docstring: {undocumented}"


def test_the_retry_decision_is_exported() -> None:
    from toolspan.tracer import Decision, RetryPolicy, ToolError

    decision = RetryPolicy().decide(
        ToolError("http_503"),
        attempt=1,
        total_wait_s=0.0,
        safe_to_repeat=True,
        rng=__import__("random").Random(1),
    )
    assert type(decision) is Decision and decision.retry
