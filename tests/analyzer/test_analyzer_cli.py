"""`toolspan analyze` and `toolspan sql` through the real command-line router."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.analyzer import _render
from toolspan.cli import main


def test_analyze_json_output_and_fail_on_gate(
    scenario: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(scenario["dir"])
    assert main(["analyze", folder, "--format", "json", "--write-tools", "create_*,nothing"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"summary", "findings"}
    assert out["summary"]["calls"] == 49
    kinds = {f["kind"] for f in out["findings"]}
    assert kinds == {"loop", "duplicate_write", "idempotency_conflict", "unsafe_retry"}
    first = out["findings"][0]
    assert set(first) == {
        "kind",
        "conversation_id",
        "tool",
        "idempotency_key",
        "count",
        "span_ids",
        "trace_ids",
        "first_seen",
        "last_seen",
        "detail",
    }
    assert first["first_seen"].endswith("Z")
    assert main(["analyze", folder, "--fail-on", "unsafe_retry", "--format", "markdown"]) == 1
    markdown = capsys.readouterr().out
    assert "| unsafe_retry | c-unsafe | create_user |" in markdown
    assert main(["analyze", folder, "--min-repeats", "5", "--fail-on", "loop"]) == 0


def test_analyze_reports_bad_lines_and_progress_on_stderr(
    tmp_path: Path, scenario: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    broken = Path(str(scenario["dir"])) / "a.jsonl"
    with broken.open("ab") as out:
        out.write(b'{"resourceSpans": [\n')
    lines = len(broken.read_bytes().splitlines())
    assert main(["analyze", str(broken)]) == 0
    captured = capsys.readouterr()
    assert f"{broken}:{lines}: skipped: invalid JSON" in captured.err
    assert "toolspan: reading 1 file(s)" in captured.err
    assert "Findings" in captured.out
    assert main(["analyze", str(broken), "--strict"]) == 2
    assert "corrupt line" in capsys.readouterr().err


def test_sql_over_files_and_over_a_database(
    tmp_path: Path, scenario: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, db = str(scenario["dir"]), str(tmp_path / "t.duckdb")
    query = "SELECT tool, count(*) AS n FROM tool_calls GROUP BY tool ORDER BY n DESC, tool LIMIT 2"
    assert main(["sql", query, folder, "--db", db, "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["tool,n", "search,9", "book,4"]
    assert (
        main(
            [
                "sql",
                "SELECT kind, count FROM findings ORDER BY count DESC, kind LIMIT 1",
                "--db",
                db,
                "--format",
                "json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"kind": "loop", "count": 3}]
    assert main(["sql", "SELECT 1 AS one", "--db", db]) == 0
    assert capsys.readouterr().out.split() == ["one", "---", "1"]
    # JSON has no NaN or Infinity: such doubles are null (json.dumps wrote NaN),
    # also beside an integer beyond 64 bits (which orjson refuses).
    for c, expected in (("1::HUGEINT << 70", 2**70), ("NULL::HUGEINT", None)):
        query = f"SELECT 'nan'::DOUBLE AS a, '-inf'::DOUBLE AS b, {c} AS c"
        assert main(["sql", query, "--db", db, "--format", "json"]) == 0
        out = capsys.readouterr().out
        assert json.loads(out, parse_constant=_refuse) == [{"a": None, "b": None, "c": expected}]


def _refuse(constant: str) -> None:
    raise ValueError(f"not JSON: {constant}")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyze", "/nonexistent/traces.jsonl"], "no such file or directory"),
        (["sql", "SELECT 1"], "give trace files"),
        (["analyze", "--fail-on", "everything", "x"], "unknown --fail-on kind"),
    ],
)
def test_clear_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_query_and_empty_input(
    tmp_path: Path, scenario: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sql", "SELEC nothing", str(scenario["dir"])]) == 2
    assert "syntax error" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", str(empty)]) == 2
    assert "no trace files" in capsys.readouterr().err


@pytest.mark.parametrize("gate", [[], ["--fail-on", "any"]])
def test_inputs_without_a_single_span_fail_the_gate(
    tmp_path: Path, gate: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # A mis-pointed CI gate: the directory's only .jsonl is not OTLP.
    (tmp_path / "app.jsonl").write_text('{"level": "info", "msg": "started"}\n')
    assert main(["analyze", str(tmp_path), *gate]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "toolspan: error: no spans in 1 file(s) (1 line(s), 0 corrupt): "
        "nothing to analyze; --allow-empty accepts that"
    )
    assert "Traceback" not in "\n".join(err)
    assert main(["analyze", str(tmp_path), *gate, "--allow-empty"]) == 0
    assert "Findings" in capsys.readouterr().out


def test_a_chdb_path_that_does_not_exist_is_an_error_not_a_new_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "such"
    assert main(["analyze", f"chdb:{missing}"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"toolspan: error: no chDB data directory at {missing} (chdb:PATH reads one)"
    assert not (tmp_path / "no").exists()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"toolspan {version('toolspan')}\n"


def test_version_imports_no_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `toolspan --version` imported every part (the MCP proxy, the OTLP
    # receiver, Streamlit's page code): 1.7 s to print one line.
    script = (
        "import sys\n"
        "from toolspan.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('toolspan.serve', 'mcp', "
        "'toolspan.dashboard', 'toolspan.analyzer', 'toolspan.tracer.integrations'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    version_line, imported = done.stdout.splitlines()
    assert version_line.startswith("toolspan ")
    assert imported == "[]"
    with pytest.raises(SystemExit):
        main(["--help"])  # --help still lists every part's commands
    listed = capsys.readouterr().out
    assert all(f"    {command}" in listed for command in ("analyze", "dashboard", "serve", "mcp"))


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_json_output_is_the_standard_librarys_text(value: object) -> None:
    text = _render.json_text(value)
    assert json.loads(text) == value
    if not _has_float(value):
        # Equal to the character, except for floats' spelling: json writes 1e-07 and
        # 1e-05 where orjson writes 1e-7 and 0.00001 (the same number, as asserted above).
        assert text == json.dumps(value, indent=2, ensure_ascii=False)


def test_json_output_takes_integers_beyond_64_bits() -> None:
    value = {"n": 2**70, "m": [-(2**64)]}
    assert _render.json_text(value) == json.dumps(value, indent=2, ensure_ascii=False)


def _has_float(value: object) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False
