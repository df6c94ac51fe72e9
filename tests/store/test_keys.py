"""derive_key: one stable key per logical action."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolspan.tracer.store import derive_key


def test_the_key_is_a_namespaced_sha256_of_the_parts() -> None:
    expected = hashlib.sha256(b'["toolspan", "req-1", "charge-card"]').hexdigest()
    assert derive_key("req-1", "charge-card") == f"toolspan:{expected}"


def test_namespaces_separate_applications() -> None:
    assert derive_key("r", "s", namespace="shop").startswith("shop:")
    assert derive_key("r", "s", namespace="shop") != derive_key("r", "s", namespace="bank")


@settings(deadline=None)  # a loaded CI machine must not turn slowness into a failure
@given(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1), st.text(min_size=1))
def test_different_actions_never_share_a_key(a: str, b: str, c: str, d: str) -> None:
    """Splitting the same characters differently between the parts changes the key."""
    assert (derive_key(a, b) == derive_key(c, d)) == ((a, b) == (c, d))


def test_separator_tricks_do_not_collide() -> None:
    assert derive_key("a:b", "c") != derive_key("a", "b:c")
    assert derive_key('a", "b', "c") != derive_key("a", 'b", "c')


@pytest.mark.parametrize(("request_id", "step"), [("", "s"), ("r", ""), ("r", None)])
def test_empty_parts_are_refused(request_id: str, step: str) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        derive_key(request_id, step)
