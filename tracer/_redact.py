"""Redaction of secrets in tool arguments and error text.

Runs before anything reaches a span, a log line or a file; the tool itself
always receives the original arguments. Three kinds of rules:

* key rules: a mapping key that names a secret (``password``, ``api_key``,
  ``Authorization``, ``access_token``...) has its whole value replaced,
  whatever it is; so has the ``value`` of a ``{"name": ..., "value": ...}``
  (or ``key``/``value``) pair whose name is such a key;
* value rules: strings that look like a secret (bearer and basic
  credentials, JWTs, vendor API keys, the password of a URL or DSN,
  ``key=value`` / ``"key": "value"`` pairs with a secret key in free text,
  card numbers written in groups) are replaced wherever they appear;
* card numbers in context: a Luhn-valid 13-19 digit number is masked under a
  card-ish key (``card``, ``pan``, ``cc``...) or after such a word in text,
  never merely for passing the Luhn check (one integer in ten does).

Fields that only look like secrets stay readable: token counts
(``prompt_tokens``, ``token_budget``, ``tokenizer``), ``session_id``,
``auth_method``, ``is_authenticated``, ``cookie_consent``.

With ``pii=True`` personal data is masked too, in every string: e-mail
addresses; phone numbers written with a ``+`` country code, or with spaces,
dashes or parentheses between groups (9 to 15 digits; an ISO date is not
one), and any value under a phone-ish key (``phone``, ``mobile``, ``tel``,
``msisdn``, ``fax``) with 7 digits or more; card numbers (13 to 19 digits,
grouped or not, Luhn-checked); IBANs (upper case, compact or in groups of
four, mod-97 checked). Numbers that are not strings (counts, amounts, ids)
are kept unless their key says what they are.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["REDACTED", "Redactor"]

REDACTED = "[REDACTED]"

# A key whose normalised form (lowercase, alphanumerics only) contains one of
# these is secret: they are long and unambiguous, so ``X-Api-Key``,
# ``db_password_hash`` and ``mypassword`` are all caught.
_SECRET_FRAGMENTS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "csrf",
    "xsrf",
    "creditcard",
    "cardnumber",
    "cardno",
    "ccnumber",
)
# Short words that are secret only as a whole word of the key (``db_pass``,
# ``accessToken``, ``x-amz-signature``), so that ``passenger``, ``classname``
# and ``tokenizer`` are not; and not when a qualifier word says the value is a
# count, a setting or a flag about the secret (``token_budget``, ``auth_method``).
_SECRET_WORDS = frozenset(
    {
        "pass",
        "pwd",
        "token",
        "tokens",
        "auth",
        "cookie",
        "cookies",
        "jwt",
        "ssn",
        "cvv",
        "cvc",
        "signature",
        "sig",
    }
)
_BENIGN_QUALIFIERS = frozenset(
    {
        "count",
        "counts",
        "budget",
        "limit",
        "limits",
        "max",
        "min",
        "total",
        "prompt",
        "completion",
        "input",
        "output",
        "cached",
        "reasoning",
        "used",
        "remaining",
        "usage",
        "num",
        "method",
        "methods",
        "type",
        "mode",
        "scheme",
        "provider",
        "status",
        "enabled",
        "required",
        "consent",
        "expires",
        "expiry",
        "ttl",
    }
)
# Words of a key under which a Luhn-valid number is a card number.
_CARD_WORDS = frozenset({"card", "cards", "pan", "cc", "visa", "mastercard", "amex"})
# Keys that contain a fragment but name no secret.
_DEFAULT_ALLOWED_KEYS: frozenset[str] = frozenset(
    {"author", "authors", "authorname", "authorid", "tokenizer"}
)
# Words of a key whose value, with ``pii=True``, is a phone number.
_PHONE_WORDS = frozenset({"phone", "phones", "mobile", "tel", "telephone", "msisdn", "fax", "cell"})
_PLAIN, _SECRET, _CARD, _PHONE = 0, 1, 2, 3

_SECRET_VALUE = re.compile(
    r"""
      (?i:\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*)                       # bearer tokens
    | \beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*      # JWTs
    | \b(?:sk|pk|rk)-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}   # sk-... API keys
    | \b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}                  # Stripe-style keys
    | \b(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{16}\b                        # AWS access key ids
    | \bgh[pousr]_[A-Za-z0-9]{30,}                                   # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{22,}                                 # GitHub fine-grained
    | \bglpat-[A-Za-z0-9_-]{20,}                                     # GitLab
    | \bhf_[A-Za-z0-9]{30,}                                          # Hugging Face
    | \bnpm_[A-Za-z0-9]{36,}                                         # npm
    | \bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}                   # SendGrid
    | \bxox[abposr]-[A-Za-z0-9-]{10,}                                # Slack tokens
    | \bAIza[0-9A-Za-z_-]{35}                                        # Google API keys
    | -----BEGIN[A-Z ]*PRIVATE\ KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE\ KEY-----|$)
    """,
    re.VERBOSE,
)
# ``key=value``, ``key: value`` and ``"key": "value"`` (also JSON escaped
# inside a string) where the key may name a secret; the key itself decides
# (``_key_pair``), so ``prompt_tokens: 120`` stays.
_KEY_PAIR = re.compile(
    r"""
    (?P<key>(?<![\w.-])\\*["']?
        (?P<name>[\w.-]*(?i:pass|pwd|secret|token|auth|key|credential|cookie|sig|jwt|csrf|xsrf|ssn|cvv|cvc|card|pan)[\w.-]*)
        \\*["']?\s*[=:]\s*)
    (?P<value>
        (?P<escape>\\+)"(?:(?!(?P=escape)").)*(?P=escape)"  # \"...\" (JSON in a JSON string)
      | "(?:[^"\\]|\\.)*"                         # "..."
      | '[^']*'                                   # '...'
      | (?i:(?:basic|bearer|digest|token|negotiate)\s+)?[^\s,;&"'}\]]+
    )
    """,
    re.VERBOSE,
)
# The password of ``scheme://user:password@host`` (or ``user:password@host``).
_URL_PASSWORD = re.compile(
    r"(?P<user>(?:\b[a-zA-Z][\w+.-]*://[^\s:/@]*|(?<![\w/:@])[A-Za-z][\w.%+-]*)):"
    r"(?P<password>[^\s:/@]+)@(?=[\w\[])"
)
_BASIC_CREDENTIALS = re.compile(r"(?i:\bbasic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])")
# Card numbers written as cards are: in groups of four (or Amex's 4-6-5), standing
# alone: not four groups inside a longer dashed token such as a UUID.
_GROUPED_CARD = re.compile(
    r"(?<![\w.])(?<!\w-)"
    r"(?:\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?|\d{4}([ -])\d{6}\2\d{5})"
    r"(?![\w.]|-\w)"
)
# A plain digit run right after a card-ish word ("card 4111111111111111").
_CARD_IN_CONTEXT = re.compile(
    r"(?i:\b(?:card|cc|pan|visa|mastercard|amex|credit)\w*(?:[^\w\n]{1,3}(?:number|num|no|nr))?)"
    r"[^\w\n]{1,6}(\d{13,19})(?![\d.])"
)
# -- personal data (``pii=True``) -------------------------------------------------------
_EMAIL = re.compile(
    r"(?<![\w.!#$%&'*+/=?^`{|}~-])[\w.!#$%&'*+/=?^`{|}~-]+"
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+"
)
# A digit run of card length, its digits maybe grouped by single spaces or dashes.
_ANY_CARD = re.compile(r"(?<![\w.+-])\d(?:[ -]?\d){12,18}(?!\w|[.-]\d)")
# An IBAN: country, check digits, then the account compact or in groups of four.
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{1,4}){3,8})\b")
# A phone number: with a country code (``+``), or groups apart (no bare digit run:
# that is more often an id than a phone; under a phone-ish key it is masked anyway).
_PHONE_NUMBER = re.compile(
    r"(?<![\w+./-])"
    r"(?:\+\d[\d ()-]{6,22}\d|\(?\d{2,5}\)?[ -]\d{2,5}(?:[ -]\d{2,5}){0,4})"
    r"(?![\w/]|[.-]\d)"
)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SEPARATOR = re.compile(r"[ -]")

_KEY_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_CACHED_TEXTS = 4096
_CACHED_TEXT_CHARS = 256
_CARD_DIGITS = range(13, 20)


def _normalise_key(key: str) -> str:
    return "".join(ch for ch in key.lower() if ch.isalnum())


def _classify(normal: str, words: list[str]) -> int:
    if any(fragment in normal for fragment in _SECRET_FRAGMENTS):
        return _SECRET
    if not _SECRET_WORDS.isdisjoint(words):
        return _PLAIN if not _BENIGN_QUALIFIERS.isdisjoint(words) else _SECRET
    if not _CARD_WORDS.isdisjoint(words):
        return _CARD
    return _PLAIN


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


def _is_card_number(digits: str) -> bool:
    return len(digits) in _CARD_DIGITS and digits.isdigit() and _luhn_valid(digits)


def _iban_valid(text: str) -> bool:
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in moved)) % 97 == 1


def _mask_valid_prefix(text: str, valid: Callable[[str], bool]) -> str:
    """``text`` with its longest valid prefix of whole groups masked (a number's
    groups may run into a neighbour: "4111 1111 1111 1111 12/26")."""
    ends = [found.start() for found in _SEPARATOR.finditer(text)] + [len(text)]
    for end in reversed(ends):
        if valid(text[:end]):
            return REDACTED + text[end:]
    return text


def _is_any_card(text: str) -> bool:
    return _is_card_number(text.replace(" ", "").replace("-", ""))


def _mask_any_card(match: re.Match[str]) -> str:
    return _mask_valid_prefix(match.group(), _is_any_card)


def _mask_iban(match: re.Match[str]) -> str:
    return _mask_valid_prefix(match.group(), _iban_valid)


def _mask_phone(match: re.Match[str]) -> str:
    text = match.group()
    digits = sum(char.isdigit() for char in text)
    least = 8 if text.startswith("+") else 9
    if not least <= digits <= 15 or _ISO_DATE.match(text):
        return text
    return REDACTED


def _mask_pii(value: str) -> str:
    if "@" in value:
        value = _EMAIL.sub(REDACTED, value)
    if any(char.isdigit() for char in value):
        value = _IBAN.sub(_mask_iban, value)
        value = _ANY_CARD.sub(_mask_any_card, value)
        value = _PHONE_NUMBER.sub(_mask_phone, value)
    return value


def _mask_grouped_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return REDACTED if _is_card_number(digits) else match.group()


def _mask_card_in_context(match: re.Match[str]) -> str:
    if not _is_card_number(match.group(1)):
        return match.group()
    return match.group()[: match.start(1) - match.start()] + REDACTED


def _mask_basic(match: re.Match[str]) -> str:
    # Only what decodes to ``user:password``: "basic authentication" stays.
    try:
        decoded = base64.b64decode(match.group(1) + "==")
    except (binascii.Error, ValueError):
        return match.group()
    if b":" not in decoded:
        return match.group()
    return match.group()[: match.start(1) - match.start()] + REDACTED


def _mask_url_password(match: re.Match[str]) -> str:
    return f"{match.group('user')}:{REDACTED}@"


class Redactor:
    """Replaces secrets in argument objects and free text with ``[REDACTED]``.

    ``deny_keys`` adds keys that are always secret, ``allow_keys`` keys that
    never are (both matched after normalisation: case and separators do not
    matter). ``extra_patterns`` adds value regexes. ``pii=True`` masks personal
    data as well: e-mail addresses, phone numbers, card numbers and IBANs (see
    the module docstring).
    """

    def __init__(
        self,
        *,
        deny_keys: Iterable[str] = (),
        allow_keys: Iterable[str] = (),
        extra_patterns: Iterable[str | re.Pattern[str]] = (),
        pii: bool = False,
    ) -> None:
        self.pii = pii
        self._deny = frozenset(_normalise_key(key) for key in deny_keys)
        self._allow = _DEFAULT_ALLOWED_KEYS | {_normalise_key(key) for key in allow_keys}
        self._extra = tuple(re.compile(pattern) for pattern in extra_patterns)
        # Keys and many values repeat across calls; remembering verdicts keeps
        # the hot path cheap. Both caches are bounded.
        self._key_verdicts: dict[str, int] = {}
        self._texts: dict[str, str] = {}

    def is_secret_key(self, key: str) -> bool:
        """True when the value under ``key`` must never be shown."""
        return self._verdict(key) == _SECRET

    def _verdict(self, key: str) -> int:
        verdict = self._key_verdicts.get(key)
        if verdict is None:
            normal = _normalise_key(key)
            if normal in self._deny:
                verdict = _SECRET
            elif normal in self._allow:
                verdict = _PLAIN
            else:
                words = [w.lower() for w in _KEY_WORD.findall(key)]
                verdict = _classify(normal, words)
                if verdict == _PLAIN and self.pii and not _PHONE_WORDS.isdisjoint(words):
                    verdict = _PHONE
            if len(self._key_verdicts) < 4096:
                self._key_verdicts[key] = verdict
        return verdict

    def _key_plan(self, keys: Iterable[str]) -> dict[str, bool] | None:
        """What :meth:`arguments` decides for each of a fixed set of keys, decided
        once: ``True`` when the value is a secret (replaced whole), ``False``
        when it is plain (a string scrubbed as text, any other scalar kept).
        ``None`` when a key needs more than that: a card-ish key (masked only
        when its value is a card number) or ``value`` (its neighbour may name it).
        """
        plan: dict[str, bool] = {}
        for key in keys:
            verdict = self._verdict(key)
            if verdict in (_CARD, _PHONE) or key == "value":
                return None
            plan[key] = verdict == _SECRET
        return plan

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
        if self.pii:
            value = _mask_pii(value)
        value = _SECRET_VALUE.sub(REDACTED, value)
        if "=" in value or ":" in value:
            value = _KEY_PAIR.sub(self._mask_key_pair, value)
            if "@" in value:
                value = _URL_PASSWORD.sub(_mask_url_password, value)
        if "asic" in value:
            value = _BASIC_CREDENTIALS.sub(_mask_basic, value)
        for pattern in self._extra:
            value = pattern.sub(REDACTED, value)
        if any(char.isdigit() for char in value):
            value = _GROUPED_CARD.sub(_mask_grouped_card, value)
            value = _CARD_IN_CONTEXT.sub(_mask_card_in_context, value)
        return value

    def _mask_key_pair(self, match: re.Match[str]) -> str:
        verdict = self._verdict(match.group("name"))
        raw = match.group("value")
        if verdict == _PLAIN or raw.startswith(REDACTED[:-1]):
            return match.group()
        if verdict == _CARD:
            digits = raw.strip("\\\"'").replace(" ", "").replace("-", "")
            if not _is_card_number(digits):
                return match.group()
        escape = match.group("escape")
        quote = f'{escape}"' if escape else raw[0] if raw[0] in "\"'" else ""
        return f"{match.group('key')}{quote}{REDACTED}{quote}"

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
        return value

    def _card_value(self, value: Any) -> Any:
        """A value under a card-ish key: masked when it is a card number."""
        if isinstance(value, int) and not isinstance(value, bool):
            return REDACTED if _is_card_number(str(value)) else value
        if isinstance(value, str):
            digits = value.replace(" ", "").replace("-", "")
            return REDACTED if _is_card_number(digits) else self.text(value)
        return self.value(value)

    def _phone_value(self, value: Any) -> Any:
        """A value under a phone-ish key (``pii=True``): masked when it has 7 digits or more."""
        if isinstance(value, int) and not isinstance(value, bool):
            return REDACTED if len(str(abs(value))) >= 7 else value
        if isinstance(value, str):
            return REDACTED if sum(c.isdigit() for c in value) >= 7 else self.text(value)
        return self.value(value)

    def _special(self, verdict: int, value: Any) -> Any:
        """The value under a key that is not plain."""
        if verdict == _SECRET:
            return REDACTED
        if verdict == _CARD:
            return self._card_value(value)
        return self._phone_value(value)

    def _secrets_only(self) -> Redactor:
        """This redactor without the personal-data rules (``pii``): what argument
        hashes are computed over, so that masking never makes two calls look alike."""
        if not self.pii:
            return self
        twin = copy.copy(self)
        twin.pii = False
        twin._key_verdicts = {}
        twin._texts = {}
        return twin

    def _mapping(self, mapping: dict[Any, Any]) -> dict[Any, Any]:
        # The hot path of every call: cached key verdicts and cached texts are
        # looked up inline, and plain scalars are copied without a call.
        verdicts, texts = self._key_verdicts, self._texts
        redacted: dict[Any, Any] = {}
        for key, item in mapping.items():
            verdict = verdicts.get(key) if type(key) is str else None
            if verdict is None:
                verdict = self._verdict(str(key))
            if verdict:
                redacted[key] = REDACTED if verdict == _SECRET else self._special(verdict, item)
                continue
            kind = type(item)
            if kind is str:
                scrubbed = texts.get(item)
                redacted[key] = scrubbed if scrubbed is not None else self.text(item)
            elif kind is bool or kind is int or kind is float or item is None:
                redacted[key] = item
            else:
                redacted[key] = self.value(item)
        if "value" in redacted:
            self._name_value_pair(mapping, redacted)
        return redacted

    # A redacted copy of a call's arguments: :meth:`value` for the dict every
    # call has, without the type dispatch or another frame (the hot path).
    arguments = _mapping

    def _name_value_pair(self, mapping: dict[Any, Any], redacted: dict[Any, Any]) -> None:
        # [{"name": "DB_PASSWORD", "value": "..."}]: environment lists, header
        # lists and attribute lists name the secret beside its value.
        name = mapping.get("name", mapping.get("key"))
        if isinstance(name, str):
            verdict = self._verdict(name)
            if verdict:
                redacted["value"] = self._special(verdict, mapping["value"])


_DEFAULT = Redactor()


def redacted_error(exc: BaseException) -> str:
    """``str(exc)`` through the default rules: for log lines of parts that hold
    no executor's redactor (retry budget, circuit breaker), whose store errors
    may quote a connection string or a stored value."""
    return _DEFAULT.text(str(exc))
