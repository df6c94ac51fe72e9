"""The package as users get it: built from a clean clone with symlinks disabled.

The three parts are top-level folders mapped into ``toolspan`` by setuptools'
``package-dir``. These tests check that mapping is complete, that nothing
depends on links, and that the wheel and the sdist each install into a fresh
venv where all three parts import and read their version. No network: the
builds run without isolation and the venvs see this venv's dependencies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from ..services import stop_process

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]

# Offline and fast: nothing fetched, the build uses this venv's setuptools.
INSTALL = ("--quiet", "--no-deps", "--no-index", "--no-build-isolation")
# Imported in each fresh venv: every part, its statement files, the version.
PROBE = """
import json, sys
from importlib.metadata import version
import toolspan, toolspan.tracer, toolspan.tracer.store, toolspan.tracer.testing
import toolspan.analyzer, toolspan.dashboard, toolspan.dashboard._pages, toolspan.cli
from toolspan.analyzer import Analyzer
from toolspan.tracer.store import SQLiteStore
with Analyzer() as analyzer:  # runs every schema statement file of the analyzer
    analyzer.findings()
store = SQLiteStore(sys.argv[1])  # the store's statements, on first use
assert store.get("probe") is None
print(json.dumps({
    "version": toolspan.__version__,
    "metadata": version("toolspan"),
    "tracer": toolspan.tracer.__version__,
    "files": [m.__file__ for m in (toolspan, toolspan.tracer, toolspan.analyzer,
                                   toolspan.dashboard, toolspan.dashboard._pages)],
}))
"""


def _package_folders() -> dict[str, Path]:
    """Every package the mapped folders hold: a folder with code or statement files."""
    found: dict[str, Path] = {}
    for package, folder in SETUPTOOLS["package-dir"].items():
        root = REPO / folder
        for path in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
            if "__pycache__" in path.parts:
                continue
            if any(path.glob("*.py")) or any(path.glob("*.sql")) or any(path.glob("*.lua")):
                found[".".join((package, *path.relative_to(root).parts))] = path
    return found


def test_every_package_folder_is_listed_in_pyproject() -> None:
    assert sorted(_package_folders()) == sorted(SETUPTOOLS["packages"])


def test_the_three_parts_are_mapped_folders_not_links() -> None:
    mapping = SETUPTOOLS["package-dir"]
    assert mapping == {
        # No root folder is named toolspan: from the clone's root it would shadow
        # the installed package (python puts the working directory first).
        "toolspan": "common",
        "toolspan.tracer": "tracer",
        "toolspan.analyzer": "analyzer",
        "toolspan.dashboard": "dashboard",
        "toolspan.serve": "serve",
    }
    assert not (REPO / "toolspan").exists()
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--stage"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    links = [line.split("\t", 1)[1] for line in tracked if line.startswith("120000")]
    assert links == []


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheel and the sdist, built from a symlink-free clone of HEAD."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout of the repository")
    scratch = tmp_path_factory.mktemp("packaging")
    source = scratch / "clone"
    head = _git("-C", str(REPO), "rev-parse", "HEAD").strip()
    _git("-c", "core.symlinks=false", "clone", "--quiet", "--no-checkout", str(REPO), str(source))
    _git("-c", "core.symlinks=false", "-C", str(source), "checkout", "--quiet", head)
    dist = scratch / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "-sw", "-o", str(dist), str(source)],
        capture_output=True,
        check=True,
    )
    (wheel,) = dist.glob("toolspan-*.whl")
    (sdist,) = dist.glob("toolspan-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist, "scratch": scratch}


def _fresh_venv(where: Path) -> Path:
    """A venv without pip that also sees this venv's packages (the dependencies)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    target = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # A plain path line: this venv's site-packages is searched, but its .pth
    # files (the editable install of the checkout) are not run.
    Path(target, "_outer_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_each_artifact_installs_and_imports_all_three_parts(
    built: dict[str, Path], kind: str
) -> None:
    venv = built["scratch"] / f"venv-{kind}"
    python = _fresh_venv(venv)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            *INSTALL,
            str(built[kind]),
        ],
        capture_output=True,
        check=True,
    )
    run_dir = built["scratch"] / f"run-{kind}"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = subprocess.run(
        [python, "-c", PROBE, str(run_dir / "store.sqlite")],
        capture_output=True,
        text=True,
        check=True,
        cwd=run_dir,
        env=env,
    ).stdout
    probe = json.loads(out)
    assert (
        probe["version"] == probe["metadata"] == probe["tracer"] == PYPROJECT["project"]["version"]
    )
    installed = Path(venv).resolve()
    for file in probe["files"]:
        assert Path(file).resolve().is_relative_to(installed), file
    help_text = subprocess.run(
        [venv / "bin" / "toolspan", "--help"], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert all(command in help_text for command in ("analyze", "sql", "dashboard"))


@pytest.mark.slow
def test_the_sdist_carries_docs_license_readme_and_changelog(built: dict[str, Path]) -> None:
    with tarfile.open(built["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for path in ("LICENSE", "README.md", "CHANGELOG.md", "docs/trace-contract.md", "MANIFEST.in"):
        assert path in names, path
    assert not any(name.startswith("toolspan/tracer") for name in names)  # no link copies
    with zipfile.ZipFile(built["wheel"]) as wheel:
        wheel_names = set(wheel.namelist())
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in wheel_names)
    for data in (
        "toolspan/analyzer/sql/views.sql",
        "toolspan/dashboard/sql/macros.sql",
        "toolspan/tracer/store/redis.lua",
        "toolspan/py.typed",
    ):
        assert data in wheel_names, data


# -- as users run it: the wheel installed, from the clone's root ----------------

# Every part and adapter, imported from the clone's root: nothing there may
# shadow the installed package (python puts the working directory first).
ROOT_PROBE = """
import importlib, json, sys
names = sys.argv[1:]
print(json.dumps({name: importlib.import_module(name).__file__ for name in names}))
"""
PARTS = (
    "toolspan",
    "toolspan.cli",
    "toolspan.tracer",
    "toolspan.tracer.store",
    "toolspan.tracer.testing",
    "toolspan.analyzer",
    "toolspan.dashboard",
    "toolspan.dashboard._pages",
    *(
        f"toolspan.tracer.integrations.{path.stem}"
        for path in sorted((REPO / "tracer" / "integrations").glob("[!_]*.py"))
    ),
)
# The example programs (examples/README.md), with where each writes its spans.
EXAMPLE_OUT = {"follow_next": "{out}/follow_next", "mcp_server": None}
# What each optional extra brings that an example could import.
EXTRA_MODULES = {
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter"),
    "openai": ("openai",),
    "anthropic": ("anthropic",),
    "mcp": ("mcp",),
    "openai-agents": ("agents",),
    "pydantic-ai": ("pydantic_ai",),
    "langchain": ("langchain", "langgraph"),
    "redis": ("redis",),
    "analyzer": ("duckdb",),
    "dashboard": ("streamlit",),
    "clickhouse": ("clickhouse_connect", "chdb"),
}
# Runs an example with the modules of every extra its README line does not
# name made unimportable: an import of one of them fails the run.
RUN_BLOCKED = """
import json, runpy, sys
name, blocked = sys.argv[1], json.loads(sys.argv[2])
for module in blocked:
    sys.modules[module] = None
sys.argv = [name, *sys.argv[3:]]
runpy.run_module(f"examples.{name}", run_name="__main__", alter_sys=True)
"""


def example_programs() -> list[str]:
    return sorted(
        path.stem
        for path in (REPO / "examples").glob("*.py")
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
    )


def named_extras() -> dict[str, set[str]]:
    """Per example program, the extras its line in examples/README.md installs."""
    readme = (REPO / "examples" / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"python -m examples\.(\w+)` \|.*pip install 'toolspan\[([\w,-]+)\]'", readme)
    return {name: set(extras.split(",")) for name, extras in rows}


def _requirement_closure(extras: set[str]) -> set[str]:
    """The distributions the extras install (their unconditional requirements, recursively)."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    todo = [re.split(r"[<>=~!\[; ]", req, maxsplit=1)[0] for e in extras for req in optional[e]]
    seen: set[str] = set()
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen or name == "toolspan":
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [re.split(r"[<>=~!\[; (]", r, maxsplit=1)[0] for r in requires if "extra" not in r]
    return seen


def blocked_modules(extras: set[str]) -> list[str]:
    """The modules of the extras not named that the named ones do not bring either."""
    installed = _requirement_closure(extras)
    owners = metadata.packages_distributions()
    blocked = []
    for extra, modules in EXTRA_MODULES.items():
        for module in modules:
            top = module.split(".")[0]
            dists = {d.lower().replace("_", "-") for d in owners.get(top, [])}
            if extra not in extras and (top == "opentelemetry" or not dists & installed):
                blocked.append(module)
    return blocked


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


@pytest.fixture(scope="module")
def wheel_venv(built: dict[str, Path]) -> Path:
    """One venv with the wheel installed (not editable), for every check from the root."""
    venv = built["scratch"] / "venv-root"
    python = _fresh_venv(venv)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", *INSTALL,
         str(built["wheel"])],
        capture_output=True,
        check=True,
    )  # fmt: skip
    return venv


def _run(venv: Path, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        check=check,
        cwd=REPO,
        env=_clean_env(venv),
        timeout=120,
    )


@pytest.mark.slow
def test_from_the_clones_root_the_wheel_imports_every_part_and_runs_the_command(
    wheel_venv: Path,
) -> None:
    python = wheel_venv / "bin" / "python"
    files = json.loads(_run(wheel_venv, python, "-c", ROOT_PROBE, *PARTS).stdout)
    installed = wheel_venv.resolve()
    for name, file in files.items():
        assert Path(file).resolve().is_relative_to(installed), (name, file)
    help_text = _run(wheel_venv, wheel_venv / "bin" / "toolspan", "--help").stdout
    assert all(command in help_text for command in ("analyze", "sql", "dashboard", "clickhouse"))
    version = _run(wheel_venv, wheel_venv / "bin" / "toolspan", "--version").stdout
    assert version == f"toolspan {PYPROJECT['project']['version']}\n"


# Runs the command with the given modules made unimportable.
CLI_BLOCKED = """
import json, sys
for module in json.loads(sys.argv[1]):
    sys.modules[module] = None
from toolspan.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_the_analyzer_extra_alone_reads_foreign_spans(wheel_venv: Path) -> None:
    """Foreign spans' arguments are fingerprinted by a Python function DuckDB
    registers, which imports numpy: the analyzer extra must bring it (a user of
    ``toolspan[analyzer]`` got a traceback on every foreign trace)."""
    blocked = [] if "numpy" in _requirement_closure({"analyzer"}) else ["numpy"]
    fixture = REPO / "tests" / "analyzer" / "instrumentations" / "vercel-ai-6-on" / "spans.jsonl"
    python = wheel_venv / "bin" / "python"
    done = _run(wheel_venv, python, "-c", CLI_BLOCKED, json.dumps(blocked), "analyze", fixture,
                check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "send_email" in done.stdout


@pytest.mark.slow
def test_from_the_clones_root_every_example_program_runs(wheel_venv: Path, tmp_path: Path) -> None:
    programs = example_programs()
    extras = named_extras()
    assert sorted(extras) == programs  # each program has its line, naming its extras
    python = str(wheel_venv / "bin" / "python")
    running = {}
    for name in programs:
        out = EXAMPLE_OUT.get(name, "{out}/" + name + ".jsonl")
        argv = [python, "-c", RUN_BLOCKED, name, json.dumps(blocked_modules(extras[name]))]
        if out is not None:
            argv += ["--out", out.format(out=tmp_path)]
        running[name] = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,  # mcp_server serves stdio until its input ends
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
            env=_clean_env(wheel_venv),
        )
    failed = {}
    for name, process in running.items():
        output, _ = process.communicate(timeout=240)
        if process.returncode != 0:
            failed[name] = output[-2000:]
    assert not failed, failed
    assert not (REPO / "toolspan").exists()


@pytest.mark.slow
def test_from_the_clones_root_the_dashboard_renders_in_chromium(wheel_venv: Path) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    from ..dashboard.test_browser import CHROMIUM_ARGS, wait_for_url
    from ..services import free_port

    process = subprocess.Popen(
        [str(wheel_venv / "bin" / "toolspan"), "dashboard", "sample_traces",
         "--port", str(free_port())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env={**_clean_env(wheel_venv), "PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # its own process group: cleanup reaches the Streamlit child
    )  # fmt: skip
    try:
        url, _ = wait_for_url(process)
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
            )
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector('[data-testid="stMetric"]', timeout=60_000)
            text = page.inner_text("body")
            exceptions = page.locator('[data-testid="stException"]').count()
            browser.close()
    finally:
        stop_process(process)
    assert "ModuleNotFoundError" not in text
    assert exceptions == 0


# -- a core-only install ------------------------------------------------------

# Each command that needs an extra, and the extra.
EXTRA_OF = {"analyze": "analyzer", "sql": "analyzer", "clickhouse": "clickhouse",
            "dashboard": "dashboard"}  # fmt: skip


@pytest.mark.slow
def test_a_core_only_install_names_the_extra_each_command_needs(
    built: dict[str, Path],
) -> None:
    venv = built["scratch"] / "venv-core"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # `pip install toolspan`: the wheel with its core dependencies only (from
    # the pip cache when they are there).
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", str(built["wheel"])],
        capture_output=True,
        check=True,
    )  # fmt: skip
    toolspan = venv / "bin" / "toolspan"
    python = venv / "bin" / "python"
    assert _run(venv, python, "-c", "import duckdb", check=False).returncode == 1  # really core
    _run(venv, python, "-c", "import toolspan.tracer")
    help_text = _run(venv, toolspan, "--help").stdout
    for command, extra in EXTRA_OF.items():
        assert command in help_text
        assert f"toolspan[{extra}]" in help_text
    version = _run(venv, toolspan, "--version").stdout
    assert version == f"toolspan {PYPROJECT['project']['version']}\n"
    for command, extra in EXTRA_OF.items():
        done = _run(venv, toolspan, command, "traces/", check=False)
        assert (done.returncode, done.stdout) == (2, ""), (command, done.stderr)
        assert done.stderr == (
            f"toolspan {command} needs the {extra!r} extra: pip install 'toolspan[{extra}]' "
            f"(in a clone of toolspan: pip install '.[{extra}]')\n"
        )
