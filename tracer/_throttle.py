"""Warnings that would repeat on every call: logged at a bounded rate (a store
that is down), or once per process and tool (a declaration that needs a word)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["ThrottledWarning", "first_time"]

_SEEN: set[tuple[str, str]] = set()
_SEEN_LOCK = threading.Lock()


def first_time(topic: str, name: str) -> bool:
    """True the first time ``(topic, name)`` is asked in this process: a warning
    about one tool is said once, however many executors or calls meet it."""
    with _SEEN_LOCK:
        if (topic, name) in _SEEN:
            return False
        _SEEN.add((topic, name))
        return True


class ThrottledWarning:
    """Logs the first warning, then at most one per ``interval_s``.

    A store outage fails every call the same way: one line per call would
    bury the log (and its cost) under the outage. Warnings in between are
    counted, and the next line logged says how many were held back.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._held_back = 0

    def warning(self, message: str, *args: object) -> None:
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last < self._interval_s:
                self._held_back += 1
                return
            held_back, self._held_back, self._last = self._held_back, 0, now
        if held_back:
            message += " (and %d more like it since the last one logged)"
            args = (*args, held_back)
        self._logger.warning(message, *args)
