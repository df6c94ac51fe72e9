"""The dashboard imports the analyzer, never the reverse; the CLI fails clearly."""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from toolspan.dashboard import cli
from toolspan.dashboard._launch import _check_startable

ROOT = Path(__file__).parents[2]


def test_analyzer_never_imports_streamlit_or_the_dashboard() -> None:
    code = (
        "import sys, toolspan.analyzer, toolspan.analyzer.cli; "
        "bad = [m for m in sys.modules if m.startswith(('streamlit', 'toolspan.dashboard'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_analyzer_sources_do_not_mention_the_dashboard() -> None:
    sources = [p for p in (ROOT / "analyzer").rglob("*") if p.suffix in {".py", ".sql"}]
    assert sources
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert "toolspan.dashboard" not in text, path
        assert not re.search(r"^\s*(import|from)\s+streamlit", text, re.MULTILINE), path


def test_dashboard_package_import_does_not_load_streamlit() -> None:
    code = "import sys, toolspan.dashboard.cli; assert 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    return parser.parse_args(["dashboard", *argv])


def test_defaults_bind_localhost() -> None:
    args = parse("--db", "x.duckdb")
    assert (args.host, args.port) == ("127.0.0.1", 8501)


def test_no_input_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse()) == 2
    assert "give trace PATHs or --db FILE" in capsys.readouterr().err


@pytest.mark.parametrize("follow", ["-1", "nan"])
def test_a_negative_follow_is_an_error(
    follow: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(parse("--source", f"chdb:{tmp_path}", "--follow", follow)) == 2
    assert "--follow takes seconds" in capsys.readouterr().err


def test_missing_database_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse("--db", str(tmp_path / "nope.duckdb"))) == 2
    assert "no database at" in capsys.readouterr().err


def test_missing_trace_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse(str(tmp_path / "nope.jsonl"), "--db", str(tmp_path / "t.duckdb"))) == 2
    assert "toolspan dashboard: error:" in capsys.readouterr().err


def test_busy_port_is_an_error(fixture_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.run(parse("--db", str(fixture_db), "--port", str(port))) == 2
    assert "pick another --port" in capsys.readouterr().err


def _port_in_time_wait() -> int:
    """A loopback port whose only socket is a closed connection in TIME_WAIT: what a
    dashboard stopped a moment ago leaves behind (the server closed first)."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port: int = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server side closes first: its socket waits
            assert client.recv(1) == b""
    return port


def test_a_port_left_in_time_wait_is_free_to_restart_on(fixture_db: Path) -> None:
    port = _port_in_time_wait()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # what the start-up probe did: "in use"
    _check_startable(fixture_db, "127.0.0.1", port)  # as Tornado binds: free
