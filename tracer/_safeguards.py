"""Writes that never happen twice, and guards for the whole turn and conversation.

:class:`Safeguards` sits between the executor and an
:class:`~toolspan.tracer.store.IdempotencyStore`:

* **idempotency**: a keyed write claims its key before it runs. A completed
  key with the same arguments replays the stored result without executing;
  other arguments are an ``idempotency_conflict``; a live owner elsewhere
  means ``in_progress``. A key whose earlier outcome is unknown (its worker
  died, or its last failure was ambiguous) is read back before executing.
* **turn budget**: attempts per logical action within one user request.
* **loop guard**: a call that already got the same answer N times in a row
  in this conversation is refused with ``loop_blocked``.
* **who retried**: a call repeating a failed call of the same conversation
  is marked as a model-initiated retry of it.

All state lives in the store, so every guard holds across workers.
"""

from __future__ import annotations

from dataclasses import dataclass

from .store import Claim, IdempotencyStore

__all__ = ["Safeguards"]

_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Safeguards:
    """Settings for the store-backed guards; pass to an executor as ``safeguards``.

    ``max_attempts_per_action`` caps attempts of one logical action within
    one user request (``request_id``): by default 3 automatic retries plus 1
    model repair on top of the first attempt. ``loop_threshold`` is how many
    identical answers to an identical call make the next one a loop.
    ``lease_s`` is how long an in-flight key stays owned without renewal
    before another worker may take it over. ``detect_store_loss``: after the
    store lost data (see the store's epoch marker), a key it cannot find is
    read back before executing, or refused with ``store_unavailable`` when the
    tool has no read-back and the service does not honour keys; ``False``
    trusts the store as it is (for measurements, or a store you know is durable).
    """

    store: IdempotencyStore
    lease_s: float = 120.0
    result_ttl_s: float = 24 * _HOUR
    max_attempts_per_action: int | None = 5
    loop_threshold: int | None = 3
    guard_ttl_s: float = 24 * _HOUR
    detect_store_loss: bool = True

    # -- idempotency ----------------------------------------------------------

    def claim(self, key: str, fingerprint: str) -> Claim:
        return self.store.claim(key, fingerprint, lease_s=self.lease_s, ttl_s=self.result_ttl_s)

    def outcome_unknown(self, key: str) -> bool:
        """True when an earlier run of ``key`` ended without knowing its effect."""
        return self.store.get(_unknown_name(key)) is not None

    def mark_unknown(self, key: str, call_id: str) -> None:
        self.store.put(_unknown_name(key), call_id, ttl_s=self.result_ttl_s)

    def complete(self, key: str, token: str, result: bytes) -> bool:
        stored = self.store.complete(key, token, result, ttl_s=self.result_ttl_s)
        self.store.delete(_unknown_name(key))
        return stored

    def release(self, key: str, token: str) -> None:
        self.store.release(key, token)

    def renew(self, key: str, token: str) -> bool:
        return self.store.extend(key, token, lease_s=self.lease_s)

    # -- turn budget ----------------------------------------------------------

    def spend_attempt(self, request_id: str, action: str) -> bool:
        """Count one attempt of ``action`` in this request; False when over budget."""
        if self.max_attempts_per_action is None or not request_id:
            return True
        used = self.store.incr(f"turn:{request_id}:{action}", ttl_s=self.guard_ttl_s)
        return used <= self.max_attempts_per_action

    # -- loop guard -----------------------------------------------------------

    def is_loop(self, conversation_id: str, call_fingerprint: str) -> bool:
        if self.loop_threshold is None:
            return False
        seen = self.store.answer_count(f"loop:{conversation_id}:{call_fingerprint}")
        return seen is not None and seen[1] >= self.loop_threshold

    def record_answer(self, conversation_id: str, call_fingerprint: str, answer: str) -> None:
        if self.loop_threshold is not None:
            self.store.record_answer(
                f"loop:{conversation_id}:{call_fingerprint}", answer, ttl_s=self.guard_ttl_s
            )

    # -- who retried ------------------------------------------------------------

    def repeated_failure(self, conversation_id: str, call_fingerprint: str) -> str | None:
        """The call id of a failed identical call in this conversation, if any."""
        return self.store.get(f"failed:{conversation_id}:{call_fingerprint}")

    def remember_outcome(
        self, conversation_id: str, call_fingerprint: str, call_id: str, ok: bool
    ) -> None:
        name = f"failed:{conversation_id}:{call_fingerprint}"
        if ok:
            self.store.delete(name)
        else:
            self.store.put(name, call_id, ttl_s=self.guard_ttl_s)

    # -- read back before repeating -----------------------------------------------
    # An unkeyed write that ended unknown may have happened. Its exact repeat in
    # the conversation waits until the write's check tool has succeeded there
    # since. The check is a counter per (conversation, check tool): the pending
    # record holds the count it saw, and any later success moves the count on.

    def await_check(self, conversation_id: str, call_identity: str, check_tool: str | None) -> None:
        seen = self.store.incr(
            _checks_name(conversation_id, check_tool), ttl_s=self.guard_ttl_s, by=0
        )
        self.store.put(
            _awaiting_name(conversation_id, call_identity),
            f"{seen}:{check_tool or ''}",
            ttl_s=self.guard_ttl_s,
        )

    def check_state(self, conversation_id: str, call_identity: str) -> str | None:
        """``"waiting"`` while the exact repeat of an unknown write must not run yet,
        ``"checked"`` once its check tool has succeeded since, ``None`` if nothing is pending."""
        pending = self.store.get(_awaiting_name(conversation_id, call_identity))
        if pending is None:
            return None
        seen, _, check_tool = pending.partition(":")
        if not check_tool:
            return "waiting"
        name = _checks_name(conversation_id, check_tool)
        now = self.store.incr(name, ttl_s=self.guard_ttl_s, by=0)
        return "waiting" if now <= int(seen) else "checked"

    def note_checked(self, conversation_id: str, check_tool: str) -> None:
        self.store.incr(_checks_name(conversation_id, check_tool), ttl_s=self.guard_ttl_s)

    def forget_check(self, conversation_id: str, call_identity: str) -> None:
        self.store.delete(_awaiting_name(conversation_id, call_identity))


def _awaiting_name(conversation_id: str, call_identity: str) -> str:
    return f"awaiting_check:{conversation_id}:{call_identity}"


def _checks_name(conversation_id: str, check_tool: str | None) -> str:
    return f"checks:{conversation_id}:{check_tool or ''}"


def _unknown_name(key: str) -> str:
    return f"unknown:{key}"
