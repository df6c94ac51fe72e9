"""A real redis-server for tests: started on a free loopback port, stopped afterwards.

    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)

Uses ``redis-server`` from PATH (Debian's package; ``make test`` installs it). A
missing binary is an error, not a skip: the Redis tests must run in CI.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

import redis

from .services import Running, free_port

__all__ = ["RedisServer", "RedisServerError"]


class RedisServerError(RuntimeError):
    """redis-server is missing or did not come up."""


Persistence = Literal["none", "everysec", "always"]
_PERSISTENCE_ARGS: dict[str, list[str]] = {
    "none": ["--appendonly", "no"],
    "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "always": ["--appendonly", "yes", "--appendfsync", "always"],
}


class RedisServer(Running):
    """One redis-server process in its own temp directory.

    ``persistence``: ``"none"`` (no RDB, no AOF: a restart comes back empty),
    ``"everysec"`` or ``"always"`` (AOF with that fsync policy). Faults for the
    chaos tests: :meth:`kill` (SIGKILL), :meth:`restart` (same port and
    directory, so the AOF is replayed), :meth:`pause` / :meth:`resume`.
    """

    def __init__(
        self,
        *,
        executable: str = "redis-server",
        start_timeout_s: float = 10.0,
        persistence: Persistence = "none",
    ):
        path = shutil.which(executable)
        if path is None:
            raise RedisServerError(
                f"{executable!r} is not on PATH: install Debian's redis-server package "
                "(`make system-deps` or `apt-get install redis-server`)"
            )
        self._executable = path
        self._start_timeout_s = start_timeout_s
        self._persistence = persistence
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.port = 0

    @property
    def persistence(self) -> Persistence:
        return self._persistence

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self._dir = tempfile.TemporaryDirectory(prefix="toolspan-redis-")
        # The port can be taken between probing and binding; try a few.
        for _ in range(5):
            self.port = free_port()
            if self._try_start(Path(self._dir.name)):
                return self
        log = (Path(self._dir.name) / "redis.log").read_text(errors="replace")
        self.stop()
        raise RedisServerError(f"redis-server did not start; its log:\n{log}")

    def _try_start(self, workdir: Path) -> bool:
        self._process = subprocess.Popen(
            [
                self._executable,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(workdir),
                "--save", "",
                *_PERSISTENCE_ARGS[self._persistence],
                "--logfile", str(workdir / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1.0)
        deadline = time.monotonic() + self._start_timeout_s
        try:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    return False  # it exited, most likely because the port was taken
                try:
                    if client.ping():
                        return True
                except redis.ConnectionError:
                    time.sleep(0.02)
        finally:
            client.close()
        self._terminate()
        return False

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @property
    def pid(self) -> int:
        assert self._process is not None, "not running"
        return self._process.pid

    def kill(self) -> None:
        """SIGKILL the server: no shutdown, no final fsync."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()

    def restart(self) -> None:
        """Start again on the same port and directory (an AOF, if any, is replayed)."""
        assert self._dir is not None, "never started"
        if not self._try_start(Path(self._dir.name)):
            raise RedisServerError(f"redis-server did not restart on port {self.port}")

    def snapshot_aof(self, into: Path) -> None:
        """Copy the append-only files as they are now into ``into``.

        Every write acknowledged so far is in them (Redis writes the AOF before it
        replies; only the fsync is deferred under ``everysec``), so restoring the copy
        after `kill` loses exactly the writes made since: a power cut under
        ``everysec`` that took the last fraction of a second. A SIGKILL alone loses
        nothing, since the kernel keeps what was written.
        """
        assert self._dir is not None and self._persistence != "none", "no AOF to copy"
        source = Path(self._dir.name) / "appendonlydir"
        shutil.rmtree(into, ignore_errors=True)
        shutil.copytree(source, into)

    def restore_aof(self, snapshot: Path) -> None:
        """Put a `snapshot_aof` copy back in place (the server must be stopped)."""
        assert self._process is None, "kill the server before restoring its files"
        assert self._dir is not None, "never started"
        target = Path(self._dir.name) / "appendonlydir"
        shutil.rmtree(target)
        shutil.copytree(snapshot, target)

    def pause(self) -> None:
        """Stop the process (SIGSTOP): connections hang, as to a host that went away."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()  # a paused server would ignore SIGTERM
        self._terminate()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
