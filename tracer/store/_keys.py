"""Idempotency keys for logical actions."""

from __future__ import annotations

import hashlib
import json

from . import _rules as rules

__all__ = ["derive_key"]


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
