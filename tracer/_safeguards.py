"""Writes that never happen twice, and guards for the whole turn and conversation.

:class:`Safeguards` sits between the executor and an
:class:`~toolspan.tracer.store.IdempotencyStore`:

* **idempotency**: a keyed write claims its key before it runs. A completed
  key with the same arguments replays the stored result without executing;
  other arguments are an ``idempotency_conflict``; a live owner elsewhere
  means ``in_progress``. A key whose earlier outcome is unknown (its worker
  died, or its last failure was ambiguous) is read back before executing.
* **turn budget**: attempts per logical action within one delivery of a user
  request (see ``_run``: a queue's redelivery starts afresh).
* **loop guard**: a call that already got the same answer N times in a row
  within one delivery of its request (in the conversation, for calls with no
  request id) is refused with ``loop_blocked``.
* **who retried**: a call repeating a failed call of the same conversation
  is marked as a model-initiated retry of it.

All state lives in the store, so every guard holds across workers that share
it. An executor given no ``safeguards`` keeps them in its own process's memory
(:meth:`Safeguards.in_memory`); ``safeguards=None`` turns them off. The
executor speaks to the store only through the methods here: they are the
store protocol (claims, leases, settling a claim, unknown effects, answers).

Words used here and in the executor: a call's **identity** is
``tool:args_hash`` (what makes two calls with different call ids "the same
call"); a keyed write's **fingerprint** is the digest of its raw arguments,
kept with the key to tell a replay from a conflict; a claim is **settled**
when it is completed (result stored) or released; a write's **effect is
unknown** when it may or may not have happened.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from .store import Claim, IdempotencyStore, MemoryStore, StoreError

__all__ = ["Safeguards"]

_HOUR = 3600.0
_log = logging.getLogger("toolspan.tracer")

# Refusals that never ran the tool are no answer: polling a key in flight
# elsewhere must not turn into a loop.
_NOT_ANSWERS: frozenset[str] = frozenset(
    {
        "loop_blocked",
        "in_progress",
        "store_unavailable",
        "turn_budget",
        "read_back_required",
        "circuit_open",
        "quarantined",
    }
)


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
    ``guard_reads=False`` exempts reads (``side_effect="none"``), and the tools
    named in ``unguarded_tools``, from the loop guard and the turn budget: a
    client that polls a read gets every answer, while writes stay guarded (the
    MCP proxy's default, for long-lived clients; it names the tools a server
    annotates read-only, which it does not retry unless told to trust them).
    """

    store: IdempotencyStore
    lease_s: float = 120.0
    result_ttl_s: float = 24 * _HOUR
    max_attempts_per_action: int | None = 5
    loop_threshold: int | None = 3
    guard_ttl_s: float = 24 * _HOUR
    detect_store_loss: bool = True
    guard_reads: bool = True
    unguarded_tools: frozenset[str] = frozenset()

    @classmethod
    def in_memory(cls) -> Safeguards:
        """The guards an executor keeps when given no ``safeguards``: in this
        process's memory (a :class:`~toolspan.tracer.store.MemoryStore`), so an
        unknown outcome still waits for a read-back, loops are still refused and
        the turn budget still counts, within one process. Guard state lives an
        hour (conversations rarely last longer; memory stays bounded); a store
        that starts empty is expected here, so store loss is not looked for.
        """
        return cls(store=MemoryStore(), guard_ttl_s=_HOUR, detect_store_loss=False)

    # -- idempotency ----------------------------------------------------------

    def claim(self, key: str, fingerprint: str, lease_s: float | None = None) -> Claim:
        """Claim ``key`` for a write with these arguments (see ``store.Claim``).

        ``lease_s`` overrides `lease_s` for one tool (see `lease_for`)."""
        return self.store.claim(
            key, fingerprint, lease_s=lease_s or self.lease_s, ttl_s=self.result_ttl_s
        )

    def lease_for(self, commit_window_s: float, attempt_timeout_s: float | None = None) -> float:
        """The lease of a tool whose service may commit ``commit_window_s`` after an
        attempt ended: long enough that a worker that dies holding the key (its last
        renewal up to a third of a lease before) is taken over only once its request
        can no longer commit. With ``attempt_timeout_s`` (the longest a request is in
        flight) the lease taken right before an attempt also outlasts that request
        and its window, so a live owner whose renewals fail cannot be raced either."""
        bound = 0.0 if attempt_timeout_s is None else attempt_timeout_s + commit_window_s
        return max(self.lease_s, 1.5 * commit_window_s, bound)

    def must_read_back(self, key: str, claim: Claim) -> bool:
        """True when the claimed key must be read back before it runs: it was
        taken over from a dead worker, or an earlier run's effect is unknown."""
        return claim.outcome == "takeover" or self.effect_unknown(key)

    def effect_unknown(self, key: str) -> bool:
        """True when an earlier run of ``key`` ended without knowing its effect."""
        return self.store.get(_unknown_name(key)) is not None

    def mark_effect_unknown(self, key: str, call_id: str) -> None:
        """Whoever runs ``key`` next reads back first (``call_id`` ran it last)."""
        self.store.put(_unknown_name(key), call_id, ttl_s=self.result_ttl_s)

    def complete(self, key: str, token: str, result: bytes) -> bool:
        """Store the result of a claimed key: later claims replay it."""
        stored = self.store.complete(key, token, result, ttl_s=self.result_ttl_s)
        self.store.delete(_unknown_name(key))
        return stored

    def release(self, key: str, token: str) -> None:
        """Give a claimed key up without a result: the next claim may run it."""
        self.store.release(key, token)

    def settle(
        self,
        key: str,
        token: str,
        call_id: str,
        *,
        result: bytes | None,
        effect_unknown: bool,
        binds: bool = True,
        hold_s: float | None = None,
    ) -> None:
        """Settle a claim: complete it with ``result``, or give it up, marking its
        effect unknown first when the write may have happened.

        ``binds=False``: the claim's arguments may not be the key's (the store lost
        its record), so nothing is kept under them: the claim is released.
        ``hold_s``: a request for the key may still commit for this long, so the
        claim is held (in flight, no attempt running) until then, whatever else."""
        if result is not None and binds:
            self.complete(key, token, result)
            return
        if hold_s is not None:
            if effect_unknown:
                self.mark_effect_unknown(key, call_id)
            # Nobody runs the key until then; after it, the next claim is a takeover
            # that reads back, and then absence means the write did not happen.
            self.store.extend(key, token, lease_s=hold_s)
            return
        if effect_unknown:
            # Never drop a failed write silently: whoever runs this key next reads back.
            self.mark_effect_unknown(key, call_id)
            if binds:
                # The key keeps its arguments: a reuse with other ones is a conflict.
                self.store.lapse(key, token)
                return
        self.release(key, token)

    def abandon(self, key: str, token: str, call_id: str) -> None:
        """After a crash: the write may have happened, so read back next time (a
        claim settled with its effect unknown), logging a store failure rather
        than hiding the crash behind it."""
        try:
            self.settle(key, token, call_id, result=None, effect_unknown=True)
        except StoreError:
            _log.warning("could not settle an idempotency key after a crash")

    def renew(self, key: str, token: str, lease_s: float | None = None) -> bool:
        """Extend a claim's lease; False when another worker took the key over."""
        return self.store.extend(key, token, lease_s=lease_s or self.lease_s)

    def keep_lease(self, key: str, token: str, lease_s: float | None = None) -> LeaseKeeper:
        """Renew the lease in the background while one attempt runs."""
        return LeaseKeeper(self, key, token, lease_s or self.lease_s)

    def budgets(self, tool: str, is_write: bool) -> bool:
        """True when the loop guard and the turn budget count calls of this tool."""
        return self.guard_reads or (is_write and tool not in self.unguarded_tools)

    # -- turn budget ----------------------------------------------------------

    def spend_attempt(self, request_id: str, action: str, *, delivery: str = "") -> bool:
        """Count one attempt of ``action`` in this delivery of this request; False
        when over budget."""
        if self.max_attempts_per_action is None or not request_id:
            return True
        name = (
            f"turn:{request_id}:{delivery}:{action}" if delivery else f"turn:{request_id}:{action}"
        )
        used = self.store.incr(name, ttl_s=self.guard_ttl_s)
        return used <= self.max_attempts_per_action

    # -- loop guard -----------------------------------------------------------

    def is_loop(self, conversation_id: str, call_identity: str, within: str = "") -> bool:
        """True when this call already got the same answer ``loop_threshold`` times in
        a row (``within``: one delivery of a request, else the whole conversation)."""
        if self.loop_threshold is None:
            return False
        seen = self.store.answer_count(_loop_name(conversation_id, call_identity, within))
        return seen is not None and seen[1] >= self.loop_threshold

    def record_answer(
        self, conversation_id: str, call_identity: str, answer: str, within: str = ""
    ) -> None:
        """Count one answer to this call (same answers in a row make a loop)."""
        if self.loop_threshold is not None:
            self.store.record_answer(
                _loop_name(conversation_id, call_identity, within), answer, ttl_s=self.guard_ttl_s
            )

    # -- who retried ------------------------------------------------------------

    def repeated_failure(self, conversation_id: str, call_identity: str) -> str | None:
        """The call id of a failed identical call in this conversation, if any."""
        return self.store.get(f"failed:{conversation_id}:{call_identity}")

    def remember_failure(
        self, conversation_id: str, call_identity: str, call_id: str, ok: bool
    ) -> None:
        """Remember a failed call (so a repeat is marked as the model's retry), forget a success."""
        name = f"failed:{conversation_id}:{call_identity}"
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

    def hold_write(
        self, conversation_id: str, call_identity: str, call_id: str, hold_s: float
    ) -> None:
        """Refuse repeats of this unkeyed write for ``hold_s``: its last request may
        still commit, so no check or read-back can tell yet."""
        self.store.put(_pending_name(conversation_id, call_identity), call_id, ttl_s=hold_s)

    def write_pending(self, conversation_id: str, call_identity: str) -> bool:
        """True while `hold_write` holds this unkeyed write."""
        return self.store.get(_pending_name(conversation_id, call_identity)) is not None

    def note_checked(self, conversation_id: str, check_tool: str) -> None:
        self.store.incr(_checks_name(conversation_id, check_tool), ttl_s=self.guard_ttl_s)

    def forget_check(self, conversation_id: str, call_identity: str) -> None:
        self.store.delete(_awaiting_name(conversation_id, call_identity))

    # -- after a call -------------------------------------------------------------

    def record_result(
        self,
        conversation_id: str,
        call_identity: str,
        call_id: str,
        status: str,
        answer: str,
        ok: bool,
        *,
        counted: bool = True,
        within: str = "",
    ) -> None:
        """The loop guard's answer (unless not ``counted``, see `budgets`) and the
        who-retried memory for one final result."""
        if status in _NOT_ANSWERS:
            return
        if counted:
            self.record_answer(conversation_id, call_identity, answer, within)
        self.remember_failure(conversation_id, call_identity, call_id, ok)


