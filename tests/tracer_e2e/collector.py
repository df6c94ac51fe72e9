"""The rotel agent (a real OTLP collector, from PyPI) as a test subprocess."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Literal, Self

import rotel

from ..services import LOOPBACK, Running, free_port, wait_for_port

ROTEL_AGENT = Path(rotel.__file__).parent / "rotel-agent"


class RotelCollector(Running):
    """``rotel-agent start`` with OTLP gRPC and HTTP receivers on free ports.

    Everything it receives is batched for at most 50 ms and forwarded over
    OTLP (``forward_protocol``) to ``forward_to``.
    """

    def __init__(
        self,
        forward_to: str,
        workdir: Path,
        *,
        forward_protocol: Literal["grpc", "http"] = "grpc",
    ) -> None:
        self.grpc_port = free_port()
        self.http_port = free_port()
        self._log = workdir / "rotel-stdout.log"
        self._command = [
            str(ROTEL_AGENT),
            "start",
            "--otlp-grpc-endpoint",
            f"{LOOPBACK}:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"{LOOPBACK}:{self.http_port}",
            "--exporter",
            "otlp",
            "--otlp-exporter-protocol",
            forward_protocol,
            "--otlp-exporter-endpoint",
            forward_to,
            "--batch-timeout",
            "50ms",
            "--pid-file",
            str(workdir / "rotel.pid"),
            "--log-file",
            str(workdir / "rotel.log"),
        ]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def grpc_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    def start(self) -> Self:
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(self._command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(self.grpc_port)
            wait_for_port(self.http_port)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"rotel did not start: {self.output()}") from None
        return self

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=5)
        self._process = None

    def output(self) -> str:
        return self._log.read_text(errors="replace")
