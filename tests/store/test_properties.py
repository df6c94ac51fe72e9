"""Property tests: simulated workers interleaving claims never duplicate a side effect.

The state machine plays several workers sharing one store (one store handle each, so
SQLite and Redis go through separate connections) against a fake service that counts
real side effects. Workers follow the executor's protocol:

- execute the side effect only while holding the key (after ``acquired``, or after
  ``takeover`` when a read-back shows the effect is absent), and only before their own
  lease deadline (claim or extend time + lease_s) passes;
- on success ``complete``; on a failure that had no effect ``release``; or crash at any
  moment (the record stays until the lease runs out).

Hypothesis chooses the interleaving: which worker claims which key with which of two
argument fingerprints, executes, completes, fails, extends, crashes, and how far the
clock moves (including exactly onto a lease deadline). TTLs are longer than any run:
forgetting records is covered by the behaviour suite.

Invariants checked after every step:

1. At most one side effect per key, ever: no interleaving makes the action run twice.
2. A claim with a fingerprint other than the one stored while a record exists (in
   flight, even with an expired lease, or completed) is a ``conflict``: a conflicting
   reuse never executes and never replays someone else's result. After every step a
   probe with an unused fingerprint checks that a record exists exactly when the
   model says one does.
3. ``acquired`` only when no record exists, ``takeover`` only once the owner's lease
   has run out, ``replay`` returns exactly the completed result, and ``complete``,
   ``extend`` and ``release`` act only for the current owner's token (a reference model
   predicts every outcome; they must match exactly).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.redis_server import RedisServer
from tests.store.conftest import FakeClock
from toolspan.tracer.store import Claim, MemoryStore, SQLiteStore
from toolspan.tracer.store._base import CheckedStore

LEASE = 10.0
TTL = 1e9
WORKERS = 3
KEYS = ("order-1", "order-2")
FINGERPRINTS = ("fp-A", "fp-A", "fp-A", "fp-B")  # mostly re-plans, some conflicting reuse


@dataclass
class Holding:
    """What a worker believes about a key it owns."""

    token: str
    fingerprint: str
    deadline: float  # its own lease deadline
    effect_present: bool  # it executed, or its read-back found the effect


@dataclass
class ModelRecord:
    """The reference model of the record under a key."""

    fingerprint: str
    owner_token: str | None  # None once completed
    lease_until: float
    result: bytes | None


class ClaimMachine(RuleBasedStateMachine):
    def __init__(self, open_store: Callable[[FakeClock], CheckedStore]) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.stores = [open_store(self.clock) for _ in range(WORKERS)]
        self.holdings: dict[tuple[int, str], Holding] = {}
        self.model: dict[str, ModelRecord] = {}
        self.effects: dict[str, list[str]] = {key: [] for key in KEYS}
        self.completions = 0

    def teardown(self) -> None:
        for store in self.stores:
            store.close()

    def _expected_outcome(self, key: str, fingerprint: str) -> str:
        record = self.model.get(key)
        if record is None:
            return "acquired"
        if record.fingerprint != fingerprint:
            return "conflict"
        if record.owner_token is None:
            return "replay"
        return "in_progress" if self.clock.now < record.lease_until else "takeover"

    @rule(
        worker=st.integers(0, WORKERS - 1),
        key=st.sampled_from(KEYS),
        fingerprint=st.sampled_from(FINGERPRINTS),
    )
    def claim(self, worker: int, key: str, fingerprint: str) -> None:
        record = self.model.get(key)
        claimed = self.stores[worker].claim(key, fingerprint, lease_s=LEASE, ttl_s=TTL)
        if record is not None and record.fingerprint != fingerprint:
            assert claimed.outcome == "conflict", "a conflicting reuse got through"
            assert claimed.fingerprint == record.fingerprint
        if claimed.outcome == "acquired":
            assert record is None, "acquired over a live record: an unknown outcome lost"
        if claimed.outcome == "takeover":
            assert record is not None and self.clock.now >= record.lease_until
        if claimed.outcome == "replay":
            assert record is not None and claimed.result == record.result
        assert claimed.outcome == self._expected_outcome(key, fingerprint)
        if claimed.token is None:
            return
        self.model[key] = ModelRecord(fingerprint, claimed.token, self.clock.now + LEASE, None)
        # a taker reads the effect back before deciding to execute
        present = claimed.outcome == "takeover" and bool(self.effects[key])
        deadline = self.clock.now + LEASE
        self.holdings[worker, key] = Holding(claimed.token, fingerprint, deadline, present)

    def _executable(self) -> list[tuple[int, str]]:
        now = self.clock.now
        return [
            held
            for held, holding in self.holdings.items()
            if not holding.effect_present and now < holding.deadline
        ]

    def _pick(self, data: st.DataObject, candidates: list[tuple[int, str]]) -> tuple[int, str]:
        return data.draw(st.sampled_from(sorted(candidates)))

    @precondition(lambda self: self._executable())
    @rule(data=st.data())
    def execute(self, data: st.DataObject) -> None:
        _, key = held = self._pick(data, self._executable())
        holding = self.holdings[held]
        self.effects[key].append(holding.fingerprint)
        holding.effect_present = True

    @precondition(lambda self: any(h.effect_present for h in self.holdings.values()))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        done = [held for held, holding in self.holdings.items() if holding.effect_present]
        worker, key = self._pick(data, done)
        holding = self.holdings.pop((worker, key))
        self.completions += 1
        result = f'{{"completion": {self.completions}}}'.encode()
        record = self.model.get(key)
        owner = record is not None and record.owner_token == holding.token
        assert self.stores[worker].complete(key, holding.token, result, ttl_s=TTL) is owner
        if owner:
            self.model[key] = ModelRecord(holding.fingerprint, None, 0.0, result)

    @precondition(lambda self: any(not h.effect_present for h in self.holdings.values()))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        # a failure after the effect is an unknown outcome: those are never released
        failed = [held for held, holding in self.holdings.items() if not holding.effect_present]
        worker, key = self._pick(data, failed)
        holding = self.holdings.pop((worker, key))
        self.stores[worker].release(key, holding.token)
        record = self.model.get(key)
        if record is not None and record.owner_token == holding.token:
            del self.model[key]

    @precondition(lambda self: self.holdings)
    @rule(data=st.data())
    def extend(self, data: st.DataObject) -> None:
        worker, key = self._pick(data, list(self.holdings))
        holding = self.holdings[worker, key]
        record = self.model.get(key)
        owner = record is not None and record.owner_token == holding.token
        assert self.stores[worker].extend(key, holding.token, lease_s=LEASE) is owner
        if record is not None and owner:
            record.lease_until = holding.deadline = self.clock.now + LEASE

    @rule(worker=st.integers(0, WORKERS - 1))
    def crash(self, worker: int) -> None:
        for worker_and_key in [held for held in self.holdings if held[0] == worker]:
            del self.holdings[worker_and_key]

    @rule(seconds=st.sampled_from([0.25, 1.0, 4.0, 9.75, LEASE, 15.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def store_holds_exactly_the_model_records(self) -> None:
        """Probe every key with a fingerprint nobody uses: a record answers ``conflict``
        with its fingerprint; no record answers ``acquired``, released at once."""
        for key in KEYS:
            record = self.model.get(key)
            probe = self.stores[0].claim(key, "fp-probe", lease_s=LEASE, ttl_s=TTL)
            if record is not None:
                assert (probe.outcome, probe.fingerprint) == ("conflict", record.fingerprint)
                continue
            assert probe.outcome == "acquired" and probe.token is not None
            self.stores[0].release(key, probe.token)

    @invariant()
    def side_effects_run_at_most_once(self) -> None:
        for key, effects in self.effects.items():
            assert len(effects) <= 1, f"{key} ran {len(effects)} times: {effects}"


Opener = Callable[[FakeClock], CheckedStore]


def _check(new_backend: Callable[[], Opener], examples: int, **extra: Any) -> None:
    """Run the machine; ``new_backend`` gives each example an empty backend to open."""
    run_state_machine_as_test(
        lambda: ClaimMachine(new_backend()),  # type: ignore[arg-type]  # a factory is fine
        settings=settings(
            max_examples=examples,
            stateful_step_count=80,
            deadline=None,  # timing is not a property; CI machines are loaded
            suppress_health_check=[HealthCheck.too_slow],
            **extra,
        ),
    )


def _one_memory_store(store_type: type[MemoryStore] = MemoryStore) -> Callable[[], Opener]:
    def new_backend() -> Opener:
        shared: list[MemoryStore] = []

        def open_store(clock: FakeClock) -> CheckedStore:
            if not shared:
                shared.append(store_type(clock=clock))
            return shared[0]

        return open_store

    return new_backend


def test_memory_interleavings_never_duplicate_side_effects() -> None:
    _check(_one_memory_store(), examples=200)


def test_sqlite_interleavings_never_duplicate_side_effects(tmp_path: Path) -> None:
    def new_backend() -> Opener:
        path = tmp_path / f"{uuid.uuid4().hex}.db"
        return lambda clock: SQLiteStore(path, clock=clock)

    _check(new_backend, examples=50)


@pytest.mark.slow
def test_redis_interleavings_never_duplicate_side_effects(redis_server: RedisServer) -> None:
    from toolspan.tracer.store import RedisStore

    def new_backend() -> Opener:
        prefix = f"prop-{uuid.uuid4().hex}:"
        return lambda clock: RedisStore(redis_server.url, prefix=prefix, clock=clock)

    _check(new_backend, examples=50)


class CarelessRelease(MemoryStore):
    """Mutant: releases without checking the token, so a stale owner's failure deletes
    the record of the worker that took over, and a third worker runs the action again."""

    def _release(self, key: str, token: str) -> None:
        with self._critical():
            self._drop_record(key)


class TakeoverWithoutReadBack(MemoryStore):
    """Mutant: reports an expired lease as ``acquired``, so the taker skips the read-back
    and repeats an effect the dead worker may already have made."""

    def _claim(self, key: str, fingerprint: str, lease_s: float, ttl_s: float) -> Claim:
        claimed = super()._claim(key, fingerprint, lease_s, ttl_s)
        return replace(claimed, outcome="acquired") if claimed.outcome == "takeover" else claimed


@pytest.mark.parametrize("mutant", [CarelessRelease, TakeoverWithoutReadBack])
def test_the_properties_catch_broken_stores(mutant: type[MemoryStore]) -> None:
    """The properties can fail: each mutant store is caught."""
    with pytest.raises(AssertionError):
        _check(
            _one_memory_store(mutant),
            examples=1000,
            report_multiple_bugs=False,
            database=None,
            derandomize=True,  # the same search every run: this test must not flake
            phases=[Phase.generate],  # finding it is the point; shrinking costs seconds
        )
