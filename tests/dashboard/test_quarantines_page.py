"""The Quarantines page under AppTest, on a real SQLite store file and a real
redis-server: it lists what ``add_quarantine`` wrote, lifts through
``lift_quarantines`` only after a confirmation, shows a hostile reason as text,
and says what is wrong when there is no store or the store is down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from toolspan.dashboard import _ui
from toolspan.dashboard._env import STORE_ENV
from toolspan.dashboard._quarantines import _duration, store_label
from toolspan.tracer import Quarantine, add_quarantine, list_quarantines
from toolspan.tracer.store import open_store

from ..redis_server import RedisServer
from ..services import free_port
from .test_untrusted_text import MARKDOWN_ELEMENTS, _texts

APP = Path(__file__).parents[2] / "dashboard" / "app.py"
# The page's widget keys (importing the page would run it).
PICK_KEY = "quarantine_pick"
CONFIRM_KEY = "quarantine_confirm"
HOSTILE = "<script>alert(1)</script> **x** ![i](http://127.0.0.1:9/leak.png)"


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with RedisServer() as server:
        yield server.url


@pytest.fixture(params=["sqlite", "redis"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "store.sqlite")
        return
    url: str = request.getfixturevalue("redis_url")
    yield url
    store = open_store(url)
    try:
        from toolspan.tracer import lift_quarantines

        lift_quarantines(store)  # the next test starts from an empty store
    finally:
        store.close()


def quarantine(location: str, **fields: str) -> Quarantine:
    store = open_store(location)
    try:
        return add_quarantine(store, ttl_s=3600, **fields)  # type: ignore[arg-type]
    finally:
        store.close()


def in_force(location: str) -> list[Quarantine]:
    store = open_store(location)
    try:
        return list_quarantines(store)
    finally:
        store.close()


def page(db: Path, monkeypatch: pytest.MonkeyPatch, location: str | None) -> AppTest:
    monkeypatch.setenv(_ui.DB_ENV, str(db))
    if location is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, location)
    app = AppTest.from_file(APP, default_timeout=30).run()
    app.switch_page("_pages/quarantines.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def shown(app: AppTest) -> pd.DataFrame:
    assert len(app.dataframe) == 1
    frame: pd.DataFrame = app.dataframe[0].value
    return frame


def test_lists_both_and_lifts_one_after_confirming(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch, location: str
) -> None:
    loop = quarantine(
        location, reason="loop: search x5", conversation_id="c-1", tool="search", finding="loop"
    )
    write = quarantine(
        location, reason="duplicate write", tool="refund", resource="order-7", finding="dup"
    )
    app = page(fixture_db, monkeypatch, location)
    frame = shown(app)
    assert sorted(frame["id"]) == sorted([loop.id, write.id])
    row = frame.set_index("id").loc[write.id]
    assert (row["scope"], row["tool"], row["resource"]) == ("resource", "refund", "order-7")
    assert row["expires in"] in ("59 min", "1 h 00 min")
    assert frame.set_index("id").loc[loop.id, "conversation"] == "c-1"

    app.multiselect(key=PICK_KEY).set_value([loop.id]).run()
    app.button(key="lift_chosen").click().run()
    assert [w.value for w in app.warning] == ["Tick the confirmation to lift."]
    assert len(in_force(location)) == 2  # nothing lifted without the confirmation

    app.checkbox(key=CONFIRM_KEY).check().run()
    app.button(key="lift_chosen").click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert [q.id for q in in_force(location)] == [write.id]
    assert list(shown(app)["id"]) == [write.id]
    assert [s.value for s in app.success] == ["Lifted 1 quarantine(s)."]


def test_lift_all(fixture_db: Path, monkeypatch: pytest.MonkeyPatch, location: str) -> None:
    quarantine(location, reason="a", tool="a")
    quarantine(location, reason="b", tool="b")
    app = page(fixture_db, monkeypatch, location)
    app.checkbox(key=CONFIRM_KEY).check().run()
    app.button(key="lift_all").click().run()
    assert in_force(location) == []
    assert len(app.dataframe) == 0
    assert "No quarantine is in force." in [i.value for i in app.info]


def test_a_hostile_reason_is_text(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch, location: str
) -> None:
    quarantine(location, reason=HOSTILE, tool=f"tool {HOSTILE}")
    app = page(fixture_db, monkeypatch, location)
    frame = shown(app)
    assert list(frame["reason"]) == [HOSTILE]  # shown, whole, in the table
    rendered = "\n".join(_texts(app, MARKDOWN_ELEMENTS))
    for piece in ("<script>", "**x**", "leak.png"):
        assert piece not in rendered


def test_no_store_says_how_to_configure_one(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = page(fixture_db, monkeypatch, None)
    assert any("--store URL" in i.value and STORE_ENV in i.value for i in app.info)
    assert len(app.dataframe) == 0


def test_a_store_that_is_down_is_an_error_not_a_crash(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = f"redis://user:hunter2@127.0.0.1:{free_port()}/0"
    app = page(fixture_db, monkeypatch, down)
    errors = [e.value for e in app.error]
    assert len(errors) == 1 and "the store failed" in errors[0], errors
    texts = "\n".join(_texts(app, (*MARKDOWN_ELEMENTS, "text")))
    assert "hunter2" not in texts


def test_lifting_when_the_store_went_down_meanwhile(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    location = str(tmp_path / "store.sqlite")
    quarantine(location, reason="r", tool="t")
    app = page(fixture_db, monkeypatch, location)
    app.checkbox(key=CONFIRM_KEY).check().run()
    (tmp_path / "store.sqlite").unlink()
    (tmp_path / "store.sqlite").mkdir()  # a directory now: the store cannot be opened
    app.button(key="lift_all").click().run()
    assert not app.exception, [e.value for e in app.exception]
    errors = [e.value for e in app.error]
    # The lift's failure, then the listing's: both say the store is at fault.
    assert len(errors) == 2 and all("cannot open the store" in e for e in errors), errors


@given(
    st.text(alphabet=st.characters(blacklist_characters="@/:"), min_size=1),
    st.sampled_from(["redis", "rediss"]),
)
def test_a_store_label_never_shows_credentials(secret: str, scheme: str) -> None:
    label = store_label(f"{scheme}://user:{secret}@host:6379/0")
    assert label == f"{scheme}://***@host:6379/0"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-3, "0 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (3600 + 300, "1 h 05 min"),
        (86400 * 2 + 3600 * 4, "2 d 04 h"),
    ],
)
def test_expires_in(seconds: float, text: str) -> None:
    assert _duration(seconds) == text
