"""Latency ``toolspan mcp proxy`` adds to a tool call over stdio: proxy against direct.

One fast read tool on a real ``mcp`` SDK server (this file with ``--serve``),
reached by a real SDK client over stdio twice at once: directly, and through
``toolspan mcp proxy`` (the CLI, no trace file: the default span pipeline
with no exporter). Calls alternate between the two so load changes hit both
alike; each call's wall time is measured on the client. Printed: p50 and p99
of each, the added latency (proxy - direct) and the ratio, and the load
average before and after (the machine may be shared), and the CPU time per
measured call of the proxy process and of the direct server process (from
/proc: load-robust where wall time on a shared machine is not; the proxy's
figure is what it adds on top of one more stdio hop each way).

``--runs N`` repeats the whole measurement N times (new processes each) and
prints each run's line and then the medians over the runs: on a shared
machine one run can land on a burst of load.

    .venv/bin/python bench/mcp_proxy_bench.py [--calls 1000] [--warmup 100] [--runs 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
CONFIG = """\
timeout_s = 30
[tools.get_order]
side_effect = "read"
"""


def serve() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    async def get_order(order_id: str) -> dict[str, str]:
        """Look up an order."""
        return {"order_id": order_id, "status": "shipped"}

    server.run("stdio")


def _upstream() -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--serve"]


async def measure(
    calls: int, warmup: int, config: Path
) -> tuple[list[float], list[float], dict[str, float]]:
    direct_cmd = _upstream()
    proxy_args = ["-m", "toolspan.cli", "mcp", "proxy", "--config", str(config), "--"]
    direct = StdioServerParameters(command=direct_cmd[0], args=direct_cmd[1:], cwd=str(REPO))
    proxy = StdioServerParameters(
        command=sys.executable, args=[*proxy_args, *direct_cmd], cwd=str(REPO)
    )
    times: dict[str, list[float]] = {"direct": [], "proxy": []}
    async with Client(direct, mode="legacy") as plain, Client(proxy, mode="legacy") as guarded:
        clients = {"direct": plain, "proxy": guarded}
        for n in range(warmup + calls):
            if n == warmup:
                cpu_before = _children_cpu_s()
            for name, client in clients.items():
                # A new order each call: the same answer to the same call is a loop to the proxy.
                arguments = {"order_id": f"A-{n}"}
                started = time.perf_counter()
                result = await client.call_tool("get_order", arguments)
                elapsed = time.perf_counter() - started
                assert not result.is_error, result
                if n >= warmup:
                    times[name].append(elapsed)
        cpu_after = _children_cpu_s()
    cpu_s = {name: cpu_after[name] - cpu_before[name] for name in cpu_after}
    return times["direct"], times["proxy"], cpu_s


def _children_cpu_s() -> dict[str, float]:
    """User + system CPU seconds of this process's children (Linux /proc): the
    ``toolspan mcp proxy`` process and the direct server's (the proxy's own
    upstream is its child, not ours)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {"direct": float("nan"), "proxy": float("nan")}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) != os.getpid():
            continue
        name = "proxy" if b"mcp\0proxy" in cmdline else "direct"
        found[name] = (int(fields[11]) + int(fields[12])) / tick
    return found


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    print(f"{args.calls} calls each over stdio ({args.warmup} warm-up), {os.cpu_count()} CPUs")
    runs = [_run(args.calls, args.warmup, n + 1) for n in range(args.runs)]
    if len(runs) > 1:
        print(f"median of {len(runs)} runs:")
        _print_figures({key: statistics.median(run[key] for run in runs) for key in runs[0]})
    return 0


def _run(calls: int, warmup: int, number: int) -> dict[str, float]:
    """One measurement in new processes; its figures (ms, ratios, load) printed and returned."""
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "proxy.toml"
        config.write_text(CONFIG)
        direct, proxy, cpu_s = anyio.run(measure, calls, warmup, config)
    figures = {"load_before": before, "load_after": os.getloadavg()[0]}
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        figures[f"direct_{label}"] = _percentile(direct, q) * 1e3
        figures[f"proxy_{label}"] = _percentile(proxy, q) * 1e3
    figures["direct_mean"] = statistics.fmean(direct) * 1e3
    figures["proxy_mean"] = statistics.fmean(proxy) * 1e3
    figures["proxy_cpu"] = cpu_s["proxy"] / calls * 1e3
    figures["direct_cpu"] = cpu_s["direct"] / calls * 1e3
    for label in ("p50", "p99"):
        base, through = figures[f"direct_{label}"], figures[f"proxy_{label}"]
        figures[f"added_{label}"] = through - base
        figures[f"ratio_{label}"] = through / base
    print(f"run {number}:")
    _print_figures(figures)
    return figures


def _print_figures(f: dict[str, float]) -> None:
    print(f"  load average (1 min) before {f['load_before']:.2f}, after {f['load_after']:.2f}")
    print(f"  {'':8} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name in ("direct", "proxy"):
        print(
            f"  {name:8} {f[name + '_p50']:8.3f} {f[name + '_p99']:8.3f} {f[name + '_mean']:8.3f}"
        )
    print(
        f"  CPU per call: proxy process {f['proxy_cpu']:.3f} ms,"
        f" direct server process {f['direct_cpu']:.3f} ms"
        f" (proxy/direct {f['proxy_cpu'] / f['direct_cpu']:.2f}x)"
    )
    for label in ("p50", "p99"):  # a run's own difference and ratio (medians: of the runs')
        added, ratio = f[f"added_{label}"], f[f"ratio_{label}"]
        print(f"  added {label}: {added:.3f} ms (proxy/direct {ratio:.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
