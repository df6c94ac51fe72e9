"""Benchmark: `toolspan analyze` end to end against DuckDB's own floors.

Generates >= 1,000,000 spans of OTLP/JSON lines (Collector file-exporter
format: one ExportTraceServiceRequest of 512 spans per line, hex ids, int64 as
strings) into bench/.data/, then times, each in a fresh process so that peak
memory (RSS) is measured per step:

  parse floor    DuckDB read_json_objects over the files (JSON parse only)
  typed unnest   DuckDB read_json with the OTLP schema, spans unnested into a table
                 (preserve_insertion_order off, as the analyzer runs: the fastest floor)
  analyze        Analyzer.ingest + findings + summary, in memory (what `toolspan analyze` does)
  analyze (db)   the same into a database file
  re-analyze     the same files again on that database (already ingested)
  pandas         json.loads + pandas.json_normalize of the spans, on a subset, extrapolated

Then, to show that memory stays bounded as the input grows, the time and peak
RSS of `analyze` into a database file on a corpus half the size and full size.

With --pairs N, instead: N pairs of the typed unnest then analyze in memory,
each in a fresh process, alternating, and the median and range of the ratio
analyze / unnest (wall and CPU) over the pairs. On a shared or noisy machine
each step's own time varies by 15% from run to run; a pair shares the
machine's state of the moment, so the ratio varies less than either time.

With --scale, instead: analyze in memory and into a database file on 1M, 2M
and 4M generated spans (--scale-spans to choose), under the analyzer's default
memory limit (or --memory-limit), printing time and peak RSS per size and their
growth against the smallest size.

Usage: python bench/analyzer_bench.py [--spans 1000000] [--files 8] [--repeats 1]
       python bench/analyzer_bench.py --pairs 15 [--spans 1000000]
       python bench/analyzer_bench.py --scale [--scale-spans 1000000,2000000,4000000]
           [--scale-modes memory,db] [--memory-limit 512MB]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

DATA = Path(__file__).resolve().parent / ".data"
MEMORY_LIMIT = ""  # the analyzer's default unless --memory-limit says otherwise
SPANS_PER_LINE = 512
T0_NS = 1_767_225_600_000_000_000
TOOLS = ["search", "get_weather", "send_email", "create_ticket", "lookup_order", "refund"]
WRITES = {"send_email", "create_ticket", "refund"}


# -- corpus ---------------------------------------------------------------------


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


class _Corpus:
    """Agent-like traces: conversations of chat, HTTP and tool-call spans."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = T0_NS

    def _id(self, n_bytes: int) -> str:
        return self.rng.getrandbits(8 * n_bytes).to_bytes(n_bytes, "big").hex()

    def _span(
        self,
        trace_id: str,
        parent: str | None,
        name: str,
        attrs: dict[str, Any],
        error: str | None = None,
        ms: float = 5.0,
    ) -> dict[str, Any]:
        start = self.now
        self.now += int(ms * 1e6)
        span: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": self._id(8),
            "flags": 256,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(self.now),
            "attributes": [_attr(k, v) for k, v in attrs.items()],
            "status": {"code": 2, "message": error} if error else {},
        }
        if parent:
            span["parentSpanId"] = parent
        return span

    def conversation(self, n: int) -> list[dict[str, Any]]:
        trace_id, conv = self._id(16), f"conv-{n}"
        root = self._span(
            trace_id,
            None,
            "invoke_agent bench",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conv},
        )
        spans = [root]
        for turn in range(self.rng.randint(2, 6)):
            spans.append(
                self._span(
                    trace_id,
                    root["spanId"],
                    "chat gpt-bench",
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.request.model": "gpt-bench",
                        "gen_ai.usage.input_tokens": self.rng.randint(100, 4000),
                    },
                )
            )
            spans.append(
                self._span(
                    trace_id,
                    spans[-1]["spanId"],
                    "POST",
                    {
                        "http.request.method": "POST",
                        "http.response.status_code": 200,
                        "url.full": "https://llm.example/v1/chat",
                    },
                )
            )
            repeats = 3 if self.rng.random() < 0.05 else 1  # a loop now and then
            tool = self.rng.choice(TOOLS)
            args = {"q": f"{tool}-{n}-{turn}", "n": self.rng.randint(1, 9)}
            for _ in range(repeats):
                spans.extend(self._call(trace_id, root["spanId"], conv, tool, args, f"t{turn}"))
        return spans

    def _call(
        self, trace_id: str, parent: str, conv: str, tool: str, args: dict[str, Any], turn: str
    ) -> list[dict[str, Any]]:
        text = json.dumps(args, sort_keys=True, separators=(",", ":"))
        outcomes = ["http_503"] * (self.rng.random() < 0.2) + ["ok"]
        common = {
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": f"call_{self._id(6)}",
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": conv,
            "toolspan.request.id": f"req-{conv}",
            "toolspan.turn.id": turn,
            "toolspan.side_effect": "write" if tool in WRITES else "none",
        }
        call = self._span(
            trace_id,
            parent,
            f"execute_tool {tool}",
            {
                **common,
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.arguments": text,
                "toolspan.args.hash": hashlib.sha256(text.encode()).hexdigest(),
                "toolspan.result.hash": hashlib.sha256(tool.encode()).hexdigest(),
                "toolspan.status": "succeeded",
                "toolspan.retryable": False,
                "toolspan.attempts": len(outcomes),
                "toolspan.total_wait_s": 0.5 * (len(outcomes) - 1),
            },
            ms=1,
        )
        attempts = [
            self._span(
                trace_id,
                call["spanId"],
                f"attempt {i} {tool}",
                {
                    **common,
                    "toolspan.attempt": i,
                    "http.request.resend_count": i - 1,
                    "toolspan.attempt.outcome": outcome,
                    "toolspan.retry.delay_s": 0.0,
                    "toolspan.retry.elapsed_wait_s": 0.5 * (i - 1),
                },
                error=None if outcome == "ok" else outcome,
            )
            for i, outcome in enumerate(outcomes, start=1)
        ]
        call["endTimeUnixNano"] = attempts[-1]["endTimeUnixNano"]
        return [call, *attempts]


