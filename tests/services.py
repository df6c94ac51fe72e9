"""Helpers for tests that start real services: ports, readiness, start/stop."""

from __future__ import annotations

import socket
import time
from types import TracebackType
from typing import Self

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
