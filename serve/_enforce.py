"""Findings that act: ``toolspan serve --enforce STORE`` quarantines what they name.

The live analyser hands each new finding to :class:`Enforcer`, which writes a
quarantine into the store the executors share (see ``toolspan.tracer``'s
``Quarantine``); every executor on that store then refuses the matching calls
with ``quarantined`` until the quarantine's TTL ends or someone lifts it
(``toolspan quarantine lift``, or the dashboard).

What each finding kind quarantines is a policy: by default a ``loop`` or a
``duplicate_write`` stops that tool in that conversation for an hour;
``--enforce-policy FILE`` (TOML, one table per kind: ``scope`` and ``ttl_s``)
changes it. A store that fails is logged and skipped: enforcing never stops
the receiver.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import ServeError
from ..analyzer import FINDING_KINDS, Finding
from ..tracer import Quarantine, add_quarantine
from ..tracer.store import IdempotencyStore, StoreError

__all__ = ["DEFAULT_POLICY", "Enforcer", "Rule", "read_policy"]

SCOPES = ("conversation_tool", "conversation", "tool")


@dataclass(frozen=True)
class Rule:
    """What a finding of one kind quarantines, and for how long."""

    scope: str = "conversation_tool"
    ttl_s: float = 3600.0


DEFAULT_POLICY: Mapping[str, Rule] = {"loop": Rule(), "duplicate_write": Rule()}


def read_policy(path: Path) -> dict[str, Rule]:
    """A policy file: ``[loop]\\nscope = "conversation_tool"\\nttl_s = 600`` per kind."""
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ServeError(f"--enforce-policy {path}: {exc}") from exc
    policy: dict[str, Rule] = {}
    for kind, table in tables.items():
        if kind not in FINDING_KINDS:
            raise ServeError(f"--enforce-policy {path}: unknown finding kind {kind!r}")
        if not isinstance(table, dict) or set(table) - {"scope", "ttl_s"}:
            raise ServeError(f"--enforce-policy {path}: [{kind}] takes scope and ttl_s only")
        rule = Rule(
            scope=str(table.get("scope", "conversation_tool")),
            ttl_s=float(table.get("ttl_s", 3600.0)),
        )
        if rule.scope not in SCOPES or rule.ttl_s <= 0:
            raise ServeError(
                f"--enforce-policy {path}: [{kind}] scope is one of {', '.join(SCOPES)} "
                "and ttl_s is positive"
            )
        policy[kind] = rule
    return policy


class Enforcer:
    """A live-analyser listener that writes a quarantine per enforced finding."""

    def __init__(
        self,
        store: IdempotencyStore,
        policy: Mapping[str, Rule] = DEFAULT_POLICY,
        *,
        log: Callable[[str], None] = print,
    ) -> None:
        self.store = store
        self.policy = dict(policy)
        self._log = log

    def submit(self, findings: Sequence[Finding]) -> None:
        for finding in findings:
            rule = self.policy.get(finding.kind)
            if rule is None:
                continue
            try:
                written = _quarantine_for(finding, rule, self.store)
            except StoreError as exc:
                self._log(f"toolspan serve: could not write a quarantine: {exc}")
                continue
            if written is None:
                continue
            self._log(
                f"toolspan serve: quarantined {written.scope} "
                f"(conversation {written.conversation_id}, tool {written.tool}) "
                f"for {rule.ttl_s:g} s: {written.reason}"
            )


def _quarantine_for(finding: Finding, rule: Rule, store: IdempotencyStore) -> Quarantine | None:
    if rule.scope != "conversation" and finding.tool is None:
        return None  # a finding over several tools names no one tool to stop
    explanation = finding.detail.get("explanation")
    return add_quarantine(
        store,
        reason=f"{finding.kind}: {explanation}" if explanation else finding.kind,
        ttl_s=rule.ttl_s,
        conversation_id=None if rule.scope == "tool" else finding.conversation_id,
        tool=None if rule.scope == "conversation" else finding.tool,
        finding=finding.kind,
        # Spans of calls made before a lift arrive after it: they do not undo it.
        evidence_at=finding.last_seen.timestamp(),
    )