def _request_line(spans: list[dict[str, Any]]) -> bytes:
    request = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        _attr("service.name", "bench-agent"),
                        _attr("telemetry.sdk.language", "python"),
                    ]
                },
                "scopeSpans": [{"scope": {"name": "toolspan"}, "spans": spans}],
            }
        ]
    }
    return orjson.dumps(request) + b"\n"


def generate(total_spans: int, n_files: int) -> list[Path]:
    """Write the corpus once (cached by size) and return its files."""
    folder = DATA / f"spans-{total_spans}-files-{n_files}"
    done = folder / ".complete"
    files = [folder / f"traces-{i:02d}.jsonl" for i in range(n_files)]
    if done.exists():
        return files
    folder.mkdir(parents=True, exist_ok=True)
    corpus, written, conv = _Corpus(seed=7), 0, 0
    per_file = total_spans // n_files + 1
    for path in files:
        with path.open("wb") as out:
            pending: list[dict[str, Any]] = []
            file_spans = 0
            while file_spans < per_file and written < total_spans:
                spans = corpus.conversation(conv)
                conv += 1
                pending.extend(spans)
                file_spans += len(spans)
                written += len(spans)
                while len(pending) >= SPANS_PER_LINE:
                    out.write(_request_line(pending[:SPANS_PER_LINE]))
                    pending = pending[SPANS_PER_LINE:]
            if pending:
                out.write(_request_line(pending))
    done.write_text(str(written))
    return files


# -- steps (each run in its own process) ----------------------------------------


def _typed_columns() -> str:
    from toolspan._sql import load_statements

    sql = load_statements("toolspan.analyzer", "sql/read_batch.sql")["read_batch_macro"]
    start = sql.index("columns = {")
    return sql[start + len("columns = ") : sql.index("}", sql.index("'resourceSpans'")) + 1]


