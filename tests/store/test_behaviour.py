"""The behaviour every IdempotencyStore backend must show, run against all three."""

from __future__ import annotations

import threading

import pytest

from tests.store.conftest import FakeClock, StoreFactory
from toolspan.tracer.store import Claim, IdempotencyStore, StoreError

LEASE = 30.0
TTL = 3600.0


def claim(store: IdempotencyStore, key: str = "order-17", fingerprint: str = "fp-a") -> Claim:
    return store.claim(key, fingerprint, lease_s=LEASE, ttl_s=TTL)


def acquire(store: IdempotencyStore, key: str = "order-17", fingerprint: str = "fp-a") -> str:
    first = claim(store, key, fingerprint)
    assert first.outcome == "acquired"
    assert first.token is not None
    return first.token


def test_every_backend_satisfies_the_protocol(store: IdempotencyStore) -> None:
    assert isinstance(store, IdempotencyStore)


def test_first_claim_acquires_with_a_token(store: IdempotencyStore) -> None:
    first = claim(store)
    assert first.outcome == "acquired"
    assert first.owned and first.token
    assert first.result is None
    assert first.fingerprint == "fp-a"


def test_same_arguments_while_in_flight_are_in_progress(store: IdempotencyStore) -> None:
    acquire(store)
    assert claim(store) == Claim("in_progress", None, None, "fp-a")


def test_other_arguments_while_in_flight_conflict(store: IdempotencyStore) -> None:
    acquire(store)
    assert claim(store, fingerprint="fp-b") == Claim("conflict", None, None, "fp-a")


def test_completed_result_replays_for_the_same_arguments(store: IdempotencyStore) -> None:
    token = acquire(store)
    assert store.complete("order-17", token, b'{"charged": 12.5}', ttl_s=TTL) is True
    for _ in range(2):
        assert claim(store) == Claim("replay", None, b'{"charged": 12.5}', "fp-a")


def test_completed_key_conflicts_for_other_arguments(store: IdempotencyStore) -> None:
    store.complete("order-17", acquire(store), b"{}", ttl_s=TTL)
    assert claim(store, fingerprint="fp-b") == Claim("conflict", None, None, "fp-a")


def test_results_are_returned_byte_for_byte(store: IdempotencyStore) -> None:
    payload = bytes(range(256)) + "é\u2603".encode()
    store.complete("order-17", acquire(store), payload, ttl_s=TTL)
    assert claim(store).result == payload


def test_release_forgets_a_failure_so_a_later_attempt_may_run(store: IdempotencyStore) -> None:
    token = acquire(store)
    store.release("order-17", token)
    again = claim(store, fingerprint="fp-b")  # even other arguments: nothing is stored
    assert again.outcome == "acquired"
    assert again.token != token


def test_lapse_ends_the_lease_now_and_keeps_the_arguments(store: IdempotencyStore) -> None:
    # A write whose outcome is unknown: the next claim reads back (a takeover), and a
    # reuse with other arguments stays a conflict, with no time passing at all.
    token = acquire(store)
    store.lapse("order-17", "not-the-token")
    assert claim(store).outcome == "in_progress", "a stranger's lapse changes nothing"
    store.lapse("order-17", token)
    assert claim(store, fingerprint="fp-b") == Claim("conflict", None, None, "fp-a")
    takeover = claim(store)
    assert takeover.outcome == "takeover" and takeover.token not in (None, token)
    store.lapse("order-17", token)  # the old owner lost the key: nothing happens
    assert claim(store).outcome == "in_progress"


