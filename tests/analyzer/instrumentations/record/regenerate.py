"""Records the instrumentation fixtures again by running the real libraries.

    .venv/bin/python -m tests.analyzer.instrumentations.record.regenerate [STACK ...]

Each stack runs the scripted agent of ``scenario.json`` offline, capture on and
off, and writes ``tests/analyzer/instrumentations/<stack>-<capture>/`` with
``spans.jsonl`` (OTLP/JSON lines; gzipped as ``spans.jsonl.gz`` when over
200 KB) and ``labels.json`` (the library versions,
which trace is which scenario, what must and must not be found). JS stacks run
``js/record.mjs`` (or their own script, ``JS_SCRIPTS``) with node (``npm ci``
in ``js/`` first); Python stacks run ``record_py.py`` (or their own module,
``OWN_MODULE``) in a process of their own (instrumentors patch globally and
read their capture settings from the environment when they start).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent
ROOT = FIXTURES.parents[2]
SCENARIO: dict[str, Any] = json.loads((HERE / "scenario.json").read_text())

JS_STACKS = {"vercel-ai-4": "4", "vercel-ai-5": "5", "vercel-ai-6": "6"}
# JS stacks with a recorder of their own in js/ (run as `node SCRIPT on|off OUT`):
JS_SCRIPTS = {
    # Vercel AI SDK 7 writes its spans through @ai-sdk/otel, no longer from `ai`.
    "vercel-ai-7": "vercel_ai_7.mjs",
    # The openai npm client + OpenInference; the app's tools are not instrumented.
    "openai-openinference-js": "openai_openinference.mjs",
    # LangChain.js 1.x instrumented by OpenInference / OpenLLMetry (js/langchainjs.mjs).
    "langchainjs-openinference": "langchainjs_openinference.mjs",
    "langchainjs-openllmetry": "langchainjs_openllmetry.mjs",
}
PY_STACKS = (
    "langchain-openinference",
    "langchain-openllmetry",
    "openai-openinference",
    "openai-openllmetry",
    "google-adk",
    "strands",
    "pydantic-ai",
    "openai-agents-openinference",
    "ms-agent-framework",
    "mlflow",
    "langfuse",
    "semantic-kernel",
)
# google-adk pins opentelemetry-api <= 1.44, below this project's pin: it is
# recorded in a venv of its own, named by TOOLSPAN_ADK_PYTHON, e.g.
#   python3 -m venv /tmp/adk && /tmp/adk/bin/pip install google-adk==2.13.0 \
#     'opentelemetry-sdk<=1.44' opentelemetry-exporter-otlp-json-file
#   TOOLSPAN_ADK_PYTHON=/tmp/adk/bin/python .venv/bin/python -m ... google-adk
# strands-agents 1.62 wants mcp < 2.3 (dev has 2.3): TOOLSPAN_STRANDS_PYTHON, the
# same way with `pip install strands-agents opentelemetry-exporter-otlp-json-file`.
# semantic-kernel 1.45 wants mcp < 2 and pydantic < 2.14: TOOLSPAN_SK_PYTHON, with
# `pip install semantic-kernel==1.45.0 opentelemetry-exporter-otlp-json-file`.
OWN_PYTHON = {
    "google-adk": "TOOLSPAN_ADK_PYTHON",
    "strands": "TOOLSPAN_STRANDS_PYTHON",
    "semantic-kernel": "TOOLSPAN_SK_PYTHON",
}
# Stacks whose recorder is a module of its own (record_py.py runs the others).
OWN_MODULE = {
    "pydantic-ai": "py_pydantic_ai",
    "openai-agents-openinference": "py_openai_agents",
    "ms-agent-framework": "py_ms_agent_framework",
    "mlflow": "py_mlflow",
    "langfuse": "py_langfuse",
    "semantic-kernel": "py_semantic_kernel",
}
# The scenario's tools as a stack names them, where that is not the script's
# name: Semantic Kernel's is <plugin>-<function>, to the model and on its spans
# (the recorder's plugin is "support"), so write tools are declared so too.
TOOL_NAMES = {"semantic-kernel": "support-{}"}
STACKS = (*JS_STACKS, *JS_SCRIPTS, *PY_STACKS)
CAPTURES = ("on", "off")


def record(stack: str, capture: str, out: Path) -> dict[str, Any]:
    """Run one stack's recorder into ``out``; its ``{"traces", "versions"}``."""
    if stack in JS_STACKS:
        command = ["node", str(HERE / "js" / "record.mjs"), JS_STACKS[stack], capture, str(out)]
    elif stack in JS_SCRIPTS:
        command = ["node", str(HERE / "js" / JS_SCRIPTS[stack]), capture, str(out)]
    else:
        module = f"tests.analyzer.instrumentations.record.{OWN_MODULE.get(stack, 'record_py')}"
        python = os.environ.get(OWN_PYTHON.get(stack, ""), sys.executable)
        command = [python, "-m", module, stack, capture, str(out)]
    done = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def labels(stack: str, capture: str, recorded: dict[str, Any]) -> dict[str, Any]:
    """What the analyzer must read and find in one recording. Where the tools
    are not instrumented, the model's requested calls are the only evidence
    (``source: "requested"``): repeats of them, never an executed write."""
    requested = SCENARIO["requested"]
    name = TOOL_NAMES.get(stack, "{}").format
    if stack in requested["stacks"]:
        source, table = "requested", requested
        calls = requested["tool_calls"][capture]
    else:
        source, table = "tool_span", SCENARIO
        calls = sum(len(script) for script in SCENARIO["scenarios"].values())
    return {
        "stack": stack,
        "source": source,
        "library_versions": recorded["versions"],
        "capture": capture,
        "write_tools": [name(tool) for tool in SCENARIO["write_tools"]],
        "tools": sorted(
            {name(tool) for calls in SCENARIO["scenarios"].values() for tool, _ in calls}
        ),
        "tool_calls": calls,
        "expected": [{**f, "tool": name(f["tool"])} for f in table["expected"][capture]],
        "not_expected": [{**f, "tool": name(f["tool"])} for f in table["not_expected"][capture]],
        "traces": recorded["traces"],
    }


# A fixture over this is kept gzipped (the analyzer reads .jsonl.gz as it is):
# LangChain + OpenLLMetry writes every message history into every graph step.
MAX_PLAIN = 200_000


def _keep_small(spans: Path) -> None:
    packed = spans.with_name(spans.name + ".gz")
    packed.unlink(missing_ok=True)
    if spans.stat().st_size > MAX_PLAIN:
        # mtime 0: the same spans give the same bytes.
        packed.write_bytes(gzip.compress(spans.read_bytes(), mtime=0))
        spans.unlink()


def regenerate(stack: str, capture: str) -> Path:
    folder = FIXTURES / f"{stack}-{capture}"
    folder.mkdir(exist_ok=True)
    spans = folder / "spans.jsonl"
    recorded = record(stack, capture, spans)
    _keep_small(spans)
    text = json.dumps(labels(stack, capture, recorded), indent=2, sort_keys=True)
    (folder / "labels.json").write_text(text + "\n")
    return folder


def main(argv: list[str]) -> int:
    for stack in argv or STACKS:
        if stack not in STACKS:
            print(f"unknown stack {stack!r}; one of {', '.join(STACKS)}", file=sys.stderr)
            return 2
        for capture in CAPTURES:
            print(regenerate(stack, capture).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
