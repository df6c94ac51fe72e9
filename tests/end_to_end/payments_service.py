"""A payments service on loopback that refunds orders over real HTTP, with scripted faults.

``POST /refunds`` (JSON ``{"order_id", "amount"}``) records a refund in its
ledger and answers ``{"refund_id", ...}``; ``GET /refunds?order_id=...`` lists
an order's refunds (what a read-back asks). ``honours_keys=False`` is the
service the newcomer met: it ignores the ``Idempotency-Key`` header, so every
refund request that commits adds a row. ``honours_keys=True`` answers a repeated
key with the refund it stored.

``faults`` scripts the first refund requests, one each: ``"commit_then_hang"``
commits the refund, then holds the response until the service stops (the
client's timeout fires: a gateway timeout in front of a backend that did the
work); ``"429"`` refuses with ``Retry-After: 0`` and commits nothing; ``"ok"``
(and every request after the script) commits and answers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from ..services import LOOPBACK, Running

__all__ = ["PaymentsService"]


@dataclass
class PaymentsService(Running):
    """``with PaymentsService(...) as service:`` serves on ``service.url`` until the block ends."""

    honours_keys: bool
    faults: list[str] = field(default_factory=list)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    keys_seen: list[str | None] = field(default_factory=list)
    _by_key: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def refunds(self, order_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [row for row in self.ledger if row["order_id"] == order_id]

    def start(self) -> Self:
        self._server = ThreadingHTTPServer((LOOPBACK, 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases the hung responses
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- the endpoints --------------------------------------------------------------

    def refund(self, body: dict[str, Any], key: str | None) -> tuple[int, dict[str, Any], str]:
        """The status, JSON body and fault of one refund request."""
        with self._lock:
            self.keys_seen.append(key)
            fault = self.faults.pop(0) if self.faults else "ok"
            if fault == "429":
                return 429, {"error": "rate limited"}, fault
            if self.honours_keys and key is not None and key in self._by_key:
                return 200, self._by_key[key], fault
            row = {
                "refund_id": f"rf_{len(self.ledger) + 1}",
                "order_id": str(body["order_id"]),
                "amount": int(body["amount"]),
            }
            self.ledger.append(row)
            if key is not None:
                self._by_key[key] = row
            return 200, row, fault


def _handler(service: PaymentsService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            status, answer, fault = service.refund(body, self.headers.get("idempotency-key"))
            if fault == "commit_then_hang":
                service._stopping.wait(10)  # committed; the client gives up first
                return
            self._send(status, answer)

        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            order_id = (query.get("order_id") or [""])[0]
            self._send(200, {"refunds": service.refunds(order_id)})

        def _send(self, status: int, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            if status == 429:
                self.send_header("retry-after", "0")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass  # quiet tests

    return Handler
