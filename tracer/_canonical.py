"""Canonical JSON and the digests derived from it.

Canonical JSON here is: keys sorted, no insignificant whitespace, UTF-8. The
same encoding is used for span attributes, hashes and the analyzer's
comparisons, so two equal argument objects always hash the same.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson

__all__ = ["canonical_json", "digest", "sha256_hex"]

_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as canonical JSON bytes (sorted keys, compact)."""
    try:
        # Without OPT_NON_STR_KEYS orjson is a quarter faster; the rare value
        # with non-string keys fails here and takes the general encoding.
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=_fallback)
    except orjson.JSONEncodeError:
        pass
    return orjson.dumps(value, option=_OPTIONS, default=_fallback)


def _fallback(value: Any) -> Any:
    # Tools sometimes return sets, Decimals or custom objects: make them
    # representable instead of failing after the side effect happened.
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return str(value)


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def digest(data: bytes, key: bytes | None) -> str:
    """SHA-256 of ``data``, or HMAC-SHA-256 when a key is configured (hex).

    The executor's argument hash and the idempotency store's argument
    fingerprint are both digests of canonical JSON.
    """
    if key is None:
        return sha256_hex(data)
    return hmac.new(key, data, hashlib.sha256).hexdigest()
