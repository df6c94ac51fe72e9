"""How much of a call's arguments and result its call span records.

The OpenTelemetry GenAI conventions make tool arguments and results opt-in:
they may hold personal data. Four levels, set per executor
(``capture_arguments``, ``capture_results``):

* ``"off"``: nothing of them;
* ``"keys"``: their shape: every mapping key, each value replaced by ``[REDACTED]``;
* ``"redacted"``: the values through the executor's :class:`Redactor` (secrets
  always; personal data too with ``Redactor(pii=True)``);
* ``"full"``: as they are, secrets included (for debugging on your own machine).

The hashes the analyzer's findings compare (``toolspan.args.hash``,
``toolspan.result.hash``) are recorded at every level, computed the same way.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from ._errors import ConfigurationError
from ._redact import REDACTED

__all__ = ["Capture", "check_capture", "keys_only"]

Capture = Literal["off", "keys", "redacted", "full"]
_LEVELS: tuple[str, ...] = get_args(Capture)


def check_capture(setting: str, level: object) -> Capture:
    """``level`` when it is one of the four, else a ``ConfigurationError``."""
    if level not in _LEVELS:
        raise ConfigurationError(
            f"{setting} must be one of {', '.join(map(repr, _LEVELS))}, not {level!r}"
        )
    return level  # type: ignore[return-value]


def keys_only(value: Any) -> Any:
    """``value``'s shape: mappings keep their keys, lists their items, every other value
    is ``[REDACTED]``."""
    if isinstance(value, dict):
        return {key: keys_only(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [keys_only(item) for item in value]
    return REDACTED
