"""Tool declarations, the tool calls a model makes, and checking one against the other.

:func:`parse_arguments` and :func:`check_result` hold a call's arguments and
a tool's return value against the declared schemas; on failure they name
every failing field without echoing values (they may be secrets).
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import fastjsonschema
import jsonschema
import orjson
import referencing
import referencing.exceptions

from ._errors import ConfigurationError
from ._redact import REDACTED, Redactor
from ._signature import KEY_PARAMETER, schema_from_signature, takes_key
from ._throttle import first_time
from .integrations._shapes import anthropic_fields, openai_fields

__all__ = ["DEFAULT_COMMIT_WINDOW_S", "NOT_PENDING", "SideEffect", "Tool", "ToolCall", "tool"]

SideEffect = Literal["none", "write"]

_log = logging.getLogger("toolspan.tracer")

# How long a service may still commit a write after the attempt ended (the client
# got its failure or gave up): the request timeouts behind common gateways are
# 30 s (API Gateway 29 s, Heroku's router and gunicorn's worker timeout 30 s).
DEFAULT_COMMIT_WINDOW_S: Final = 30.0


class _NotPending:
    """The type of `NOT_PENDING` (one instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_PENDING"


NOT_PENDING: Final = _NotPending()
"""What a ``read_back`` returns when the effect is absent **and** the service holds
no request for it that could still commit (e.g. its status endpoint says so): the
absence is then trusted at once, inside the tool's ``commit_window_s``."""

# The JSON Schema validator: fastjsonschema compiles a schema to Python code,
# which keeps validation to a few microseconds on the success path; the
# reference ``jsonschema`` library explains failures field by field.
_Validator = Callable[[Any], Any]
# A quicker first look at the arguments for the schemas most tools declare
# (see ``_quick_rules``): True means valid; False means "ask the validator".
_Acceptor = Callable[[dict[str, Any]], bool]
# The same look that also redacts (see ``redacting_acceptor``): the redacted
# copy of valid arguments, or ``None`` for "ask the validator".
RedactingAcceptor = Callable[[dict[str, Any]], dict[str, Any] | None]


def _refuse_remote(uri: str) -> Any:
    # A schema may come from a peer (an MCP server's inputSchema): resolving its
    # remote or file $ref would send a request, or read a file, that the peer chose.
    raise fastjsonschema.JsonSchemaDefinitionException(
        f"$ref {uri[:200]!r} is outside the schema; toolspan resolves only local refs (#/...)"
    )


class _RefuseEveryScheme(Mapping[str, Callable[[str], Any]]):
    """fastjsonschema's ``handlers``: every URI scheme refused (it would urlopen the rest)."""

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


_NO_REMOTE_REFS = _RefuseEveryScheme()
# jsonschema's resolution of refs outside the schema: none (its default fetches URLs).
_NO_RETRIEVAL: referencing.Registry[Any] = referencing.Registry(
    retrieve=_refuse_remote,  # type: ignore[call-arg]  # an attrs alias mypy does not see
)


def _compile(schema: Mapping[str, Any] | None, what: str, name: str) -> _Validator | None:
    if schema is None:
        return None
    try:
        as_dict = dict(schema)
        jsonschema.validators.validator_for(as_dict).check_schema(as_dict)
        validate: _Validator = fastjsonschema.compile(as_dict, handlers=_NO_REMOTE_REFS)
        return validate
    except (jsonschema.SchemaError, fastjsonschema.JsonSchemaDefinitionException) as exc:
        raise ConfigurationError(f"tool {name!r}: invalid {what} schema: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool declared once: its function, side effect and schemas.

    ``side_effect="none"`` marks a read-only tool (always safe to repeat);
    ``"write"`` one that changes state, which is repeated only when
    ``idempotent`` says an idempotency key protects it. ``parameters`` is
    the JSON Schema the model is given; ``result_schema`` optionally checks
    what the tool returns. ``retryable_codes`` overrides the executor's
    policy for this tool. ``read_back(**arguments)`` (writes only) answers
    "did the effect happen?" after an ambiguous failure: it returns the
    effect's data, or ``None`` when there is none. ``resource_key`` names the
    resource a write touches (e.g. the order id), so parallel writes on one
    resource run one after another. ``service`` names the downstream service
    the tool calls (default: the tool's name): retry budgets and circuit
    breakers are kept per service, so tools of one API share them.
    ``span_attributes`` are added to every span of the tool's calls (an
    adapter's protocol attributes, e.g. MCP's ``mcp.method.name``); they never
    replace the executor's own. ``commit_window_s`` (writes whose service does not
    honour keys): how long after an attempt ended its service may still commit the
    request (a gateway timed out in front of a slow backend). A read-back that finds
    the effect absent within it proves nothing: the call ends ``unknown_outcome``
    and the key stays held until the window has passed, unless the read-back
    returns `NOT_PENDING`. 0 declares a service that never acts after it answered.
    ``attempt_timeout_s``: the longest one attempt's request can be in flight before
    the tool's own client gives up (its HTTP timeout). Declared on such a write, the
    lease its key gets right before each attempt covers that request and its commit
    window, so no other worker can take the key over while the request may still
    commit, even from an owner whose lease renewals no longer reach the store.

    The idempotency key must reach the service, or a repeat runs twice: a
    function (or read-back) that declares an ``idempotency_key`` parameter
    receives the call's key (``None`` on an unkeyed call); the parameter is
    never in the model's schema and the model cannot set it. Otherwise say how
    the key travels with ``key_passed`` (e.g. ``"Idempotency-Key header"`` for
    an httpx client built with :func:`~toolspan.tracer.send_idempotency_key`);
    ``idempotent=True`` with neither is a ``ConfigurationError``.

    A key protects only where the service honours it: one that ignores the key
    runs a retried write twice. ``keys_honoured`` states what the service does
    with keys: ``True`` (it returns the first result for a repeated key; check it
    with :func:`toolspan.tracer.testing.check_keys_honoured`), ``False`` (it
    ignores them), ``None`` (unknown, the default). An idempotent write with no
    ``read_back`` whose keys are not declared honoured gets a one-time warning,
    and the analyzer reports its retries after an ambiguous failure
    (``unverified_keyed_retry``). Recorded on its spans as
    ``toolspan.tool.keys_honoured``.
    """

    name: str
    fn: Callable[..., Any]
    side_effect: SideEffect = "none"
    idempotent: bool = False
    parameters: Mapping[str, Any] | None = None
    result_schema: Mapping[str, Any] | None = None
    schema_version: str | None = None
    retryable_codes: frozenset[str] | None = None
    read_back: Callable[..., Any] | None = None
    resource_key: Callable[[Mapping[str, Any]], str] | None = None
    description: str = ""
    check_with: str | None = None
    next_tools: Sequence[str] = ()
    service: str = ""
    span_attributes: Mapping[str, str | bool | int | float] | None = None
    key_passed: str | None = None
    commit_window_s: float = DEFAULT_COMMIT_WINDOW_S
    attempt_timeout_s: float | None = None
    keys_honoured: bool | None = None
    _takes_key: bool = field(init=False, repr=False, compare=False)
    _check_args: _Validator | None = field(init=False, repr=False, compare=False)
    _accept_args: _Acceptor | None = field(init=False, repr=False, compare=False)
    _accept_rules: _Rules | None = field(init=False, repr=False, compare=False)
    _check_result: _Validator | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigurationError("a tool needs a name")
        if self.side_effect not in ("none", "write"):
            raise ConfigurationError(
                f"tool {self.name!r}: side_effect must be 'none' or 'write', "
                f"not {self.side_effect!r}"
            )
        if self.idempotent and self.side_effect != "write":
            raise ConfigurationError(f"tool {self.name!r}: only writes take idempotency keys")
        if self.read_back is not None and self.side_effect != "write":
            raise ConfigurationError(f"tool {self.name!r}: read_back is for writes")
        if self.check_with is not None and self.side_effect != "write":
            raise ConfigurationError(f"tool {self.name!r}: check_with is for writes")
        object.__setattr__(self, "next_tools", tuple(self.next_tools))
        object.__setattr__(self, "commit_window_s", self._seconds("commit_window_s"))
        if self.attempt_timeout_s is not None:
            object.__setattr__(self, "attempt_timeout_s", self._seconds("attempt_timeout_s"))
        if not isinstance(self.service, str):
            raise ConfigurationError(f"tool {self.name!r}: service must be a string")
        # The downstream service its retry budget and circuit breaker are kept per.
        object.__setattr__(self, "service", self.service or self.name)
        object.__setattr__(self, "_takes_key", takes_key(self.fn))
        self._check_key_route()
        self._check_keys_honoured()
        if self.parameters is None:
            object.__setattr__(self, "parameters", schema_from_signature(self.fn))
        elif self._takes_key and KEY_PARAMETER in (self.parameters.get("properties") or {}):
            raise ConfigurationError(
                f"tool {self.name!r}: {KEY_PARAMETER!r} is filled in by the executor with the "
                "call's key; remove it from the parameters the model is given"
            )
        object.__setattr__(self, "_check_args", _compile(self.parameters, "parameters", self.name))
        rules = _quick_rules(self.parameters)
        object.__setattr__(self, "_accept_rules", rules)
        object.__setattr__(self, "_accept_args", None if rules is None else _accept_with(*rules))
        object.__setattr__(self, "_check_result", _compile(self.result_schema, "result", self.name))

    def _seconds(self, name: str) -> float:
        """A declared duration, checked: a finite number of seconds >= 0."""
        value = getattr(self, name)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: {name} must be a finite number of seconds >= 0, got {value!r}"
            )
        return float(value)

    def _check_key_route(self) -> None:
        """An idempotent write must say how its key reaches the service."""
        if self.key_passed is not None and (
            not isinstance(self.key_passed, str) or not self.key_passed.strip()
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: key_passed says in words how the key travels "
                '(e.g. "Idempotency-Key header"), and cannot be empty'
            )
        if self.key_passed is not None and not self.idempotent:
            raise ConfigurationError(
                f"tool {self.name!r}: key_passed is for idempotent writes (idempotent=True)"
            )
        if self.idempotent and not self._takes_key and self.key_passed is None:
            raise ConfigurationError(
                f"tool {self.name!r} is declared idempotent=True, but nothing passes its "
                "idempotency key to the service, so a repeat would run twice. Either give "
                f"the function an {KEY_PARAMETER!r} parameter (the executor fills it in), "
                "or send it as a header with an httpx client built with "
                'event_hooks={"request": [send_idempotency_key()]} and declare '
                'key_passed="Idempotency-Key header", or say how it travels otherwise '
                'with key_passed="..."'
            )

    def _check_keys_honoured(self) -> None:
        """``keys_honoured`` is a bool, for idempotent writes; warn if nothing verifies the key."""
        if self.keys_honoured is None:
            pass
        elif not isinstance(self.keys_honoured, bool):
            raise ConfigurationError(
                f"tool {self.name!r}: keys_honoured must be True, False or None, "
                f"not {self.keys_honoured!r}"
            )
        elif not self.idempotent:
            raise ConfigurationError(
                f"tool {self.name!r}: keys_honoured is for idempotent writes (idempotent=True)"
            )
        if self.idempotent and self.read_back is None and self.keys_honoured is not True:
            _warn_unverified_key(self.name, self.key_route)

    @property
    def key_route(self) -> str | None:
        """How the call's key reaches the service (recorded on the call span), or ``None``."""
        if self.key_passed is not None:
            return self.key_passed
        return f"{KEY_PARAMETER} parameter" if self._takes_key else None

    @property
    def is_write(self) -> bool:
        """True for tools that change state."""
        return self.side_effect == "write"

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry (same schema the executor checks)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters or {"type": "object"}),
            },
        }

    def anthropic_schema(self) -> dict[str, Any]:
        """The tool as an Anthropic ``tools`` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.parameters or {"type": "object"}),
        }


def _warn_unverified_key(name: str, route: str | None) -> None:
    """Once per tool name: its retries are safe only if the service honours the key
    (a declaration is often rebuilt per request, and one line says it all)."""
    if not first_time("unverified_key", name):
        return
    # "Idempotency-Key header" -> "Idempotency-Key": the name the user knows.
    if route is not None and route.endswith(" header"):
        what = route.removesuffix(" header")
    else:
        what = f"its idempotency key ({route or 'unrouted'})"
    _log.warning(
        "%s relies on the service honouring %s; add read_back or declare keys_honoured=True "
        "(check it with toolspan.tracer.testing.check_keys_honoured): a service that ignores "
        "the key runs a retry after a timeout twice",
        name,
        what,
    )


def tool(
    *,
    name: str | None = None,
    side_effect: SideEffect = "none",
    idempotent: bool = False,
    parameters: Mapping[str, Any] | None = None,
    result_schema: Mapping[str, Any] | None = None,
    schema_version: str | None = None,
    retryable_codes: frozenset[str] | None = None,
    read_back: Callable[..., Any] | None = None,
    resource_key: Callable[[Mapping[str, Any]], str] | None = None,
    check_with: str | None = None,
    next_tools: Sequence[str] = (),
    service: str = "",
    key_passed: str | None = None,
    commit_window_s: float = DEFAULT_COMMIT_WINDOW_S,
    attempt_timeout_s: float | None = None,
    keys_honoured: bool | None = None,
) -> Callable[[Callable[..., Any]], Tool]:
    """Declare a function as a :class:`Tool` (decorator form)."""

    def declare(fn: Callable[..., Any]) -> Tool:
        return Tool(
            name=name or fn.__name__,
            fn=fn,
            side_effect=side_effect,
            idempotent=idempotent,
            parameters=parameters,
            result_schema=result_schema,
            schema_version=schema_version,
            retryable_codes=retryable_codes,
            read_back=read_back,
            resource_key=resource_key,
            description=(fn.__doc__ or "").strip(),
            check_with=check_with,
            next_tools=next_tools,
            service=service,
            key_passed=key_passed,
            commit_window_s=commit_window_s,
            attempt_timeout_s=attempt_timeout_s,
            keys_honoured=keys_honoured,
        )

    return declare


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model made, with the ids that place it.

    ``arguments`` may be a mapping or the JSON string the model produced.
    ``idempotency_key`` identifies the logical action for writes (see
    :func:`toolspan.tracer.store.derive_key`); it must stay the same on
    every retry and re-plan, unlike ``call_id``, which the model changes.
    """

    name: str
    call_id: str
    arguments: Mapping[str, Any] | str
    conversation_id: str
    request_id: str = ""
    turn_id: str = ""
    idempotency_key: str | None = None

    @classmethod
    def from_openai(
        cls,
        tool_call: Any,
        *,
        conversation_id: str,
        request_id: str = "",
        turn_id: str = "",
        idempotency_key: str | None = None,
    ) -> ToolCall:
        """From an OpenAI tool call: a Chat Completions ``tool_calls`` entry or a
        Responses API ``function_call`` item, as a dict or an SDK object."""
        name, call_id, arguments = openai_fields(tool_call)
        return cls(
            name=name,
            call_id=call_id,
            arguments=arguments,
            conversation_id=conversation_id,
            request_id=request_id,
            turn_id=turn_id,
            idempotency_key=idempotency_key,
        )

    @classmethod
    def from_anthropic(
        cls,
        block: Any,
        *,
        conversation_id: str,
        request_id: str = "",
        turn_id: str = "",
        idempotency_key: str | None = None,
    ) -> ToolCall:
        """From an Anthropic Messages ``tool_use`` block (a dict or a ``ToolUseBlock``)."""
        name, call_id, arguments = anthropic_fields(block)
        return cls(
            name=name,
            call_id=call_id,
            arguments=arguments,
            conversation_id=conversation_id,
            request_id=request_id,
            turn_id=turn_id,
            idempotency_key=idempotency_key,
        )


