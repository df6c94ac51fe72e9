"""``--alert-webhook``: each new finding posted once, batched, with a
Slack-compatible ``text``; a failing or slow webhook never slows ingestion."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

from toolspan.analyzer import Finding
from toolspan.serve._alerts import Alerter
from toolspan.tracer import RetryPolicy

from .conftest import findings, http_url, send_writes, wait_for


class Webhook:
    """A local HTTP receiver standing in for Slack: answers ``status`` after ``delay_s``."""

    def __init__(self, status=200, delay_s=0.0):
        self.posts = []
        self.headers = []
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                webhook.posts.append(json.loads(body))
                webhook.headers.append(dict(self.headers))
                time.sleep(delay_s)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_each_new_finding_is_posted_once_batched(serve):
    webhook = Webhook()
    try:
        server = serve(alert_webhook=webhook.url)
        send_writes(HttpExporter(endpoint=http_url(server)), "conv-alert-1")
        wait_for(lambda: webhook.posts)
        [first] = webhook.posts
        [item] = first["findings"]
        assert (item["kind"], item["tool"], item["conversation_id"]) == (
            "duplicate_write",
            "send_email",
            "conv-alert-1",
        )
        assert item["explanation"]
        assert "duplicate_write" in first["text"] and "conv-alert-1" in first["text"]
        assert webhook.headers[0]["Idempotency-Key"]
        # A second conversation: only its finding is new, the first is not sent again.
        send_writes(HttpExporter(endpoint=http_url(server)), "conv-alert-2")
        wait_for(lambda: len(webhook.posts) == 2)
        assert [f["conversation_id"] for f in webhook.posts[1]["findings"]] == ["conv-alert-2"]
        time.sleep(0.5)
        assert len(webhook.posts) == 2
    finally:
        webhook.close()


def test_alert_on_chooses_the_kinds(serve):
    webhook = Webhook()
    try:
        server = serve(alert_webhook=webhook.url, alert_on=("loop",))
        send_writes(HttpExporter(endpoint=http_url(server)), "conv-not-alerted")
        wait_for(lambda: findings(server))
        server.alerter.stop()  # delivers anything waiting
        assert webhook.posts == []
    finally:
        webhook.close()


def _finding(conversation):
    return Finding(
        "duplicate_write", conversation, "send_email", None, 2, ("a" * 16,), ("b" * 32,),
        __import__("datetime").datetime(2026, 1, 1), __import__("datetime").datetime(2026, 1, 1),
        {"explanation": "sent twice"},
    )  # fmt: skip


def test_a_failing_webhook_is_retried_by_the_policy_then_reported(serve):
    webhook = Webhook(status=503)
    slept, logged = [], []
    try:
        alerter = Alerter(
            webhook.url,
            dashboard_url="http://127.0.0.1:8501",
            policy=RetryPolicy(max_attempts=3, max_total_wait_s=10),
            sleep=slept.append,
            log=logged.append,
            batch_wait_s=0,
        ).start()
        alerter.submit([_finding("conv-failing")])
        alerter.stop()
        assert len(webhook.posts) == 3  # the policy's attempts, with its backoff between
        assert len(slept) == 2
        assert alerter.failed == 1 and alerter.sent == 0
        assert "http_503" in logged[0]
        assert webhook.posts[0]["findings"][0]["link"] == (
            "http://127.0.0.1:8501/trace?trace=" + "b" * 32
        )
        # The same key on every attempt: the receiver can tell them apart from new alerts.
        assert len({h["Idempotency-Key"] for h in webhook.headers}) == 1
    finally:
        webhook.close()


def test_a_slow_webhook_never_slows_ingestion(serve):
    webhook = Webhook(delay_s=4)
    try:
        server = serve(alert_webhook=webhook.url)
        for number in range(3):
            started = time.monotonic()
            conversation = f"conv-slow-{number}"
            send_writes(HttpExporter(endpoint=http_url(server)), conversation)
            wait_for(
                lambda c=conversation: [f for f in findings(server) if f["conversation_id"] == c]
            )
            assert time.monotonic() - started < 3
        assert len(webhook.posts) <= 2  # still busy with the first batches
    finally:
        webhook.close()