def test_lease_expiry_hands_the_key_over_with_a_fresh_token(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    token = acquire(store)
    clock.advance(LEASE - 0.001)
    assert claim(store).outcome == "in_progress"
    clock.advance(0.001)
    takeover = claim(store)
    assert takeover.outcome == "takeover"
    assert takeover.token not in (None, token)
    assert claim(store).outcome == "in_progress", "the new owner holds a fresh lease"


def test_expired_lease_still_conflicts_for_other_arguments(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    acquire(store)
    clock.advance(LEASE * 2)
    assert claim(store, fingerprint="fp-b") == Claim("conflict", None, None, "fp-a")


def test_stale_owner_loses_the_key_after_a_takeover(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    stale = acquire(store)
    clock.advance(LEASE)
    fresh = claim(store).token
    assert fresh is not None
    assert store.extend("order-17", stale, lease_s=LEASE) is False
    store.release("order-17", stale)
    assert store.complete("order-17", stale, b'"stale"', ttl_s=TTL) is False
    assert claim(store).outcome == "in_progress", "the stale release deleted nothing"
    assert store.complete("order-17", fresh, b'"fresh"', ttl_s=TTL) is True
    assert claim(store).result == b'"fresh"'


def test_owner_may_complete_after_its_lease_if_nobody_took_over(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    token = acquire(store)
    clock.advance(LEASE * 3)
    assert store.complete("order-17", token, b"1", ttl_s=TTL) is True
    assert claim(store).outcome == "replay"


def test_complete_needs_the_owner_token(store: IdempotencyStore) -> None:
    acquire(store)
    assert store.complete("order-17", "not-the-token", b"1", ttl_s=TTL) is False
    assert store.complete("never-claimed", "not-the-token", b"1", ttl_s=TTL) is False
    assert claim(store).outcome == "in_progress"


def test_completing_twice_keeps_the_first_result(store: IdempotencyStore) -> None:
    token = acquire(store)
    assert store.complete("order-17", token, b"first", ttl_s=TTL) is True
    assert store.complete("order-17", token, b"second", ttl_s=TTL) is False
    assert claim(store).result == b"first"


def test_release_after_complete_or_by_strangers_changes_nothing(store: IdempotencyStore) -> None:
    token = acquire(store)
    store.release("order-17", "not-the-token")
    store.release("never-claimed", token)
    assert claim(store).outcome == "in_progress"
    store.complete("order-17", token, b"done", ttl_s=TTL)
    store.release("order-17", token)
    assert claim(store).result == b"done"


def test_extend_renews_the_lease(store: IdempotencyStore, clock: FakeClock) -> None:
    token = acquire(store)
    clock.advance(LEASE - 1)
    assert store.extend("order-17", token, lease_s=LEASE) is True
    clock.advance(LEASE - 1)  # past the first lease, inside the renewed one
    assert claim(store).outcome == "in_progress"
    clock.advance(1)
    assert claim(store).outcome == "takeover"


def test_extend_needs_the_owner_token(store: IdempotencyStore) -> None:
    token = acquire(store)
    assert store.extend("order-17", "not-the-token", lease_s=LEASE) is False
    assert store.extend("never-claimed", token, lease_s=LEASE) is False
    store.complete("order-17", token, b"1", ttl_s=TTL)
    assert store.extend("order-17", token, lease_s=LEASE) is False


def test_completed_record_is_forgotten_after_its_ttl(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    store.complete("order-17", acquire(store), b"1", ttl_s=100)
    clock.advance(99.999)
    assert claim(store).outcome == "replay"
    clock.advance(0.001)
    assert claim(store, fingerprint="fp-b").outcome == "acquired"


def test_abandoned_in_flight_record_is_remembered_for_its_ttl_after_the_lease(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    store.claim("order-17", "fp-a", lease_s=10, ttl_s=100)
    clock.advance(10 + 99.999)
    assert claim(store, fingerprint="fp-b").outcome == "conflict"
    assert claim(store).outcome == "takeover", "the dead worker's outcome is still unknown"
    clock.advance(LEASE + TTL)  # the taker died too and everything is forgotten
    assert claim(store, fingerprint="fp-b").outcome == "acquired"


def test_extend_keeps_the_record_remembered_after_the_new_lease(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    token = store.claim("order-17", "fp-a", lease_s=10, ttl_s=100).token
    assert token is not None
    clock.advance(5)
    store.extend("order-17", token, lease_s=50)
    clock.advance(50 + 99.999)
    assert claim(store).outcome == "takeover"


def test_lost_ownership_after_the_record_is_forgotten(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    token = store.claim("order-17", "fp-a", lease_s=10, ttl_s=100).token
    assert token is not None
    clock.advance(110)
    assert store.complete("order-17", token, b"1", ttl_s=TTL) is False
    assert store.extend("order-17", token, lease_s=10) is False


def test_keys_are_independent_and_may_hold_any_text(store: IdempotencyStore) -> None:
    keys = ["a", "a ", "A", "idem:a", "ключ/ü:*?[]", "k" * 2000]
    tokens = {key: acquire(store, key) for key in keys}
    for key, token in tokens.items():
        assert store.complete(key, token, key.encode(), ttl_s=TTL)
    for key in keys:
        assert claim(store, key).result == key.encode()


def test_stores_on_one_backend_share_records(store_factory: StoreFactory, clock: FakeClock) -> None:
    first, second = store_factory(clock), store_factory(clock)
    token = acquire(first)
    assert claim(second).outcome == "in_progress"
    assert second.complete("order-17", token, b"1", ttl_s=TTL) is True
    assert claim(first).result == b"1"


def test_threads_racing_for_a_key_get_one_owner(store_factory: StoreFactory) -> None:
    clock = FakeClock()
    stores = [store_factory(clock) for _ in range(4)]
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def race(store: IdempotencyStore) -> None:
        barrier.wait()
        for index in range(20):
            outcomes.append(claim(store, f"key-{index}").outcome)

    threads = [threading.Thread(target=race, args=(stores[i % 4],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("acquired") == 20
    assert outcomes.count("in_progress") == 7 * 20


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.claim("", "fp", lease_s=1, ttl_s=1), "key"),
        (lambda s: s.claim("k", "", lease_s=1, ttl_s=1), "fingerprint"),
        (lambda s: s.claim("k", "fp", lease_s=0, ttl_s=1), "lease_s"),
        (lambda s: s.claim("k", "fp", lease_s=1, ttl_s=float("nan")), "ttl_s"),
        (lambda s: s.claim("k", "fp", lease_s=True, ttl_s=1), "lease_s"),
        (lambda s: s.complete("k", "t", "text", ttl_s=1), "bytes"),
        (lambda s: s.extend("k", "t", lease_s=-1), "lease_s"),
        (lambda s: s.incr("n", ttl_s=1, by=1.5), "by"),
        (lambda s: s.incr("", ttl_s=1), "name"),
        (lambda s: s.record_answer("n", None, ttl_s=1), "answer"),
        (lambda s: s.put("n", b"bytes", ttl_s=1), "value"),
        (lambda s: s.put("n", "v", ttl_s=float("inf")), "ttl_s"),
    ],
)
def test_bad_arguments_are_refused_clearly(store: IdempotencyStore, call, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        call(store)


# --- guard state -----------------------------------------------------------------


def test_incr_counts_from_zero(store: IdempotencyStore) -> None:
    assert store.incr("turn-1:attempts", ttl_s=TTL) == 1
    assert store.incr("turn-1:attempts", ttl_s=TTL) == 2
    assert store.incr("turn-1:attempts", ttl_s=TTL, by=5) == 7
    assert store.incr("turn-1:attempts", ttl_s=TTL, by=-10) == -3
    assert store.incr("turn-2:attempts", ttl_s=TTL) == 1


def test_counter_expires_ttl_after_its_last_write(
    store: IdempotencyStore, clock: FakeClock
) -> None:
    store.incr("n", ttl_s=10)
    clock.advance(9)
    assert store.incr("n", ttl_s=10) == 2, "alive before its ttl"
    clock.advance(9.999)
    assert store.incr("n", ttl_s=10) == 3, "the last write renewed the ttl"
    clock.advance(10)
    assert store.incr("n", ttl_s=10) == 1


def test_record_answer_counts_the_same_answer_in_a_row(store: IdempotencyStore) -> None:
    assert store.answer_count("loop") is None
    assert [store.record_answer("loop", "sold out", ttl_s=TTL) for _ in range(3)] == [1, 2, 3]
    assert store.answer_count("loop") == ("sold out", 3)
    assert store.record_answer("loop", "in stock", ttl_s=TTL) == 1
    assert store.answer_count("loop") == ("in stock", 1)
    assert store.record_answer("loop", "sold out", ttl_s=TTL) == 1
    assert store.record_answer("loop", "", ttl_s=TTL) == 1, "an empty answer is an answer"
    assert store.answer_count("loop") == ("", 1)


def test_answers_expire(store: IdempotencyStore, clock: FakeClock) -> None:
    store.record_answer("loop", "x", ttl_s=10)
    clock.advance(10)
    assert store.answer_count("loop") is None
    assert store.record_answer("loop", "x", ttl_s=10) == 1


def test_put_get_delete(store: IdempotencyStore, clock: FakeClock) -> None:
    assert store.get("last-failure") is None
    store.put("last-failure", '{"call": "c1"}', ttl_s=10)
    assert store.get("last-failure") == '{"call": "c1"}'
    store.put("last-failure", "", ttl_s=10)
    assert store.get("last-failure") == ""
    store.delete("last-failure")
    store.delete("last-failure")
    assert store.get("last-failure") is None
    store.put("last-failure", "v", ttl_s=10)
    clock.advance(10)
    assert store.get("last-failure") is None


def test_a_name_holds_one_kind_of_state(store: IdempotencyStore, clock: FakeClock) -> None:
    store.incr("shared", ttl_s=10)
    with pytest.raises(StoreError, match="'shared' holds a counter, not a value"):
        store.get("shared")
    with pytest.raises(StoreError, match="holds a counter, not a answer"):
        store.record_answer("shared", "x", ttl_s=10)
    with pytest.raises(StoreError, match="holds a counter, not a value"):
        store.put("shared", "x", ttl_s=10)
    assert store.incr("shared", ttl_s=10) == 2, "a refused write changes nothing"
    store.delete("shared")
    store.put("shared", "now a value", ttl_s=10)
    clock.advance(10)
    assert store.record_answer("shared", "x", ttl_s=10) == 1, "expired state has no kind"


def test_guard_names_and_idempotency_keys_do_not_collide(store: IdempotencyStore) -> None:
    store.put("order-17", "value", ttl_s=TTL)
    assert claim(store).outcome == "acquired"
    store.delete("order-17")
    assert claim(store).outcome == "in_progress"


def test_closed_store_refuses_work(store_factory: StoreFactory, clock: FakeClock) -> None:
    store = store_factory(clock)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        claim(store)
    with pytest.raises(StoreError, match="closed"):
        store.get("n")
