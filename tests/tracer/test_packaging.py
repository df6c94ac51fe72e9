"""A service that only instruments its tools pulls in neither DuckDB nor Streamlit."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_importing_the_tracer_loads_no_sdk_duckdb_or_streamlit():
    # The shared part of the integrations too: each SDK loads only with its adapter.
    probe = (
        "import sys, toolspan.tracer, toolspan.tracer.store, toolspan.tracer.testing\n"
        "from toolspan.tracer.integrations import Declarations, model_reply\n"
        "heavy = [m for m in ('duckdb', 'streamlit', 'pandas', 'opentelemetry.sdk', 'redis',"
        " 'openai', 'anthropic', 'mcp', 'httpx2', 'pydantic',"
        " 'agents', 'pydantic_ai', 'langchain', 'langchain_core', 'langgraph')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == ""


def test_core_dependencies_leave_the_heavy_parts_to_extras():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for heavy in ("duckdb", "streamlit", "pandas", "opentelemetry-sdk", "redis"):
        assert heavy not in core
    extras = project["optional-dependencies"]
    assert any("duckdb" in d for d in extras["analyzer"])
    assert any("streamlit" in d for d in extras["dashboard"])
    assert project["scripts"]["toolspan"] == "toolspan.cli:main"


def test_each_framework_adapter_has_its_extra_and_dev_installs_them():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, package in (
        ("openai-agents", "openai-agents"),
        ("pydantic-ai", "pydantic-ai-slim"),
        ("langchain", "langchain"),
        ("langchain", "langgraph"),
    ):
        assert any(d.startswith(package) for d in extras[extra]), (extra, package)
    assert "toolspan[openai-agents,pydantic-ai,langchain]" in extras["dev"]


def test_the_provider_adapters_work_without_importing_their_sdks():
    # They read the SDKs' objects by field name: an app that passes dicts needs no SDK.
    probe = (
        "import sys, toolspan.tracer.integrations.openai, toolspan.tracer.integrations.anthropic\n"
        "print(','.join(m for m in ('openai', 'anthropic', 'mcp', 'httpx2') if m in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == ""


def test_each_adapter_has_its_extra():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, package in (("openai", "openai"), ("anthropic", "anthropic"), ("mcp", "mcp")):
        assert any(d.startswith(package) for d in extras[extra])
