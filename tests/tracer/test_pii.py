"""Personal data with ``Redactor(pii=True)``, and the capture levels of arguments and results."""

from __future__ import annotations

import re
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.tracer import REDACTED, ConfigurationError, Executor, Redactor, Tool, ToolCall

PII = Redactor(pii=True)
AROUND = st.tuples(
    st.sampled_from(["", "reach me at ", "Contact: ", "(", "to=", "sent to '", "IBAN: "]),
    st.sampled_from(["", ".", " today", ")", ",", "'", " PAID", "\n"]),
)


def luhn_complete(body: str) -> str:
    """``body`` plus the check digit that makes it Luhn-valid."""
    total = 0
    for index, char in enumerate(reversed(body)):
        value = int(char) * (2 if index % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return body + str((10 - total % 10) % 10)


@st.composite
def cards(draw: st.DrawFn) -> tuple[str, str]:
    """A Luhn-valid card number as written (compact, or in groups of four), and its digits."""
    length = draw(st.integers(13, 19))
    body = draw(st.sampled_from("3456")) + draw(
        st.text("0123456789", min_size=length - 2, max_size=length - 2)
    )
    digits = luhn_complete(body)
    separator = draw(st.sampled_from(["", " ", "-"]))
    written = separator.join(digits[i : i + 4] for i in range(0, len(digits), 4))
    return written, digits


@st.composite
def ibans(draw: st.DrawFn) -> tuple[str, str]:
    """A valid IBAN (mod-97) as written (compact, or in groups of four), and compact."""
    country = draw(st.text(string.ascii_uppercase, min_size=2, max_size=2))
    bban = draw(st.text(string.ascii_uppercase + string.digits, min_size=11, max_size=30))
    numeric = int("".join(str(int(char, 36)) for char in bban + country + "00"))
    compact = f"{country}{98 - numeric % 97:02d}{bban}"
    grouped = draw(st.booleans())
    written = (
        " ".join(compact[i : i + 4] for i in range(0, len(compact), 4)) if grouped else compact
    )
    return written, compact


@st.composite
def phones(draw: st.DrawFn) -> tuple[str, str]:
    """A phone number as people write it, and its digits."""
    national = draw(st.text("0123456789", min_size=9, max_size=11).filter(lambda d: d[0] != "0"))
    country = draw(st.sampled_from(["1", "33", "44", "49", "351"]))
    area, rest = national[:3], national[3:]
    middle, last = rest[: len(rest) // 2], rest[len(rest) // 2 :]
    written = draw(
        st.sampled_from(
            [
                f"+{country}{national}",
                f"+{country} {area} {middle} {last}",
                f"+{country} ({area}) {middle}-{last}",
                f"({area}) {middle}-{last}",
                f"{area}-{middle}-{last}",
                f"{area} {middle} {last}",
            ]
        )
    )
    return written, re.sub(r"\D", "", written)


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


@given(st.emails(), AROUND)
def test_no_email_address_survives(email: str, around: tuple[str, str]) -> None:
    before, after = around
    masked = PII.text(f"{before}{email}{after}")
    assert email not in masked and "@" not in masked and REDACTED in masked
    assert PII.arguments({"contact": email})["contact"] == REDACTED


@given(phones(), AROUND)
def test_no_phone_number_survives(phone: tuple[str, str], around: tuple[str, str]) -> None:
    written, digits = phone
    before, after = around
    masked = PII.text(f"{before}{written}{after}")
    assert digits not in _digits(masked) and REDACTED in masked
    assert PII.arguments({"phone": digits})["phone"] == REDACTED  # bare, under its key


@given(cards(), AROUND)
def test_no_card_number_survives(card: tuple[str, str], around: tuple[str, str]) -> None:
    written, digits = card
    before, after = around
    masked = PII.text(f"{before}{written}{after}")
    assert digits not in _digits(masked) and REDACTED in masked


@given(ibans(), AROUND)
def test_no_iban_survives(iban: tuple[str, str], around: tuple[str, str]) -> None:
    written, compact = iban
    before, after = around
    masked = PII.text(f"{before}{written}{after}")
    assert compact not in masked.replace(" ", "") and REDACTED in masked


@given(
    st.integers(0, 10**9),
    st.uuids(),
    st.text(string.ascii_lowercase + string.digits, min_size=8, max_size=40),
    st.integers(0, 10**6),
)
def test_values_that_only_look_like_secrets_or_pii_stay_readable(
    count: int, request_id: Any, session: str, budget: int
) -> None:
    arguments = {
        "prompt_tokens": count,
        "completion_tokens": count,
        "token_budget": budget,
        "session_id": f"sess_{session}",
        "request_id": str(request_id),
        "note": f"used {count} tokens in session sess_{session}",
        "date": "2026-01-15 10:30",
        "amount_cents": count,
    }
    assert PII.arguments(arguments) == arguments


def test_pii_is_off_by_default() -> None:
    assert Redactor().text("mail joe@example.com or +1 415 555 2671") == (
        "mail joe@example.com or +1 415 555 2671"
    )


# -- capture levels ----------------------------------------------------------------------


def _recorded(spans: Any, level: str, result_level: str | None = None) -> dict[str, Any]:
    executor = Executor(
        [Tool("send", lambda to, api_key: {"sent_to": to, "token": "x"}, "write")],
        tracer_provider=spans.provider,
        redactor=Redactor(pii=True),
        capture_arguments=level,  # type: ignore[arg-type]
        capture_results=result_level or level,  # type: ignore[arg-type]
    )
    arguments = {"to": "joe@example.com", "api_key": "k-123"}
    assert executor.execute(ToolCall("send", f"c-{level}", arguments, "conv")).ok
    return spans.attrs(spans.calls()[-1])


def test_each_capture_level_records_what_it_says_and_the_same_hash(spans) -> None:
    off, keys, redacted, full = (
        _recorded(spans, level) for level in ("off", "keys", "redacted", "full")
    )
    assert "gen_ai.tool.call.arguments" not in off and "gen_ai.tool.call.result" not in off
    assert keys["gen_ai.tool.call.arguments"] == '{"api_key":"[REDACTED]","to":"[REDACTED]"}'
    assert keys["gen_ai.tool.call.result"] == '{"sent_to":"[REDACTED]","token":"[REDACTED]"}'
    assert redacted["gen_ai.tool.call.arguments"] == '{"api_key":"[REDACTED]","to":"[REDACTED]"}'
    assert full["gen_ai.tool.call.arguments"] == '{"api_key":"k-123","to":"joe@example.com"}'
    assert full["gen_ai.tool.call.result"] == '{"sent_to":"joe@example.com","token":"x"}'
    hashes = {span["toolspan.args.hash"] for span in (off, keys, redacted, full)}
    assert len(hashes) == 1 and len({span["toolspan.result.hash"] for span in (off, full)}) == 1


def test_results_are_not_recorded_by_default(spans) -> None:
    executor = Executor(
        [Tool("get", lambda: {"email": "joe@example.com"})], tracer_provider=spans.provider
    )
    assert executor.execute(ToolCall("get", "c1", {}, "conv")).ok
    recorded = spans.attrs(spans.call())
    assert "gen_ai.tool.call.result" not in recorded and "toolspan.result.hash" in recorded


def test_a_recorded_result_is_cut_to_the_size_cap(spans) -> None:
    executor = Executor(
        [Tool("get", lambda: {"text": "é" * 500})],
        tracer_provider=spans.provider,
        capture_results="full",
        max_result_bytes=64,
    )
    executor.execute(ToolCall("get", "c1", {}, "conv"))
    recorded = spans.attrs(spans.call())["gen_ai.tool.call.result"]
    assert len(recorded.encode()) <= 64 and recorded.startswith('{"text":"é')


def test_an_unknown_capture_level_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="capture_arguments must be one of"):
        Executor([], capture_arguments="everything")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="capture_results must be one of"):
        Executor([], capture_results=None)  # type: ignore[arg-type]


def test_a_uuid_whose_middle_groups_look_like_a_card_stays_readable():
    # Hypothesis found it: four digit groups inside a UUID were masked as a card.
    text = "d53bdd60-7139-5546-5783-5786ab13d38f"
    assert PII.arguments({"request_id": text}) == {"request_id": text}
    assert PII.arguments({"note": "card 4111-1111-1111-1111"}) != {
        "note": "card 4111-1111-1111-1111"
    }
