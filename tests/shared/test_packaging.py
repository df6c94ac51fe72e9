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
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

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
