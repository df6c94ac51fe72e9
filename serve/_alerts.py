"""``--alert-webhook``: each new finding posted once, batched, off the ingest path.

The analyser hands new findings to :meth:`Alerter.submit`, which only queues
them (a bounded queue: when the webhook is down for long, the oldest waiting
alerts are dropped and counted, never the spans). A thread posts them in
batches as JSON with a Slack-compatible ``text`` field, through toolspan's own
retry boundary: the post is a write under an idempotency key (the batch id,
sent as ``Idempotency-Key``), retried with the tracer's backoff and budgets.
A failing or slow webhook is reported on stderr, never fatal.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from ..analyzer import Finding
from ..tracer import Executor, RetryPolicy, ToolCall, from_httpx_response, tool

__all__ = ["Alerter", "alert_payload"]

DEFAULT_POLICY = RetryPolicy(max_attempts=4, max_total_wait_s=10.0, base_delay_s=0.5)
_MAX_BATCH = 50
_MAX_WAITING = 1000


def alert_payload(findings: Sequence[Finding], dashboard_url: str | None) -> dict[str, Any]:
    """The JSON body of one post: the findings, and a ``text`` Slack shows."""
    items = []
    for finding in findings:
        trace_id = finding.trace_ids[0] if finding.trace_ids else None
        link = f"{dashboard_url}/trace?trace={trace_id}" if dashboard_url and trace_id else None
        items.append(
            {
                "kind": finding.kind,
                "tool": finding.tool,
                "conversation_id": finding.conversation_id,
                "explanation": str(finding.detail.get("explanation", "")),
                "count": finding.count,
                "trace_id": trace_id,
                "link": link,
            }
        )
    lines = [f"toolspan: {len(items)} new finding(s)"]
    for item in items:
        line = f"• {item['kind']} · tool {item['tool'] or '-'} · {item['conversation_id']}"
        if item["explanation"]:
            line += f": {item['explanation']}"
        if item["link"]:
            line += f" <{item['link']}|trace>"
        lines.append(line)
    return {"text": "\n".join(lines), "findings": items}


class Alerter:
    """Posts new findings to a webhook from its own thread."""

    def __init__(
        self,
        url: str,
        *,
        kinds: Sequence[str] = (),
        dashboard_url: str | None = None,
        policy: RetryPolicy = DEFAULT_POLICY,
        timeout_s: float = 5.0,
        batch_wait_s: float = 1.0,
        sleep: Callable[[float], None] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._url = url
        self._kinds = frozenset(kinds)
        self._dashboard_url = dashboard_url
        self._batch_wait_s = batch_wait_s
        self._log = log or _stderr
        self._waiting: deque[Finding] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._client = httpx.Client(timeout=timeout_s)
        self.sent = self.failed = self.dropped = 0
        poster = tool(name="post_alert", side_effect="write", idempotent=True)(self._post)
        extra: dict[str, Any] = {} if sleep is None else {"sleep": sleep}
        self._executor = Executor([poster], policy=policy, **extra)

    def start(self) -> Alerter:
        self._thread = threading.Thread(target=self._run, name="toolspan-alerts", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Post what waits, for at most ``timeout_s``, then stop (a slow
        webhook never holds up Ctrl-C: what is left is reported)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self._log(f"stopping with {len(self._waiting)} alert(s) not delivered")
                return  # the daemon thread ends with the process
        self._client.close()

    def submit(self, findings: Sequence[Finding]) -> None:
        """Queue new findings (never blocks: the analyser calls this)."""
        wanted = [f for f in findings if not self._kinds or f.kind in self._kinds]
        if not wanted:
            return
        with self._wake:
            self._waiting.extend(wanted)
            overflow = len(self._waiting) - _MAX_WAITING
            for _ in range(max(0, overflow)):
                self._waiting.popleft()
                self.dropped += 1
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._waiting and not self._closed:
                    self._wake.wait()
                if not self._waiting:
                    return
                if not self._closed:
                    # Batch what else arrives meanwhile.
                    self._wake.wait(self._batch_wait_s)
                batch = [
                    self._waiting.popleft() for _ in range(min(_MAX_BATCH, len(self._waiting)))
                ]
            self._deliver(batch)

    def _deliver(self, batch: list[Finding]) -> None:
        batch_id = uuid.uuid4().hex
        call = ToolCall(
            name="post_alert",
            call_id=batch_id,
            arguments={"payload": alert_payload(batch, self._dashboard_url)},
            conversation_id="toolspan-serve-alerts",
            idempotency_key=batch_id,
        )
        result = self._executor.execute(call)
        if result.ok:
            self.sent += len(batch)
            return
        self.failed += len(batch)
        self._log(
            f"alert webhook failed for {len(batch)} finding(s) after {result.attempts} "
            f"attempt(s): {result.error_code}: {result.message}"
        )

    def _post(self, payload: dict[str, Any], idempotency_key: str | None = None) -> int:
        # The executor fills in the batch's key: every retry of a batch carries the same one.
        headers = {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
        response = self._client.post(self._url, json=payload, headers=headers)
        if response.is_error:
            raise from_httpx_response(response)
        return response.status_code


def _stderr(message: str) -> None:
    print(f"toolspan serve: {message}", file=sys.stderr, flush=True)
