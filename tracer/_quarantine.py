"""Quarantines: calls a live finding stopped, for every executor sharing a store.

``toolspan serve --enforce STORE`` writes one when a finding says a model is
doing damage (a loop, a duplicate write); every executor whose
:class:`~toolspan.tracer.Safeguards` use that store refuses matching calls
with the status ``quarantined`` until the quarantine expires or is lifted
(``toolspan quarantine lift``).

All quarantines live in one store record (``quarantine:index``, a JSON list)
that is absent when there are none, so the check costs an executor one store
read per call. Writers (``serve`` adding, a person lifting) take turns under a
lease in the same store, so a lift is never undone by a write that read the
record before it. A lift is remembered for as long as the lifted quarantine
would have lasted: evidence older than the lift (spans of calls made before
it, arriving late) does not quarantine the same target again.

Fail-open: a store that cannot be read never blocks a call; the failure is
logged once per process.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import orjson

from .store import IdempotencyStore, StoreError

__all__ = [
    "INDEX_NAME",
    "Quarantine",
    "add_quarantine",
    "find_quarantine",
    "lift_quarantines",
    "list_quarantines",
]

INDEX_NAME = "quarantine:index"
LIFTED_NAME = "quarantine:lifted"  # {target: [lifted at, remembered until]}
WRITER_KEY = "quarantine:writer"  # the lease writers take turns under
WRITER_LEASE_S = 10.0  # a writer that died holding it blocks others this long
WRITER_WAIT_S = 15.0
_log = logging.getLogger("toolspan.tracer")
_warned = threading.Event()


@dataclass(frozen=True, slots=True)
class Quarantine:
    """Calls refused until ``until`` (epoch seconds). A field left ``None``
    matches everything: ``conversation_id`` and ``tool`` set stop one tool in
    one conversation; ``call_identity`` (``tool:args_hash``) narrows it to the
    same arguments, ``resource`` to the calls touching one resource (the tool's
    ``resource_key``); ``tool`` alone stops it fleet-wide."""

    reason: str
    until: float
    conversation_id: str | None = None
    tool: str | None = None
    call_identity: str | None = None  # tool:args_hash
    resource: str | None = None  # the tool's resource_key of the arguments
    finding: str | None = None  # the finding kind that wrote it, if any
    id: str = ""
    since: float = 0.0  # when it was first written (epoch seconds)

    @property
    def scope(self) -> str:
        """What it stops: ``call``, ``resource``, ``conversation_tool``, ``tool``,
        ``conversation`` or ``everything``."""
        if self.call_identity is not None:
            return "call"
        if self.resource is not None:
            return "resource"
        if self.tool is not None:
            return "conversation_tool" if self.conversation_id is not None else "tool"
        return "conversation" if self.conversation_id is not None else "everything"

    def matches(
        self, conversation_id: str, tool: str, call_identity: str, resource: str | None = None
    ) -> bool:
        return (
            (self.conversation_id is None or self.conversation_id == conversation_id)
            and (self.tool is None or self.tool == tool)
            and (self.call_identity is None or self.call_identity == call_identity)
            and (self.resource is None or self.resource == resource)
        )

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def find_quarantine(
    store: IdempotencyStore,
    conversation_id: str,
    tool: str,
    call_identity: str,
    resource: str | None = None,
    *,
    now: float | None = None,
) -> Quarantine | None:
    """The quarantine that refuses this call, or None (also when the store fails)."""
    try:
        raw = store.get(INDEX_NAME)
    except StoreError:
        if not _warned.is_set():
            _warned.set()
            _log.warning("quarantines could not be read from the store; calls are let through")
        return None
    if raw is None:
        return None
    moment = _now(store) if now is None else now
    for quarantine in _parse(raw):
        if quarantine.until > moment and quarantine.matches(
            conversation_id, tool, call_identity, resource
        ):
            return quarantine
    return None


def list_quarantines(store: IdempotencyStore, *, now: float | None = None) -> list[Quarantine]:
    """The quarantines in force (raises ``StoreError`` when the store fails)."""
    moment = _now(store) if now is None else now
    raw = store.get(INDEX_NAME)
    return [q for q in _parse(raw) if q.until > moment] if raw is not None else []


def add_quarantine(
    store: IdempotencyStore,
    *,
    reason: str,
    ttl_s: float,
    conversation_id: str | None = None,
    tool: str | None = None,
    call_identity: str | None = None,
    resource: str | None = None,
    finding: str | None = None,
    evidence_at: float | None = None,
    now: float | None = None,
) -> Quarantine | None:
    """Refuse the matching calls for ``ttl_s`` seconds and return the quarantine
    in force. One already in force on the same target keeps its id (what a
    person lifting it was shown) and its first reason, and lasts the longer.

    ``evidence_at`` (epoch seconds) is when what calls for the quarantine was
    last seen: a target lifted after that is left alone (returns None), since
    a person already judged that evidence."""
    if ttl_s <= 0:
        raise ValueError("a quarantine needs a positive ttl_s")
    with _writing(store):
        return _add(
            store,
            Quarantine(reason, 0.0, conversation_id, tool, call_identity, resource, finding),
            ttl_s,
            evidence_at,
            _now(store) if now is None else now,
        )


def _add(
    store: IdempotencyStore,
    asked: Quarantine,
    ttl_s: float,
    evidence_at: float | None,
    moment: float,
) -> Quarantine | None:
    target = _target(asked)
    if evidence_at is not None and _lifted_at(store, target, moment) >= evidence_at:
        return None
    current = list_quarantines(store, now=moment)
    earlier = next((q for q in current if _target(q) == target), None)
    quarantine = Quarantine(
        reason=earlier.reason if earlier else asked.reason,
        until=max(moment + ttl_s, earlier.until if earlier else 0.0),
        conversation_id=asked.conversation_id,
        tool=asked.tool,
        call_identity=asked.call_identity,
        resource=asked.resource,
        finding=earlier.finding if earlier else asked.finding,
        id=earlier.id if earlier else uuid.uuid4().hex[:12],
        since=earlier.since if earlier else moment,
    )
    _write(store, [q for q in current if q is not earlier] + [quarantine], moment)
    return quarantine


def lift_quarantines(
    store: IdempotencyStore, ids: set[str] | None = None, *, now: float | None = None
) -> list[Quarantine]:
    """Lift the quarantines with these ids (every one when ``ids`` is None);
    return those lifted."""
    with _writing(store):
        moment = _now(store) if now is None else now
        current = list_quarantines(store, now=moment)
        lifted = [q for q in current if ids is None or q.id in ids]
        _remember_lifts(store, lifted, moment)
        _write(store, [q for q in current if q not in lifted], moment)
        return lifted


@contextlib.contextmanager
def _writing(
    store: IdempotencyStore,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """Hold the writers' lease: one read-modify-write of the record at a time."""
    deadline = clock() + WRITER_WAIT_S
    token = _take_turn(store)
    while token is None:
        if clock() > deadline:
            raise StoreError(f"another writer has held {WRITER_KEY!r} for {WRITER_WAIT_S:g} s")
        sleep(0.01)  # a writer holds it for one read and one write
        token = _take_turn(store)
    try:
        yield
    finally:
        store.release(WRITER_KEY, token)


