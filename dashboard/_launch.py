"""Start the Streamlit app on a database, in a child process, until Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from ._env import DB_ENV, SOURCE_ENV, STORE_ENV
from ._errors import DashboardError

if TYPE_CHECKING:  # importing it pulls in pandas: not for the console's child process
    from ._clickhouse import SourceSpec

__all__ = ["launch", "launch_source", "streamlit_command"]

APP = Path(__file__).with_name("app.py")
_READY_TIMEOUT_S = 60.0
# Recognised to warn and to probe locally; never a default.
_ALL_INTERFACES = ("0.0.0.0", "::", "")  # noqa: S104


def streamlit_command(host: str, port: int) -> list[str]:
    """The ``streamlit run`` command line of the app (headless, no telemetry)."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "viewer",
    ]


def launch(
    db_path: Path, *, host: str = "127.0.0.1", port: int = 8501, store: str | None = None
) -> int:
    """Serve the dashboard on ``db_path`` at ``host:port``; block until Ctrl-C.

    Returns the exit code: 0 after Ctrl-C, Streamlit's own code if it stops by
    itself, 2 when it cannot start (no database, port in use). ``store`` is
    the shared store the Quarantines page reads (default: ``TOOLSPAN_STORE``).
    """
    try:
        _check_startable(db_path, host, port)
    except DashboardError as exc:
        print(f"toolspan dashboard: error: {exc}", file=sys.stderr)
        return 2
    return _serve({DB_ENV: str(db_path.resolve()), **_store_env(store)}, str(db_path), host, port)


def launch_source(
    spec: SourceSpec, *, host: str = "127.0.0.1", port: int = 8501, store: str | None = None
) -> int:
    """Serve the dashboard on a ClickHouse source (the app's process opens it:
    chDB runs one engine per process); block until Ctrl-C."""
    try:
        _check_port(host, port)
    except DashboardError as exc:
        print(f"toolspan dashboard: error: {exc}", file=sys.stderr)
        return 2
    # The source (credentials included) goes to the app in its environment,
    # never on a command line; messages name it without them.
    return _serve({SOURCE_ENV: spec.to_env(), **_store_env(store)}, spec.display(), host, port)


def _store_env(store: str | None) -> dict[str, str]:
    # In the environment, like a source: a Redis URL may hold a password.
    return {} if store is None else {STORE_ENV: store}


def _serve(extra_env: dict[str, str], label: str, host: str, port: int) -> int:
    env = {**os.environ, **extra_env}
    if DB_ENV not in extra_env:
        env.pop(DB_ENV, None)
    _stop_on_sigterm()
    process = subprocess.Popen(streamlit_command(host, port), env=env)
    try:
        if _wait_ready(process, host, port):
            shown = f"[{host}]" if ":" in host else host
            print(f"toolspan dashboard: {label} at http://{shown}:{port}  (Ctrl-C to stop)")
            if host in _ALL_INTERFACES:
                print("toolspan dashboard: warning: listening on every network interface")
        sys.stdout.flush()
        return process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(process)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop_on_sigterm() -> None:
    # A service manager stops us with SIGTERM: treat it like Ctrl-C so the
    # Streamlit child and a temporary database are cleaned up too.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
        # A parent may hand us SIGINT ignored or blocked (a shell's background job,
        # or a process whose embedded engine masks signals): Ctrl-C must still stop us.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _check_startable(db_path: Path, host: str, port: int) -> None:
    if not db_path.is_file():
        raise DashboardError(f"no database at {db_path}")
    _check_port(host, port)


def _check_port(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the server will (Tornado sets SO_REUSEADDR): the sockets of a
        # dashboard stopped a moment ago, in TIME_WAIT, do not hold the port;
        # a listening socket still does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise DashboardError(
                f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port"
            ) from exc


def _wait_ready(process: subprocess.Popen[bytes], host: str, port: int) -> bool:
    probe_host = "127.0.0.1" if host in _ALL_INTERFACES else host
    if ":" in probe_host:
        probe_host = f"[{probe_host}]"
    url = f"http://{probe_host}:{port}/_stcore/health"
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