# -- checking calls and results against the declarations ------------------------


def parse_arguments(
    declared: Tool, raw: Mapping[str, Any] | str, quick: RedactingAcceptor | None = None
) -> tuple[dict[str, Any], str | None, dict[str, Any] | None]:
    """A call's arguments as a fresh dict, what is wrong with them (``None`` if
    nothing) and, when ``quick`` (a :func:`redacting_acceptor`) vouches for
    them, their redacted copy (else ``None``: the caller redacts them)."""
    if type(raw) is dict:
        arguments = raw.copy()  # the common case, without the ABC checks below
    else:
        arguments, problem = _arguments_as_dict(raw)
        if problem is not None:
            return arguments, problem, None
    check = declared._check_args
    if check is None:
        return arguments, None, None
    if quick is not None:
        redacted = quick(arguments)
        if redacted is not None:
            return arguments, None, redacted
    elif (accept := declared._accept_args) is not None and accept(arguments):
        return arguments, None, None
    try:
        check(arguments)  # the quick look could not vouch for them: the validator decides
    except Exception:
        return arguments, explain_schema_errors(declared.parameters or {}, arguments), None
    return arguments, None, None


def check_result(declared: Tool, data: Any) -> str | None:
    """What is wrong with a returned value under the result schema (``None`` if nothing)."""
    check = declared._check_result
    if check is None:
        return None
    try:
        check(data)
    except Exception:
        return explain_schema_errors(declared.result_schema or {}, data)
    return None


