"""``toolspan serve``: the receiver, the spool, the continuous analyser, the
follower, the alerts and the dashboard, started and stopped together."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from .._errors import ServeError
from ..dashboard._env import LIVE_ENV, STORE_ENV
from ._alerts import Alerter
from ._enforce import DEFAULT_POLICY, Enforcer, read_policy
from ._follow import Follower
from ._grpc import MAX_QUEUED_CALLS, MAX_STREAMS_PER_CONNECTION, GrpcLimits, GrpcReceiver
from ._http import make_app
from ._live import Listener, LiveAnalyser, _stderr
from ._spool import Spool

if TYPE_CHECKING:
    from ._clickhouse import ClickHouseWriter

__all__ = ["Server", "Settings"]

DEFAULT_DIR = Path("toolspan-data")
DB_NAME = "toolspan.duckdb"
SNAPSHOT_DIR = "dashboard"


@dataclass(frozen=True)
class Settings:
    """Everything ``toolspan serve`` takes; the bounds are what memory is bounded by."""

    directory: Path = DEFAULT_DIR
    db: Path | None = None
    host: str = "127.0.0.1"
    http_port: int = 4318
    grpc_port: int = 4317
    # The dashboard's port; 0 serves no dashboard.
    dashboard_port: int = 8501
    token: str | None = field(default=None, repr=False)  # a secret: never in a repr
    follow: Path | None = None
    alert_webhook: str | None = None
    alert_on: tuple[str, ...] = ()
    write_tools: tuple[str, ...] = ()
    # One request's body, compressed or not (a gzip bomb stops here).
    max_body_bytes: int = 16 * 1024 * 1024
    # Accepted lines not yet on disk; past this, "retry later".
    max_pending_bytes: int = 64 * 1024 * 1024
    # Spooled bytes the analyser has not ingested yet; past this, "retry later".
    max_lag_bytes: int = 256 * 1024 * 1024
    # HTTP requests handled at once (uvicorn answers 503 past it).
    max_connections: int = 64
    # gRPC calls in flight at once, and bytes of gRPC request bodies read but
    # not yet converted; past either, RESOURCE_EXHAUSTED + RetryInfo.
    max_grpc_calls: int = MAX_QUEUED_CALLS
    max_grpc_queued_bytes: int = 64 * 1024 * 1024
    # gRPC calls one connection has open at once (HTTP/2
    # SETTINGS_MAX_CONCURRENT_STREAMS); past it the client queues them itself.
    max_grpc_streams: int = MAX_STREAMS_PER_CONNECTION
    retry_after_s: float = 1.0
    # Also write the spans into ClickHouse, as the collector's exporter does
    # (a clickhouse://, clickhouses:// or chdb: source), into this table.
    clickhouse: str | None = field(default=None, repr=False)  # may hold a password
    clickhouse_table: str = "otel_traces"
    # Quarantine what live findings name in this shared store (see _enforce).
    enforce: str | None = field(default=None, repr=False)  # a Redis URL may hold a password
    enforce_policy: Path | None = None

    @property
    def db_path(self) -> Path:
        return self.db if self.db is not None else self.directory / DB_NAME


def _enforcer(store: str, policy: Path | None) -> Enforcer:
    from ..tracer import ToolspanError
    from ..tracer.store import open_store

    rules = read_policy(policy) if policy is not None else DEFAULT_POLICY
    try:
        opened = open_store(store)
    except ToolspanError as exc:
        raise ServeError(f"--enforce: {exc}") from exc
    return Enforcer(opened, rules, log=_stderr)


def is_loopback(host: str) -> bool:
    """Whether ``host`` listens on this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Server:
    """Start with :meth:`start`, stop with :meth:`stop` (or use ``with``)."""

    def __init__(self, settings: Settings) -> None:
        if not is_loopback(settings.host) and not settings.token:
            raise ServeError(
                f"--host {settings.host} listens beyond this machine: give --token as well"
            )
        self.settings = settings
        self.spool = Spool(
            settings.directory,
            max_pending_bytes=settings.max_pending_bytes,
            max_lag_bytes=settings.max_lag_bytes,
            retry_after_s=settings.retry_after_s,
        )
        self.analyser: LiveAnalyser | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._http_thread: threading.Thread | None = None
        self.grpc: GrpcReceiver | None = None
        self._dashboard: subprocess.Popen[bytes] | None = None
        self._follower: Follower | None = None
        self.alerter: Alerter | None = None
        self.enforcer: Enforcer | None = None
        self.clickhouse: ClickHouseWriter | None = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def snapshots(self) -> Path | None:
        if not self.settings.dashboard_port:
            return None
        return self.settings.directory / SNAPSHOT_DIR

    def start(self) -> Server:
        """Start every part; on failure, stop what started and raise ``ServeError``."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        s = self.settings
        self.spool.open()
        listeners: list[Listener] = []
        if s.alert_webhook:
            self.alerter = Alerter(
                s.alert_webhook, kinds=s.alert_on, dashboard_url=self.dashboard_url
            ).start()
            listeners.append(self.alerter.submit)
        if s.enforce is not None:
            self.enforcer = _enforcer(s.enforce, s.enforce_policy)
            listeners.append(self.enforcer.submit)
        self.analyser = LiveAnalyser(
            self.spool,
            s.db_path,
            snapshots=self.snapshots,
            listeners=listeners,
            write_tools=s.write_tools,
        ).start()
        self._start_http()
        limits = GrpcLimits(
            max_calls=s.max_grpc_calls,
            max_queued_bytes=s.max_grpc_queued_bytes,
            max_streams_per_connection=s.max_grpc_streams,
            retry_after_s=s.retry_after_s,
        )
        self.grpc = GrpcReceiver(
            self.spool,
            host=s.host,
            port=s.grpc_port,
            token=s.token,
            max_body_bytes=s.max_body_bytes,
            limits=limits,
        ).start()
        if s.follow is not None:
            self._follower = Follower(s.follow, self.spool, s.directory).start()
        if s.clickhouse is not None:
            from ._clickhouse import ClickHouseWriter  # clickhouse-connect: an extra

            self.clickhouse = ClickHouseWriter(
                self.spool, s.clickhouse, s.directory, table=s.clickhouse_table, log=_stderr
            ).start()
        if self.snapshots is not None:
            self._start_dashboard(self.snapshots)

    @property
    def dashboard_url(self) -> str | None:
        port = self.settings.dashboard_port
        return f"http://127.0.0.1:{port}" if port else None

    def _start_http(self) -> None:
        s = self.settings
        assert self.analyser is not None
        app = make_app(self.spool, self.analyser, token=s.token, max_body_bytes=s.max_body_bytes)
        config = uvicorn.Config(
            app,
            host=s.host,
            port=s.http_port,
            log_level="warning",
            access_log=False,
            limit_concurrency=s.max_connections,
            lifespan="off",
        )
        server = uvicorn.Server(config)
        self._uvicorn = server
        listener = _listen(s.host, s.http_port)
        self._http_thread = threading.Thread(
            target=server.run, kwargs={"sockets": [listener]}, name="toolspan-http", daemon=True
        )
        self._http_thread.start()
        while not server.started:
            if not self._http_thread.is_alive():
                raise ServeError(f"cannot listen for OTLP/HTTP on {s.host}:{s.http_port}")
            self._http_thread.join(0.02)

    def _start_dashboard(self, snapshots: Path) -> None:
        from ..dashboard import _launch

        port = self.settings.dashboard_port
        # The dashboard has no login of its own: it stays on loopback.
        env = {**os.environ, LIVE_ENV: str(snapshots.resolve())}
        if self.settings.enforce is not None:  # its Quarantines page lists and lifts them
            env[STORE_ENV] = self.settings.enforce
        self._dashboard = subprocess.Popen(_launch.streamlit_command("127.0.0.1", port), env=env)
        if not _launch._wait_ready(self._dashboard, "127.0.0.1", port):
            raise ServeError(f"the dashboard did not start on 127.0.0.1:{port}")

    def stop(self) -> None:
        """Stop taking requests, write what was accepted, ingest it, close."""
        if self._dashboard is not None:
            from ..dashboard import _launch

            _launch._stop(self._dashboard)
            self._dashboard = None
        if self._follower is not None:
            self._follower.stop()
            self._follower = None
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
            if self._http_thread is not None:
                self._http_thread.join()
            self._uvicorn = None
        if self.grpc is not None:
            self.grpc.stop(grace_s=2)
            self.grpc = None
        self.spool.close()
        if self.analyser is not None:
            self.analyser.stop()  # seals the last segment: the writer writes it next
            self.analyser = None
        if self.clickhouse is not None:
            self.clickhouse.stop()
            self.clickhouse = None
        if self.alerter is not None:
            self.alerter.stop()
            self.alerter = None
        if self.enforcer is not None:  # after the analyser: its last findings are enforced
            self.enforcer.store.close()
            self.enforcer = None

    def describe(self) -> str:
        """What listens where, for the start-up message."""
        s = self.settings
        shown = f"[{s.host}]" if ":" in s.host else s.host
        lines = [
            f"OTLP/HTTP  http://{shown}:{s.http_port}/v1/traces  (API: /api/v1/summary, "
            "/api/v1/findings)",
            f"OTLP/gRPC  {shown}:{s.grpc_port}",
            f"spool      {s.directory}   database {s.db_path}",
        ]
        if self.dashboard_url:
            lines.append(f"dashboard  {self.dashboard_url}")
        if s.follow is not None:
            lines.append(f"following  {s.follow}")
        if self.clickhouse is not None:
            lines.append(f"clickhouse {self.clickhouse.display()}")
        if self.enforcer is not None:
            kinds = ", ".join(sorted(self.enforcer.policy))
            lines.append(f"enforcing  {kinds}: quarantines in the --enforce store")
        lines.append(f"agents     OTEL_EXPORTER_OTLP_ENDPOINT=http://{shown}:{s.http_port}")
        return "\n".join(lines)


def _listen(host: str, port: int) -> socket.socket:
    """The HTTP port, bound here: uvicorn would exit the process on a port in use."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise ServeError(f"cannot listen for OTLP/HTTP on {host}:{port} ({exc.strerror})") from exc
    listener.listen(2048)
    return listener