class LeaseKeeper:
    """Renews a claimed key's lease while one slow attempt runs.

    Without it an attempt longer than the lease would let another worker
    take the key over and run the write a second time.
    """

    def __init__(self, guards: Safeguards, key: str, token: str, lease_s: float) -> None:
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._renew,
            args=(guards, key, token, lease_s),
            name="toolspan-lease",
            daemon=True,
        )
        self._thread.start()

    def _renew(self, guards: Safeguards, key: str, token: str, lease_s: float) -> None:
        while not self._stopped.wait(lease_s / 3):
            try:
                if not guards.renew(key, token, lease_s):
                    return  # taken over: nothing left to keep
            except StoreError:
                _log.warning("could not renew the lease of an idempotency key")

    def stop(self) -> None:
        """The attempt is over: stop renewing."""
        self._stopped.set()


def _loop_name(conversation_id: str, call_identity: str, within: str) -> str:
    if within:
        return f"loop:{conversation_id}:{within}:{call_identity}"
    return f"loop:{conversation_id}:{call_identity}"


def _awaiting_name(conversation_id: str, call_identity: str) -> str:
    return f"awaiting_check:{conversation_id}:{call_identity}"


def _checks_name(conversation_id: str, check_tool: str | None) -> str:
    return f"checks:{conversation_id}:{check_tool or ''}"


def _pending_name(conversation_id: str, call_identity: str) -> str:
    return f"pending_write:{conversation_id}:{call_identity}"


def _unknown_name(key: str) -> str:
    return f"unknown:{key}"