def _arguments_as_dict(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, str | bytes):
        try:
            raw = orjson.loads(raw or "{}")
        except orjson.JSONDecodeError as exc:
            # Position only: the text itself may hold secrets.
            return {}, f"arguments are not valid JSON (at character {exc.pos})"
        if type(raw) is dict:
            return raw, None  # freshly decoded: no copy, no ABC check
    if not isinstance(raw, Mapping):
        return {}, f"arguments must be a JSON object, not {type(raw).__name__}"
    return dict(raw), None


# -- the quick accept -------------------------------------------------------------

# Keywords that never change a verdict.
_ANNOTATIONS = frozenset({"title", "description", "examples", "$comment"})
_OBJECT_KEYWORDS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}
_PROPERTY_KEYWORDS = _ANNOTATIONS | {"type", "minLength", "maxLength", "minimum", "maximum", "enum"}
# A property's rule: ``(exact type, low, high, choices, sized)``. A value of
# exactly that type passes (an int too where the type is float: JSON's
# "number"), is one of ``choices`` when there are choices, and lies within
# ``low..high`` (its length when ``sized``) when there are limits.
_Rule = tuple[type, Any, Any, frozenset[str] | None, bool]
_Rules = tuple[dict[str, _Rule], tuple[str, ...], bool]
_NUMBER_TYPES: dict[str, type] = {"integer": int, "number": float}


