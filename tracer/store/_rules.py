"""The claim and guard-state rules as pure functions over one record.

MemoryStore and SQLiteStore apply them inside their own critical section (a lock, a
``BEGIN IMMEDIATE`` transaction). The Redis Lua scripts implement the same rules; the
shared behaviour suite holds all three backends to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Final, Literal, TypeVar

from ._protocol import Claim, StoreError

IN_FLIGHT: Final = "in_flight"
COMPLETED: Final = "completed"
RecordState = Literal["in_flight", "completed"]
GuardKind = Literal["counter", "answer", "value"]


@dataclass(frozen=True)
class IdempotencyRecord:
    """What a store keeps under one idempotency key."""

    fingerprint: str
    state: RecordState
    token: str | None  # the owner while in flight; None once completed
    lease_until: float  # in flight: the owner's lease; completed: unused
    forget_at: float  # from this instant on the record counts as absent
    result: bytes | None  # set once completed


@dataclass(frozen=True)
class GuardRecord:
    """What a store keeps under one guard-state name."""

    kind: GuardKind
    text: str  # the answer or the value; "" for counters
    count: int  # the counter, or the answer's streak; 0 for values
    forget_at: float


_R = TypeVar("_R", IdempotencyRecord, GuardRecord)


def check_name(label: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{label} must be a non-empty string, got {type(value).__name__}")
    return value


def check_seconds(label: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{label} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{label} must be positive and finite, got {value!r}")
    return float(value)


def check_result(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError(f"result must be bytes (JSON), got {type(value).__name__}")
    return value


def live(record: _R | None, now: float) -> _R | None:
    """The record, or None once it is forgotten."""
    return record if record is not None and now < record.forget_at else None


def _in_flight(
    fingerprint: str, token: str, now: float, lease_s: float, ttl_s: float
) -> IdempotencyRecord:
    lease_until = now + lease_s
    return IdempotencyRecord(fingerprint, IN_FLIGHT, token, lease_until, lease_until + ttl_s, None)


# The fingerprint of a record claimed while the store is suspect of a loss: the key's
# arguments are unknown, so the record conflicts with none (a reuse claimed then that
# dies in flight must not lock the key's original arguments out until its TTL).
ANY_FINGERPRINT: Final = "*"


def claim(
    stored: IdempotencyRecord | None,
    fingerprint: str,
    *,
    now: float,
    lease_s: float,
    ttl_s: float,
    new_token: str,
    suspect: bool = False,
) -> tuple[Claim, IdempotencyRecord | None]:
    """The claim outcome and the record to write (None: leave the stored one as is).

    ``suspect``: the store may have lost this key (an acquired record then holds
    `ANY_FINGERPRINT`, and the claim says ``store_lost``)."""
    record = live(stored, now)
    if record is None:
        kept = ANY_FINGERPRINT if suspect else fingerprint
        fresh = _in_flight(kept, new_token, now, lease_s, ttl_s)
        return Claim("acquired", new_token, None, fingerprint, store_lost=suspect), fresh
    if record.fingerprint not in (fingerprint, ANY_FINGERPRINT):
        return Claim("conflict", None, None, record.fingerprint), None
    if record.state == COMPLETED:
        return Claim("replay", None, record.result, fingerprint), None
    if now < record.lease_until:
        return Claim("in_progress", None, None, fingerprint), None
    fresh = _in_flight(fingerprint, new_token, now, lease_s, ttl_s)
    return Claim("takeover", new_token, None, fingerprint), fresh


def owned(stored: IdempotencyRecord | None, token: str, now: float) -> IdempotencyRecord | None:
    """The record if ``token`` owns it (in flight, not forgotten), else None."""
    record = live(stored, now)
    if record is None or record.state != IN_FLIGHT or record.token != token:
        return None
    return record


def complete(
    stored: IdempotencyRecord | None, token: str, result: bytes, *, now: float, ttl_s: float
) -> IdempotencyRecord | None:
    """The completed record to write, or None when ``token`` lost ownership."""
    record = owned(stored, token, now)
    if record is None:
        return None
    return IdempotencyRecord(record.fingerprint, COMPLETED, None, 0.0, now + ttl_s, result)


def extend(
    stored: IdempotencyRecord | None, token: str, *, now: float, lease_s: float
) -> IdempotencyRecord | None:
    """The record with a renewed lease, or None when ``token`` lost ownership.

    The record stays remembered for as long after the new lease as after the old one.
    """
    record = owned(stored, token, now)
    if record is None:
        return None
    remembered_s = record.forget_at - record.lease_until
    lease_until = now + lease_s
    return replace(record, lease_until=lease_until, forget_at=lease_until + remembered_s)


def kind_mismatch(name: str, stored: str, wanted: GuardKind) -> StoreError:
    return StoreError(f"guard state {name!r} holds a {stored}, not a {wanted}")


def _of_kind(
    stored: GuardRecord | None, name: str, wanted: GuardKind, now: float
) -> GuardRecord | None:
    record = live(stored, now)
    if record is not None and record.kind != wanted:
        raise kind_mismatch(name, record.kind, wanted)
    return record


def incr(
    stored: GuardRecord | None, name: str, *, by: int, now: float, ttl_s: float
) -> GuardRecord:
    record = _of_kind(stored, name, "counter", now)
    count = (record.count if record else 0) + by
    return GuardRecord("counter", "", count, now + ttl_s)


def record_answer(
    stored: GuardRecord | None, name: str, answer: str, *, now: float, ttl_s: float
) -> GuardRecord:
    record = _of_kind(stored, name, "answer", now)
    streak = record.count + 1 if record is not None and record.text == answer else 1
    return GuardRecord("answer", answer, streak, now + ttl_s)


def put(
    stored: GuardRecord | None, name: str, value: str, *, now: float, ttl_s: float
) -> GuardRecord:
    _of_kind(stored, name, "value", now)
    return GuardRecord("value", value, 0, now + ttl_s)


def answer_count(stored: GuardRecord | None, name: str, now: float) -> tuple[str, int] | None:
    record = _of_kind(stored, name, "answer", now)
    return None if record is None else (record.text, record.count)


def value(stored: GuardRecord | None, name: str, now: float) -> str | None:
    record = _of_kind(stored, name, "value", now)
    return None if record is None else record.text


def check_by(by: object) -> int:
    if isinstance(by, bool) or not isinstance(by, int):
        raise ValueError(f"by must be an int, got {type(by).__name__}")
    return by


def check_text(label: str, text: object) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{label} must be a string, got {type(text).__name__}")
    return text


def guard_kind(stored: object) -> GuardKind:
    """A kind read back from storage, checked."""
    if stored == "counter" or stored == "answer" or stored == "value":
        return stored
    raise StoreError(f"unknown guard state kind {stored!r} in the store")


def record_state(stored: object) -> RecordState:
    """A record state read back from storage, checked."""
    if stored == "in_flight" or stored == "completed":
        return stored
    raise StoreError(f"unknown idempotency record state {stored!r} in the store")


# -- loss detection -------------------------------------------------------------------
# A store that restarts empty, is flushed, loses its last second of writes (Redis AOF
# `everysec`) or is swapped for another file forgets keys that completed. The next retry
# of such a key would find nothing and run again. So each store holds an epoch marker,
# checked and advanced inside every claim and complete: an id written on first use, a
# sequence number every claim and complete moves on, and ``lost_at``, the instant a
# client first saw the store behind what it had seen itself. Each client remembers the
# epoch id and the highest sequence it saw. Until ``lost_at`` plus the record TTL, a key
# the store cannot find may have completed before the loss.

EPOCH_NAME: Final = "toolspan:epoch"
EPOCH_FOREVER: Final = 1e300  # the marker itself never expires
# A marker written by a client that never saw the store: for this long after, a key the
# store cannot find may be one a restart forgot before any client that knew the store
# noticed (they notice at their next claim or complete, which in a busy fleet is soon).
NEWBORN_GRACE_S: Final = 60.0


# How many server runs (restarts) a marker remembers, with the sequence each came back at.
RUNS_KEPT: Final = 8


@dataclass(frozen=True)
class Epoch:
    """The store's identity marker, or a client's view of it.

    ``born_at``: when the store became suspect of being new (a client that had never
    seen it wrote the marker, or the first step after a server restart), None
    otherwise or for a marker of the earlier format. ``runs``: the last server
    processes that moved the marker (Redis's ``run_id``; none for a store that never
    restarts on its own), oldest first, each with the sequence it started from: what
    its restart kept. A client that saw the marker in one run sees, in the bases of
    the runs since, whether a restart came back behind it, however far the sequence
    moved on after.
    """

    id: str
    lost_at: float | None
    seq: int
    born_at: float | None = None
    runs: tuple[tuple[str, int], ...] = ()

    @property
    def run(self) -> str:
        """The server run that last moved the marker ("" when none is known)."""
        return self.runs[-1][0] if self.runs else ""

    def encode(self) -> str:
        lost = "" if self.lost_at is None else repr(self.lost_at)
        born = "" if self.born_at is None else repr(self.born_at)
        runs = ";".join(f"{run}:{base}" for run, base in self.runs)
        return f"{self.id}|{lost}|{self.seq}|{born}|{runs}"

    @classmethod
    def decode(cls, text: str) -> Epoch:
        try:
            epoch_id, lost, seq, *rest = text.split("|")
            if len(rest) > 2:
                raise ValueError(text)
            born, runs = (*rest, "", "")[:2]
            return cls(
                epoch_id,
                float(lost) if lost else None,
                int(seq),
                float(born) if born else None,
                tuple(_run(entry) for entry in runs.split(";") if entry),
            )
        except ValueError as exc:
            raise StoreError("the store's epoch marker is malformed") from exc

    def suspects(self, now: float, ttl_s: float) -> bool:
        """True while a key the store cannot find may have completed before the loss."""
        return self.lost_at is not None and now < self.lost_at + ttl_s

    def newborn(self, now: float, grace_s: float) -> bool:
        """True within ``grace_s`` of a marker that may hide a loss: written by a client
        that never saw the store (a store that restarted empty looks new until a client
        that knew it notices), or first moved after a server restart."""
        return self.lost_at is None and self.born_at is not None and now < self.born_at + grace_s

    def restarted_behind(self, known: Epoch) -> bool:
        """True when a restart since the run ``known`` was seen in came back behind it."""
        if known.run == self.run:
            return False
        names = [run for run, _ in self.runs]
        since = self.runs[names.index(known.run) + 1 :] if known.run in names else self.runs
        return any(base < known.seq for _, base in since)


def _run(entry: str) -> tuple[str, int]:
    run, base = entry.split(":")
    return run, int(base)


def advance_epoch(
    stored: Epoch | None, known: Epoch | None, *, now: float, new_id: str, run: str = ""
) -> tuple[Epoch, bool]:
    """The marker to write for one claim or complete, and whether this call found a loss.

    ``known`` is what this client saw last (None: it never used the store). ``run`` is
    the server process answering now (Redis's ``run_id``; "" for a store without one).
    """
    runs: tuple[tuple[str, int], ...] = ((run, 0),) if run else ()
    if stored is None:
        if known is None:  # first use, or a loss only a client that knew the store can see
            return Epoch(new_id, None, 1, born_at=now, runs=runs), False
        return Epoch(new_id, now, known.seq + 1, runs=runs), True
    if stored.run != run:
        # The first step since the server (re)started: it came back at ``stored.seq``.
        # No live client can vouch for what the others wrote last (an AOF ``everysec``
        # power cut keeps a consistent, older store), so it is suspect as a new store is.
        runs = (*stored.runs, (run, stored.seq))[-RUNS_KEPT:]
        stored = replace(stored, runs=runs, born_at=now)
    if known is None:
        return replace(stored, seq=stored.seq + 1), False
    if stored.id != known.id:
        if stored.lost_at is not None:  # another client saw the loss first
            return replace(stored, seq=max(stored.seq, known.seq) + 1), False
        # A different store than the one this client wrote to (a replaced file, or a
        # store that restarted empty and was first used by a client that never saw it).
        return replace(stored, lost_at=now, seq=max(stored.seq, known.seq) + 1), True
    # Behind what this client saw: now, or when a run since started (a rollback that
    # later steps moved past this client's sequence again still shows in its base).
    if stored.seq < known.seq or stored.restarted_behind(known):
        return replace(stored, lost_at=now, seq=max(stored.seq, known.seq) + 1), True
    return replace(stored, seq=stored.seq + 1), False
