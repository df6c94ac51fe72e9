"""Idempotency keys for logical actions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from . import _rules as rules

__all__ = ["derive_key", "step_of"]


def derive_key(request_id: str, step: str, *, namespace: str = "toolspan") -> str:
    """A stable idempotency key for one logical action: ``"<namespace>:<sha256 hex>"``.

    One logical action is one step of handling one user request. ``request_id``
    identifies the request (it stays the same across retries, re-plans and workers);
    ``step`` names the action within it, chosen by the application so that a re-plan
    of the same action yields the same name, e.g. ``"charge-card"`` or
    ``"cancel-order:A-1017"``. Do not use the model's tool-call id: it changes every
    time the model re-plans, which is exactly the repeat the key must catch.

    The parts are hashed (SHA-256 over their JSON array, so no choice of separators
    inside them can make two different actions collide), which keeps keys short,
    printable and free of whatever the ids contain. The same inputs give the same key
    in every process and version. ``namespace`` separates applications sharing a store.
    """
    parts = [
        rules.check_name("namespace", namespace),
        rules.check_name("request_id", request_id),
        rules.check_name("step", step),
    ]
    digest = hashlib.sha256(json.dumps(parts).encode("ascii")).hexdigest()
    return f"{namespace}:{digest}"


def step_of(
    name: str,
    step: str | Callable[[Mapping[str, Any]], Any] | None,
    resource_key: Callable[[Mapping[str, Any]], Any] | None,
    arguments: Mapping[str, Any] | None,
) -> str | None:
    """The step of one call of tool ``name`` (see :func:`derive_key`): ``step`` as
    given or computed from the arguments, else the tool and its resource, else the
    tool's name; ``None`` when the arguments cannot give it (then no key: the
    call runs once, never twice). ``arguments`` ``None``: they did not parse."""
    if isinstance(step, str):
        return step
    if step is None and resource_key is None:
        return name  # needs no arguments at all
    if arguments is None:
        return None
    try:
        if step is not None:
            return str(step(arguments))
        assert resource_key is not None
        return f"{name}:{resource_key(arguments)}"
    except (KeyError, TypeError, ValueError):
        return None