def _quick_rules(schema: Mapping[str, Any] | None) -> _Rules | None:
    """The rules of a check that can only say "valid", for a flat object schema of plain fields.

    Most tool schemas are an object of strings, booleans and numbers with
    length and range limits, string enums, ``required`` and
    ``additionalProperties: false``. For those this check accepts valid
    arguments in half the validator's time, while anything it is not sure of
    (a keyword outside that set, a value of another exact type, NaN) goes to
    the validator, which decides and explains; so the verdict is always the
    validator's. ``None`` when the schema uses anything else: defaults (the
    validator fills them in), patterns, formats, nested schemas, type lists.

    These are its rules: each property's :data:`_Rule`, the required names,
    and whether other keys are refused (``additionalProperties: false``).
    """
    if (
        schema is None
        or schema.get("type") != "object"
        or not _OBJECT_KEYWORDS.issuperset(schema)
        or type(schema.get("additionalProperties", True)) is not bool
    ):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    rules: dict[str, _Rule] = {}
    for name, rule_schema in properties.items():
        rule = _property_rule(rule_schema)
        if rule is None:
            return None
        rules[name] = rule
    return rules, tuple(required), schema.get("additionalProperties") is False


def _property_rule(schema: Any) -> _Rule | None:
    """The :data:`_Rule` of one property, or ``None`` when it is not plain."""
    if not isinstance(schema, Mapping) or not _PROPERTY_KEYWORDS.issuperset(schema):
        return None
    kind = schema.get("type")
    if kind is not None and type(kind) is not str:
        return None  # a list of types
    lengths = "minLength" in schema or "maxLength" in schema
    ranges = "minimum" in schema or "maximum" in schema
    if "enum" in schema:
        choices = schema["enum"]
        if kind not in (None, "string") or lengths or ranges or not isinstance(choices, list):
            return None
        if not choices or not all(type(choice) is str for choice in choices):
            return None
        return str, None, None, frozenset(choices), False
    if kind == "string" and not ranges:
        if not lengths:
            return str, None, None, None, False
        low, high = schema.get("minLength", 0), schema.get("maxLength", sys.maxsize)
        if type(low) is not int or type(high) is not int:
            return None
        return str, low, high, None, True
    if kind == "boolean" and not lengths and not ranges:
        return bool, None, None, None, False
    if kind in _NUMBER_TYPES and not lengths:
        # Always bounded (by infinities at most), so that NaN goes to the validator.
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        if type(low) not in (int, float) or type(high) not in (int, float):
            return None
        if math.isnan(low) or math.isnan(high):
            return None
        return _NUMBER_TYPES[kind], low, high, None, False
    return None


