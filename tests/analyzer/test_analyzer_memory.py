"""The analyzer's memory budget: the setting reaches DuckDB, a bad value is a
clear error, and a small budget changes where DuckDB works, never the results."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from toolspan.analyzer import Analyzer, AnalyzerError
from toolspan.analyzer._analyzer import DEFAULT_IN_MEMORY_LIMIT, DEFAULT_MEMORY_LIMIT
from toolspan.cli import main

T0_NS = 1_767_225_600_000_000_000
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _settings(az: Analyzer) -> tuple[str, str]:
    row = az.connection.execute(
        "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    ).fetchone()
    assert row is not None
    return str(row[0]), str(row[1])


def test_the_memory_limit_and_spill_directory_reach_duckdb(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    with Analyzer(memory_limit="300MB", temp_directory=spill) as az:
        limit, directory = _settings(az)
    # DuckDB reports the limit in its own units (300MB is 286.1 MiB).
    assert limit == "286.1 MiB"
    assert directory == str(spill)


def test_the_default_is_a_fixed_budget_and_an_in_memory_database_spills_privately(
    tmp_path: Path,
) -> None:
    with Analyzer() as az:
        limit, directory = _settings(az)
        assert Path(directory).is_dir()
        assert Path(directory).name.startswith("toolspan-spill-")
        assert az.memory_limit == DEFAULT_IN_MEMORY_LIMIT
    with Analyzer(memory_limit=DEFAULT_IN_MEMORY_LIMIT) as same:
        assert _settings(same)[0] == limit
    with Analyzer(tmp_path / "t.duckdb") as into_a_file:
        file_limit = _settings(into_a_file)[0]
        assert into_a_file.memory_limit == DEFAULT_MEMORY_LIMIT
    # Not DuckDB's 80% of the machine's RAM: the budget does not follow the host.
    # An in-memory database holds the spans themselves under its limit.
    assert (limit, file_limit) == ("1.8 GiB", "488.2 MiB")
    assert not Path(directory).exists()  # removed on close


def test_a_database_file_spills_beside_itself(tmp_path: Path) -> None:
    with Analyzer(tmp_path / "t.duckdb") as az:
        assert _settings(az)[1] == str(tmp_path / "t.duckdb.tmp")


@pytest.mark.parametrize("bad", ["lots", "12 parsecs", ""])
def test_a_bad_memory_limit_is_a_clear_analyzer_error(bad: str) -> None:
    with pytest.raises(AnalyzerError, match=r"invalid memory limit .*2GB or 512MB"):
        Analyzer(memory_limit=bad)


def test_the_cli_reports_a_bad_memory_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", str(SAMPLES / "agent_run"), "--memory-limit", "lots"])
    assert code == 2
    assert "invalid memory limit 'lots'" in capsys.readouterr().err


@pytest.mark.parametrize("sample", ["agent_run", "bicycle"])
def test_a_small_memory_limit_gives_the_same_findings(sample: str, tmp_path: Path) -> None:
    def analysis(**memory: str) -> tuple[object, ...]:
        with Analyzer(**memory) as az:
            az.ingest([SAMPLES / sample])
            findings = [f.to_json() for f in az.findings()]
            calls = az.query("SELECT * FROM tool_calls ORDER BY ALL").rows
            attempts = az.query("SELECT * FROM attempts ORDER BY ALL").rows
            return az.summary(), findings, calls, attempts

    small = analysis(memory_limit="64MB", temp_directory=str(tmp_path / "spill"))
    unbounded = analysis(memory_limit="16GB")
    assert small == unbounded
    assert small[2] and small[3], "the sample should have calls and attempts to compare"
    if sample == "agent_run":
        assert small[1], "the sample should have findings to compare"


def _bulky_traces(path: Path, conversations: int) -> None:
    """OTLP/JSON lines of tool calls with 2 KB arguments, each conversation's
    four calls made three times each (four loops): about 100 MB."""
    lines = []
    for n in range(conversations):
        trace_id = hashlib.sha256(b"t%d" % n).hexdigest()[:32]
        spans = []
        for k in range(12):
            pad = hashlib.sha512(b"%d-%d" % (n, k % 4)).hexdigest() * 16
            args = {"q": n, "call": k % 4, "pad": pad}
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.conversation.id": f"conv-{n}",
                "gen_ai.tool.call.arguments": json.dumps(args),
                "toolspan.status": "succeeded",
                "toolspan.side_effect": "none",
            }
            start = T0_NS + (n * 12 + k) * 1_000_000
            spans.append(
                {
                    "traceId": trace_id,
                    "spanId": hashlib.sha256(b"s%d-%d" % (n, k)).hexdigest()[:16],
                    "name": "execute_tool search",
                    "startTimeUnixNano": str(start),
                    "endTimeUnixNano": str(start + 500_000),
                    "attributes": [
                        {"key": key, "value": {"stringValue": value}}
                        for key, value in attributes.items()
                    ],
                }
            )
        scope_spans = [{"scope": {"name": "toolspan"}, "spans": spans}]
        lines.append(json.dumps({"resourceSpans": [{"scopeSpans": scope_spans}]}))
    path.write_text("\n".join(lines) + "\n")


def test_past_its_memory_limit_duckdb_spills_to_the_temp_directory(tmp_path: Path) -> None:
    traces = tmp_path / "bulky.jsonl"
    _bulky_traces(traces, conversations=3000)
    spill = tmp_path / "spill"

    def analysis(az: Analyzer) -> tuple[object, ...]:
        report = az.ingest([traces])
        findings = [f.to_json() for f in az.findings()]
        return report.spans, az.summary(), findings

    with Analyzer(memory_limit="200MB", temp_directory=spill) as small:
        bounded = analysis(small)
        # The in-memory database itself no longer fits: its blocks live in the
        # temp directory (DuckDB lists them while they exist).
        spilled = small.query("SELECT path, size FROM duckdb_temporary_files()").rows
        held, spilled_bytes = small.query(
            "SELECT sum(memory_usage_bytes), sum(temporary_storage_bytes) FROM duckdb_memory()"
        ).rows[0]
    with Analyzer(memory_limit="4GB") as roomy:
        unbounded = analysis(roomy)
    assert spilled and all(Path(path).parent == spill for path, _ in spilled)
    assert sum(size for _, size in spilled) > 32 * 2**20
    assert held <= 200 * 2**20 and spilled_bytes > 32 * 2**20
    assert bounded == unbounded
    assert bounded[0] == 3000 * 12
    assert len(bounded[2]) == 4 * 3000, "four loops per conversation"


def test_the_cli_says_when_an_in_memory_database_outgrew_its_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "bulky.jsonl"
    _bulky_traces(traces, conversations=3000)
    spill = str(tmp_path / "spill")
    small = ["--memory-limit", "200MB", "--temp-directory", spill, "--format", "json"]
    assert main(["analyze", str(traces), *small]) == 0
    advice = capsys.readouterr().err
    assert "the in-memory database outgrew --memory-limit 200MB and spilled" in advice
    assert "use --db FILE" in advice
    # Into a file, or in memory within the limit: nothing to advise.
    assert main(["analyze", str(traces), *small, "--db", str(tmp_path / "t.duckdb")]) == 0
    assert main(["sql", "SELECT count(*) FROM spans", str(SAMPLES / "agent_run")]) == 0
    assert "outgrew" not in capsys.readouterr().err
