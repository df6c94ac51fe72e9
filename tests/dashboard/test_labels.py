"""Labels a reader must not misread: sizes, time formats that follow the range, and
the time slider's values short enough to stay inside the sidebar."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.dashboard._charts import time_format
from toolspan.dashboard._ui import slider_format
from toolspan.dashboard._units import human_size


@pytest.mark.parametrize(
    ("n", "shown"),
    [(0, "0 bytes"), (512, "512 bytes"), (1536, "1.5 KiB"), (32 * 2**20, "32 MiB"),
     (1023 * 2**10, "1023 KiB"), (int(1.5 * 2**30), "1.5 GiB")],
)  # fmt: skip
def test_human_size(n: int, shown: str) -> None:
    assert human_size(n) == shown


@given(st.integers(min_value=0, max_value=2**60))
def test_human_size_is_short(n: int) -> None:
    number, unit = human_size(n).split(" ")
    assert len(number) <= 4 and unit in {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"}


@pytest.mark.parametrize(
    ("first", "last", "fmt"),
    [
        ("2026-12-02 05:26:00", "2026-12-02 05:26:40", "%H:%M:%S"),  # seconds
        ("2026-12-02 05:00", "2026-12-02 09:00", "%H:%M"),
        ("2026-12-01 05:00", "2026-12-03 09:00", "%Y-%m-%d %H:%M"),  # days: the year
        ("2026-01-01", "2026-12-31", "%Y-%m-%d"),
    ],
)
def test_time_axis_format_follows_the_range(first: str, last: str, fmt: str) -> None:
    assert time_format(pd.Timestamp(first), pd.Timestamp(last)) == fmt


@pytest.mark.parametrize(
    ("low", "high", "label_has", "value_format"),
    [
        (datetime(2026, 12, 2, 5), datetime(2026, 12, 2, 6), "2026-12-02", "HH:mm:ss"),
        (datetime(2026, 12, 1, 5), datetime(2026, 12, 3, 6), "2026)", "MM-DD HH:mm"),
        (datetime(2025, 12, 30), datetime(2026, 1, 2), "UTC)", "YYYY-MM-DD"),
    ],
)
def test_slider_values_stay_short_and_the_year_is_shown(
    low: datetime, high: datetime, label_has: str, value_format: str
) -> None:
    label, shown_format = slider_format(low, high)
    assert label_has in label and shown_format == value_format
    # Streamlit centres a value on its thumb: 11 characters fit the sidebar's padding
    # (these moment.js formats print as many characters as they have).
    assert len(value_format) <= 11