def step(name: str, files: list[str], db: str | None) -> dict[str, Any]:
    import duckdb

    started, cpu_started = time.perf_counter(), time.process_time()
    result: dict[str, Any] = {}
    if name == "parse":
        con = duckdb.connect()
        row = con.execute(
            "SELECT count(*) FROM read_json_objects(?, format='newline_delimited')", [files]
        ).fetchone()
        result["lines"] = row[0] if row else 0
    elif name == "unnest":
        con = duckdb.connect()
        con.execute("SET preserve_insertion_order = false")
        con.execute(
            f"""CREATE TABLE s AS
            WITH r AS (SELECT unnest(resourceSpans) AS r FROM read_json(?,
                       format='newline_delimited', records=true, columns={_typed_columns()})),
                 ss AS (SELECT unnest(r.scopeSpans) AS ss FROM r),
                 sp AS (SELECT unnest(ss.spans) AS s FROM ss)
            SELECT s.traceId AS trace_id, s.spanId AS span_id, s.parentSpanId AS parent_span_id,
                   s.name AS name, s.kind AS kind, s.startTimeUnixNano::BIGINT AS start_ns,
                   s.endTimeUnixNano::BIGINT AS end_ns, s.status.code AS status_code,
                   s.attributes AS attributes
            FROM sp""",
            [files],
        )
        row = con.execute("SELECT count(*) FROM s").fetchone()
        result["spans"] = row[0] if row else 0
    elif name in {"analyze", "reanalyze"}:
        from toolspan.analyzer import Analyzer

        memory = {"memory_limit": MEMORY_LIMIT} if MEMORY_LIMIT else {}
        with Analyzer(db, **memory) as az:
            report = az.ingest(files)
            findings = az.findings()
            summary = az.summary()
        result.update(
            spans=report.spans,
            skipped=report.skipped_files,
            calls=summary["calls"],
            findings=len(findings),
        )
    elif name == "pandas":
        import pandas as pd

        subset = 50_000
        records: list[dict[str, Any]] = []
        with open(files[0], "rb") as source:
            for line in source:
                for rs in orjson.loads(line)["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        records.extend(ss["spans"])
                if len(records) >= subset:
                    break
        frame = pd.json_normalize(records)
        # The attributes stay a list per row in json_normalize; explode them like a real analysis.
        pd.json_normalize(frame.explode("attributes")["attributes"].dropna().tolist())
        result["spans"] = len(records)
    result["seconds"] = time.perf_counter() - started
    # CPU time of every thread (not the imports): steadier than wall time on a shared machine.
    result["cpu_s"] = time.process_time() - cpu_started
    return result


def run_step(name: str, files: list[Path], db: Path | None = None) -> dict[str, Any]:
    """Run one step in a child process; add its own peak RSS (MB)."""
    command = [sys.executable, __file__, "--step", name, "--db", str(db or "")]
    command += ["--memory-limit", MEMORY_LIMIT, *map(str, files)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        out = child.stdout.read() if child.stdout else ""
        # wait4 gives this child's own peak RSS (RUSAGE_CHILDREN is a running maximum).
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"step {name} failed with exit code {child.returncode}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mb"] = round(usage.ru_maxrss / 1024)
    return result


def best_of(repeats: int, name: str, files: list[Path], db: Path | None = None) -> dict[str, Any]:
    """The fastest of ``repeats`` runs (the machine may be shared), with the highest peak RSS."""
    runs = []
    for _ in range(repeats):
        if name == "analyze" and db is not None:
            _remove_db(db)
        runs.append(run_step(name, files, db))
    best = min(runs, key=lambda run: run["seconds"])
    return {**best, "peak_rss_mb": max(run["peak_rss_mb"] for run in runs)}


def _remove_db(db: Path) -> None:
    for stale in (db, Path(f"{db}.wal")):
        stale.unlink(missing_ok=True)


def memory_scaling(total_spans: int, n_files: int) -> list[tuple[int, float, int]]:
    """(spans, seconds, peak RSS MB) of analyze into a database file, at half and full size
    (both more than one 256 MB batch: the peak is a batch's, whatever the input)."""
    rows = []
    for spans in (total_spans // 2, total_spans):
        files = generate(spans, n_files)
        db = DATA / f"scaling-{spans}.duckdb"
        _remove_db(db)
        result = run_step("analyze", files, db)
        _remove_db(db)
        rows.append((result["spans"], result["seconds"], result["peak_rss_mb"]))
    return rows


def scale(sizes: list[int], n_files: int, modes: list[str]) -> None:
    """Time (wall and CPU) and peak RSS of analyze per corpus size, in memory
    and into a database file, with the growth against the smallest size."""
    rows: dict[str, list[tuple[int, float, float, int]]] = {mode: [] for mode in modes}
    for spans in sizes:
        files = generate(spans, n_files)
        size_mb = sum(f.stat().st_size for f in files) / 1e6
        print(f"corpus: {spans:,} spans, {len(files)} files, {size_mb:,.0f} MB", flush=True)
        db = DATA / f"scale-{spans}.duckdb"
        for mode in modes:
            _remove_db(db)
            result = run_step("analyze", files, db if mode == "database file" else None)
            seconds, cpu, peak = result["seconds"], result["cpu_s"], result["peak_rss_mb"]
            rows[mode].append((result["spans"], seconds, cpu, peak))
            print(f"  {mode}: {seconds:.1f} s, CPU {cpu:.1f} s, {peak} MB", flush=True)
        _remove_db(db)
    limit = MEMORY_LIMIT or "the analyzer's default"
    print(f"\nanalyze, memory limit {limit}, {os.cpu_count()} CPUs (each run its own process)")
    print(
        f"{'mode':<14} {'spans':>11} {'seconds':>8} {'CPU s':>7} {'peak RSS':>9}"
        f" {'x spans':>8} {'x time':>7} {'x CPU':>6} {'x RSS':>6}"
    )
    for mode, measured in rows.items():
        base_spans, base_seconds, base_cpu, base_rss = measured[0]
        for spans, seconds, cpu, peak in measured:
            print(
                f"{mode:<14} {spans:>11,} {seconds:>8.1f} {cpu:>7.1f} {peak:>6} MB"
                f" {spans / base_spans:>7.2f}x {seconds / base_seconds:>6.2f}x"
                f" {cpu / base_cpu:>5.2f}x {peak / base_rss:>5.2f}x"
            )


def pairs(n: int, files: list[Path]) -> None:
    """``n`` alternating pairs of the typed unnest and analyze in memory: the
    spread of each pair's ratio, wall and CPU."""
    wall, cpu = [], []
    for index in range(1, n + 1):
        unnest, analyze = run_step("unnest", files), run_step("analyze", files)
        wall.append(analyze["seconds"] / unnest["seconds"])
        cpu.append(analyze["cpu_s"] / unnest["cpu_s"])
        print(
            f"  pair {index:>2}: unnest {unnest['seconds']:.2f} s, analyze "
            f"{analyze['seconds']:.2f} s, {wall[-1]:.2f}x (CPU {cpu[-1]:.2f}x)",
            flush=True,
        )
    print(f"analyze in memory / bare typed unnest, {n} pairs:")
    for label, ratios in (("wall", wall), ("CPU", cpu)):
        print(
            f"  {label:<4} median {statistics.median(ratios):.2f}x, "
            f"range {min(ratios):.2f}x..{max(ratios):.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1, help="best of N runs per timed step")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--db", default="", help=argparse.SUPPRESS)
    parser.add_argument(
        "--pairs", type=int, default=0, metavar="N", help="N alternating unnest/analyze pairs"
    )
    parser.add_argument("--scale", action="store_true", help="time and peak RSS per corpus size")
    parser.add_argument("--scale-spans", default="1000000,2000000,4000000", metavar="N,N,...")
    parser.add_argument(
        "--scale-modes",
        default="memory,db",
        metavar="MODE,...",
        help="with --scale: memory, db or both (a 10M run may skip one)",
    )
    parser.add_argument("--memory-limit", default="", help="the Analyzer's memory_limit")
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global MEMORY_LIMIT
    MEMORY_LIMIT = args.memory_limit
    if args.step:
        print(json.dumps(step(args.step, args.paths, args.db or None)))
        return
    if args.scale:
        names = {"memory": "in memory", "db": "database file"}
        modes = [names[mode] for mode in args.scale_modes.split(",")]
        scale([int(n) for n in args.scale_spans.split(",")], args.files, modes)
        return
    files = generate(args.spans, args.files)
    if args.pairs:
        pairs(args.pairs, files)
        return
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    print(
        f"corpus: {args.spans:,} spans, {len(files)} files, {size_mb:,.0f} MB, "
        f"{os.cpu_count()} CPUs, DuckDB threads default, best of {args.repeats} (by wall time)"
    )
    db = DATA / "bench.duckdb"
    _remove_db(db)
    n = args.repeats
    results = {
        "parse": best_of(n, "parse", files),
        "unnest": best_of(n, "unnest", files),
        "analyze": best_of(n, "analyze", files),
        "analyze_db": best_of(n, "analyze", files, db),
        # After the last analyze_db run: the database holds every file.
        "reanalyze_db": best_of(n, "reanalyze", files, db),
        "pandas": run_step("pandas", files),
    }
    pandas_full = results["pandas"]["seconds"] * args.spans / results["pandas"]["spans"]
    unnest, parse = results["unnest"]["seconds"], results["parse"]["seconds"]
    rows = [
        ("DuckDB parse floor (read_json_objects)", parse, results["parse"]),
        ("DuckDB bare typed unnest", unnest, results["unnest"]),
        ("toolspan analyze, in memory", results["analyze"]["seconds"], results["analyze"]),
        (
            "toolspan analyze, database file",
            results["analyze_db"]["seconds"],
            results["analyze_db"],
        ),
        (
            "toolspan analyze again (already ingested)",
            results["reanalyze_db"]["seconds"],
            results["reanalyze_db"],
        ),
        (
            f"pandas json_normalize (x{args.spans // results['pandas']['spans']} of a subset)",
            pandas_full,
            results["pandas"],
        ),
    ]
    unnest_cpu = results["unnest"]["cpu_s"]
    print(
        f"{'step':<48} {'seconds':>8} {'vs unnest':>10} {'vs parse':>9} {'CPU s':>7}"
        f" {'CPU vs unnest':>14} {'peak RSS':>9}"
    )
    for label, seconds, result in rows:
        # pandas is scaled from a subset: its CPU time is the subset's.
        cpu = result["cpu_s"] * seconds / result["seconds"]
        print(
            f"{label:<48} {seconds:>8.2f} {seconds / unnest:>9.2f}x {seconds / parse:>8.2f}x "
            f"{cpu:>7.2f} {cpu / unnest_cpu:>13.2f}x {result['peak_rss_mb']:>6} MB"
        )
    print(
        f"analyze: {results['analyze']['spans']:,} spans, {results['analyze']['calls']:,} calls, "
        f"{results['analyze']['findings']:,} findings; re-analysis costs "
        f"{results['reanalyze_db']['seconds'] / results['analyze_db']['seconds']:.1%}"
        " of the first run"
    )
    print("(peak RSS is each step's own child process)")
    print("memory as the input grows, analyze into a database file:")
    for spans, seconds, peak in memory_scaling(args.spans, args.files):
        print(f"  {spans:>12,} spans {seconds:>8.2f} s {peak:>6} MB peak RSS")


if __name__ == "__main__":
    main()