def _accept_with(rules: dict[str, _Rule], required: tuple[str, ...], closed: bool) -> _Acceptor:
    def accept(arguments: dict[str, Any]) -> bool:
        for name in required:
            if name not in arguments:
                return False
        for key, value in arguments.items():
            rule = rules.get(key)
            if rule is None:
                if closed:
                    return False
                continue
            exact, low, high, choices, sized = rule
            # Exact types only: a subclass, a Decimal or an integral float is
            # for the validator to judge. Chained comparisons are False for NaN.
            of = type(value)
            if of is not exact and (exact is not float or of is not int):
                return False
            if choices is not None:
                if value not in choices:
                    return False
            elif low is not None and not low <= (len(value) if sized else value) <= high:
                return False
        return True

    return accept


def redacting_acceptor(declared: Tool, redactor: Redactor) -> RedactingAcceptor | None:
    """The tool's quick accept fused with ``redactor``'s argument redaction, or
    ``None`` when the two cannot be fused.

    Every call's arguments are checked and then redacted for its span: two
    passes over the same keys. For a closed schema of plain fields whose keys
    each get a fixed treatment (``Redactor._key_plan``), one pass does both:
    it returns exactly ``redactor.arguments(arguments)`` when the quick accept
    says "valid", and ``None`` (ask the validator, then redact) otherwise.
    """
    rules = declared._accept_rules
    if rules is None or not rules[2]:
        return None  # no quick rules, or other keys allowed: their redaction varies
    by_name, required, _ = rules
    secret = redactor._key_plan(by_name)
    if secret is None:
        return None
    checks = {name: (*rule, secret[name]) for name, rule in by_name.items()}
    # Scrubbed texts are looked up in the redactor's cache first, as its own
    # ``arguments`` does: a hit costs no call.
    texts, text = redactor._texts, redactor.text

    def accept(arguments: dict[str, Any]) -> dict[str, Any] | None:
        redacted: dict[str, Any] = {}
        for key, value in arguments.items():
            check = checks.get(key)
            if check is None:
                return None
            exact, low, high, choices, sized, is_secret = check
            # The quick accept's rule (see ``_accept_with``), then the redaction.
            of = type(value)
            if of is not exact and (exact is not float or of is not int):
                return None
            if choices is not None:
                if value not in choices:
                    return None
            elif low is not None and not low <= (len(value) if sized else value) <= high:
                return None
            if is_secret:
                redacted[key] = REDACTED
            elif of is str:
                scrubbed = texts.get(value)
                redacted[key] = scrubbed if scrubbed is not None else text(value)
            else:
                redacted[key] = value
        for name in required:
            if name not in arguments:
                return None
        return redacted

    return accept


