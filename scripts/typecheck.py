"""Type-check every module of the ``toolspan`` package once, under its installed name.

The three parts live in top-level folders (``tracer/``, ``analyzer/``,
``dashboard/``) that setuptools maps into ``toolspan`` (``package-dir`` in
pyproject.toml). mypy finds packages by folder, so ``mypy -p toolspan`` alone
would only see ``common/`` (the package root, mapped as ``toolspan``): this
script hands mypy every file with its module name, read from the same
``package-dir`` table, and the options of pyproject.toml (``[tool.mypy]``,
strict). Errors name the real files.

Usage: ``python scripts/typecheck.py`` (``make typecheck``).
"""

from __future__ import annotations

import sys
import time
import tomllib
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, Path]:
    """Package name -> folder, as pyproject.toml maps them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {package: ROOT / folder for package, folder in mapping.items()}


def sources() -> list[BuildSource]:
    """One source per module of the installed package, in a stable order."""
    found: list[BuildSource] = []
    for package, folder in package_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if not all(
                (folder / Path(*parts[:i]) / "__init__.py").exists() for i in range(len(parts))
            ):
                continue  # a folder that is no package (data, scripts)
            names = parts[:-1] if parts[-1] == "__init__" else parts
            found.append(BuildSource(str(path.relative_to(ROOT)), ".".join((package, *names))))
    return found


def main() -> int:
    started = time.time()
    # The options (and config file) exactly as `mypy toolspan` would read them.
    _, options = process_options(["toolspan"], require_targets=True)
    targets = sources()
    errors: list[str] = []

    def flush(_filename: str | None, messages: list[str], _serious: bool) -> None:
        errors.extend(messages)
        for message in messages:
            print(message)

    try:
        build.build(targets, options, flush_errors=flush)
    except CompileError as exc:
        for message in exc.messages:
            print(message)
        return 2
    files = {line.split(":", 1)[0] for line in errors if ": error:" in line}
    count = sum(": error:" in line for line in errors)
    took = f"{time.time() - started:.1f} s"
    if count:
        print(
            f"Found {count} errors in {len(files)} files (checked {len(targets)} modules, {took})"
        )
        return 1
    print(f"Success: no issues found in {len(targets)} source files ({took})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