def _take_turn(store: IdempotencyStore) -> str | None:
    # A lease, not a lock: a writer that dies holding it stops others only briefly.
    return store.claim(WRITER_KEY, "writer", lease_s=WRITER_LEASE_S, ttl_s=WRITER_LEASE_S).token


def _lifted_at(store: IdempotencyStore, target: tuple[str | None, ...], now: float) -> float:
    """When this target was last lifted (0 when it was not, or long ago)."""
    entry = _lifts(store).get(_target_name(target))
    return entry[0] if entry is not None and entry[1] > now else 0.0


def _remember_lifts(store: IdempotencyStore, lifted: list[Quarantine], now: float) -> None:
    if not lifted:
        return
    lifts = {name: entry for name, entry in _lifts(store).items() if entry[1] > now}
    for q in lifted:
        lifts[_target_name(_target(q))] = (now, q.until)
    raw = orjson.dumps({name: list(entry) for name, entry in lifts.items()}).decode()
    store.put(LIFTED_NAME, raw, ttl_s=max(until for _, until in lifts.values()) - now)


def _lifts(store: IdempotencyStore) -> dict[str, tuple[float, float]]:
    raw = store.get(LIFTED_NAME)
    try:
        items = orjson.loads(raw) if raw is not None else {}
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(items, dict):
        return {}
    return {
        str(name): (float(entry[0]), float(entry[1]))
        for name, entry in items.items()
        if isinstance(entry, list) and len(entry) == 2
    }


def _target_name(target: tuple[str | None, ...]) -> str:
    return orjson.dumps(list(target)).decode()


def _now(store: IdempotencyStore) -> float:
    # Expiry counts on the store's own clock, as its TTLs do; a store of the
    # user's own without one counts on this machine's.
    clock = getattr(store, "now", None)
    return float(clock()) if callable(clock) else time.time()


def _write(store: IdempotencyStore, quarantines: list[Quarantine], now: float) -> None:
    if not quarantines:
        store.delete(INDEX_NAME)
        return
    raw = orjson.dumps([q.to_json() for q in quarantines]).decode()
    # The record outlives its last quarantine by nothing: absent means none.
    store.put(INDEX_NAME, raw, ttl_s=max(q.until for q in quarantines) - now)


def _target(q: Quarantine) -> tuple[str | None, ...]:
    return (q.conversation_id, q.tool, q.call_identity, q.resource)


# Every call of every executor reads the same record: parse each version once.
@functools.lru_cache(maxsize=16)
def _parse(raw: str) -> tuple[Quarantine, ...]:
    try:
        items = orjson.loads(raw)
    except orjson.JSONDecodeError:
        _log.warning("the store's quarantine record is not JSON; it is ignored")
        return ()
    parsed = []
    for item in items if isinstance(items, list) else ():
        try:
            parsed.append(Quarantine(**item))
        except TypeError:
            continue  # a record from a newer toolspan: skip what this one cannot read
    return tuple(parsed)