def explain_schema_errors(schema: Mapping[str, Any], instance: Any) -> str:
    """Name every failing field, without echoing values (they may be secrets)."""
    validator = jsonschema.validators.validator_for(schema)(schema, registry=_NO_RETRIEVAL)
    try:
        errors = sorted(validator.iter_errors(instance), key=lambda err: list(err.path))
    except referencing.exceptions.Unresolvable:
        return "invalid arguments (the schema refers outside itself, which is not followed)"
    problems = []
    for error in errors:
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.path)
        field_name = where.lstrip(".") or "(arguments)"
        problems.append(_describe(field_name, error))
    return "invalid arguments: " + "; ".join(problems[:10]) if problems else "invalid arguments"


def _describe(field_name: str, error: Any) -> str:
    rule, expected = error.validator, error.validator_value
    if rule == "required":
        missing = [name for name in expected if name not in (error.instance or {})]
        return "missing required field(s) " + ", ".join(repr(name) for name in missing)
    if rule == "additionalProperties":
        # Field names only (the model chose them), never their values.
        known = set((error.schema or {}).get("properties") or ())
        extra = [name for name in (error.instance or {}) if name not in known]
        return f"{field_name}: unexpected field(s) " + ", ".join(repr(n) for n in extra[:10])
    if rule in ("type", "enum", "const", "format", "pattern"):
        return f"{field_name}: must match {rule} {expected!r}"
    return f"{field_name}: fails {rule} {expected!r}"
