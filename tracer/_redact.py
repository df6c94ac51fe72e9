"""Redaction of secrets in tool arguments and error text.

Runs before anything reaches a span, a log line or a file; the tool itself
always receives the original arguments. Two kinds of rules:

* key rules: a mapping key that names a secret (``password``, ``api_key``,
  ``Authorization``...) has its whole value replaced, whatever it is;
* value rules: strings that look like a secret (bearer tokens, JWTs,
  ``sk-...`` keys, AWS key ids, GitHub/Slack tokens, Luhn-valid card
  numbers, ``password=...`` pairs in free text) are replaced wherever they
  appear.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["REDACTED", "Redactor"]

REDACTED = "[REDACTED]"

# Normalised (lowercase, alphanumerics only) fragments: a key containing any
# of them is secret. Matching on fragments catches ``X-Api-Key``,
# ``db_password_hash``, ``refreshToken`` and friends.
_SECRET_KEY_FRAGMENTS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "auth",
    "credential",
    "apikey",
    "privatekey",
    "session",
    "cookie",
    "csrf",
    "xsrf",
    "jwt",
    "ssn",
    "creditcard",
    "cardnumber",
    "cardno",
    "ccnumber",
    "cvv",
    "cvc",
)
# Keys that contain a fragment but name no secret (token counts, authors).
_DEFAULT_ALLOWED_KEYS: frozenset[str] = frozenset(
    {
        "author",
        "authors",
        "authorname",
        "authorid",
        "maxtokens",
        "inputtokens",
        "outputtokens",
        "totaltokens",
        "tokencount",
        "maxcompletiontokens",
    }
)

_SECRET_VALUE = re.compile(
    r"""
      (?i:\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*)                       # bearer tokens
    | \beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*      # JWTs
    | \b(?:sk|pk|rk)-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}   # sk-... API keys
    | \b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}                  # Stripe-style keys
    | \b(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{16}\b                        # AWS access key ids
    | \bgh[pousr]_[A-Za-z0-9]{30,}                                   # GitHub tokens
    | \bxox[abposr]-[A-Za-z0-9-]{10,}                                # Slack tokens
    | \bAIza[0-9A-Za-z_-]{35}                                        # Google API keys
    | -----BEGIN[A-Z ]*PRIVATE\ KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE\ KEY-----|$)
    | (?i:\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|auth)
         \s*[=:]\s*)[^\s,;&"']+                                      # key=value in text
    """,
    re.VERBOSE,
)
_CACHED_TEXTS = 4096
_CACHED_TEXT_CHARS = 256
# Integers from here on may be card numbers sent as JSON numbers.
_CARD_NUMBER_MIN = 10**12
_CARD_CANDIDATE = re.compile(r"(?<![\d.])\d(?:[ -]?\d){12,18}(?![\d.])")


def _normalise_key(key: str) -> str:
    return "".join(ch for ch in key.lower() if ch.isalnum())


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _mask_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return REDACTED if _luhn_valid(digits) else match.group()


class Redactor:
    """Replaces secrets in argument objects and free text with ``[REDACTED]``.

    ``deny_keys`` adds keys that are always secret, ``allow_keys`` keys that
    never are (both matched after normalisation: case and separators do not
    matter). ``extra_patterns`` adds value regexes.
    """

    def __init__(
        self,
        *,
        deny_keys: Iterable[str] = (),
        allow_keys: Iterable[str] = (),
        extra_patterns: Iterable[str | re.Pattern[str]] = (),
    ) -> None:
        self._deny = frozenset(_normalise_key(key) for key in deny_keys)
        self._allow = _DEFAULT_ALLOWED_KEYS | {_normalise_key(key) for key in allow_keys}
        self._extra = tuple(re.compile(pattern) for pattern in extra_patterns)
        # Keys and many values repeat across calls; remembering verdicts keeps
        # the hot path cheap. Both caches are bounded.
        self._key_verdicts: dict[str, bool] = {}
        self._texts: dict[str, str] = {}

    def is_secret_key(self, key: str) -> bool:
        """True when the value under ``key`` must never be shown."""
        verdict = self._key_verdicts.get(key)
        if verdict is None:
            normal = _normalise_key(key)
            verdict = normal in self._deny or (
                normal not in self._allow
                and any(fragment in normal for fragment in _SECRET_KEY_FRAGMENTS)
            )
            if len(self._key_verdicts) < 4096:
                self._key_verdicts[key] = verdict
        return verdict

    def text(self, value: str) -> str:
        """``value`` with every secret-looking substring replaced."""
        if len(value) > _CACHED_TEXT_CHARS:
            return self._scrub(value)
        scrubbed = self._texts.get(value)
        if scrubbed is None:
            scrubbed = self._scrub(value)
            if len(self._texts) >= _CACHED_TEXTS:
                self._texts.clear()
            self._texts[value] = scrubbed
        return scrubbed

    def _scrub(self, value: str) -> str:
        value = _SECRET_VALUE.sub(REDACTED, value)
        for pattern in self._extra:
            value = pattern.sub(REDACTED, value)
        if any(char.isdigit() for char in value):
            value = _CARD_CANDIDATE.sub(_mask_card, value)
        return value

    def value(self, value: Any) -> Any:
        """A redacted copy of a JSON-like value (dicts, lists, scalars)."""
        if type(value) is dict:
            return self._mapping(value)
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return self._mapping(value)
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        if isinstance(value, int) and not isinstance(value, bool) and value >= _CARD_NUMBER_MIN:
            # A card number sent as a JSON number.
            return REDACTED if _luhn_valid(str(value)) else value
        return value

    def _mapping(self, mapping: dict[Any, Any]) -> dict[Any, Any]:
        # The hot path of every call: cached key verdicts and cached texts are
        # looked up inline, and plain scalars are copied without a call.
        verdicts, texts = self._key_verdicts, self._texts
        redacted: dict[Any, Any] = {}
        for key, item in mapping.items():
            secret = verdicts.get(key) if type(key) is str else None
            if secret is None:
                secret = self.is_secret_key(str(key))
            if secret:
                redacted[key] = REDACTED
                continue
            kind = type(item)
            if kind is str:
                scrubbed = texts.get(item)
                redacted[key] = scrubbed if scrubbed is not None else self.text(item)
            elif (
                kind is bool
                or kind is float
                or item is None
                or (kind is int and item < _CARD_NUMBER_MIN)
            ):
                redacted[key] = item
            else:
                redacted[key] = self.value(item)
        return redacted
