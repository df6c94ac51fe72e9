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

__all__ = ["MAX_DEPTH", "canonical_json", "digest", "json_safe", "renderable", "sha256_hex"]

_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
# orjson refuses more than 254 levels of nesting; stay clear of it.
MAX_DEPTH = 200
_INT64 = (-(2**63), 2**64 - 1)  # orjson writes signed and unsigned 64-bit integers
TOO_DEEP = f"[nested deeper than {MAX_DEPTH} levels: left out]"


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


def renderable(value: Any) -> tuple[Any, bytes, bool]:
    """``value`` as every renderer can encode it, its canonical JSON, and
    whether a part nested too deep was left out (see :func:`json_safe`)."""
    try:
        # Sorted keys without OPT_NON_STR_KEYS: the renderers' own encoding must work too.
        return value, orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=_fallback), False
    except orjson.JSONEncodeError:
        safe, cut = json_safe(value)
        return safe, canonical_json(safe), cut


def json_safe(value: Any) -> tuple[Any, bool]:
    """``value`` in the shape every renderer encodes, and whether something was left out.

    A peer's value may hold what orjson refuses: keys that are not strings
    (they become their text, as ``OPT_NON_STR_KEYS`` writes them), integers
    past 64 bits (their decimal text) and nesting past :data:`MAX_DEPTH`
    (the deeper part is replaced by a note, and the second item is True).
    """
    cut = [False]

    def walk(item: Any, depth: int) -> Any:
        if isinstance(item, dict | list | tuple | set | frozenset) and depth >= MAX_DEPTH:
            cut[0] = True
            return TOO_DEEP
        if isinstance(item, dict):
            return {_key(k): walk(v, depth + 1) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v, depth + 1) for v in item]
        if isinstance(item, set | frozenset):
            return [walk(v, depth + 1) for v in sorted(item, key=repr)]
        if isinstance(item, int) and not isinstance(item, bool):
            return item if _INT64[0] <= item <= _INT64[1] else str(item)
        return item

    return walk(value, 0), cut[0]


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return orjson.dumps(key).decode()  # true / false / null, as OPT_NON_STR_KEYS writes them
    return str(key)


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
