"""Helpers for tests that start real services: ports, readiness, start/stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

LOOPBACK = "127.0.0.1"
_POLL_S = 0.02


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (for child processes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    """Block until something accepts connections on ``port``, or raise."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {LOOPBACK}:{port}") from None
            time.sleep(_POLL_S)


class Running:
    """``with service:`` starts it and always stops it (receivers, collectors)."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def recording_http_server(body: bytes = b'{"type": "string"}') -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that answers every GET with ``body`` (JSON) and
    records the paths asked for: (its base URL, those paths). A test that
    something was never fetched asserts the list stays empty."""
    seen: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((LOOPBACK, 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def stop_process(process: subprocess.Popen[str], timeout_s: float = 15.0) -> None:
    """Stop a server started in its own session: Ctrl-C first (it cleans up),
    then the whole process group if it has not ended within ``timeout_s``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
