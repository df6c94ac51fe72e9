"""Nothing from a trace or a query is rendered as Markdown or HTML on any page.

A tool name, a conversation id and recorded arguments carry a Markdown image
(a browser would fetch the attacker's URL); every element that renders
Markdown must be free of it, and the text must still be shown (as text, code
or JSON), so a page that merely hid it would fail too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from toolspan.dashboard import _ui

from .conftest import ingest
from .traces import Attempt, Call, Conversation, write_traces

APP = Path(__file__).parents[2] / "dashboard" / "app.py"
LEAK = "127.0.0.1:9/leak.png"
IMAGE = f"![x](http://{LEAK})"
# Elements whose text Streamlit renders as Markdown.
MARKDOWN_ELEMENTS = ("markdown", "caption", "error", "warning", "info", "success", "title")
PLAIN_ELEMENTS = ("text", "code", "json")


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dashboard-hostile")
    calls = [
        Call(
            tool=f"lookup {IMAGE}",
            args={"q": IMAGE, "note": "<img src=x onerror=alert(1)>"},
            status="succeeded",
            attempts=[Attempt("ok", 5)],
            result={"r": 1},
        )
        for _ in range(4)
    ]
    conversation = Conversation(f"conv {IMAGE}", 0, calls)
    return ingest(root / "hostile.duckdb", write_traces(root / "t.jsonl", [conversation]))


def _texts(app: AppTest, kinds: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for kind in kinds:
        for element in app.get(kind):
            value: Any = getattr(element, "value", None)
            found.append(str(value if value is not None else element.proto))
    for metric in app.metric:
        found.append(str(metric.label))
    return found


def _page(db: Path, monkeypatch: pytest.MonkeyPatch, page: str | None) -> AppTest:
    monkeypatch.setenv(_ui.DB_ENV, str(db))
    app = AppTest.from_file(APP, default_timeout=30).run()
    if page:
        app.switch_page(f"_pages/{page}.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


@pytest.mark.parametrize("page", [None, "timelines", "findings", "trace"])
def test_no_trace_text_is_rendered_as_markdown(
    hostile_db: Path, monkeypatch: pytest.MonkeyPatch, page: str | None
) -> None:
    app = _page(hostile_db, monkeypatch, page)
    rendered = _texts(app, MARKDOWN_ELEMENTS)
    assert not [text for text in rendered if LEAK in text or "<img" in text]


def test_findings_detail_tool_and_conversation_are_plain_text(
    hostile_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _page(hostile_db, monkeypatch, "findings")
    plain = " ".join(_texts(app, PLAIN_ELEMENTS))
    assert f"lookup {IMAGE}" in plain and f"conv {IMAGE}" in plain  # shown, as text
    assert not [text for text in _texts(app, MARKDOWN_ELEMENTS) if LEAK in text]


def test_console_error_quoting_a_stored_value_is_plain_text(
    hostile_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _page(hostile_db, monkeypatch, "console")
    app.text_area(key="console_sql").set_value("SELECT CAST(tool AS INTEGER) FROM tool_calls")
    app.button[-1].click().run()
    assert not app.exception
    assert [e.value for e in app.error] == ["The query failed"]
    assert any(LEAK in text for text in _texts(app, ("code",)))  # DuckDB quoted the value
    assert not [text for text in _texts(app, MARKDOWN_ELEMENTS) if LEAK in text]
