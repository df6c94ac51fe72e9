"""One fleet worker for the enforcement test: an agent runtime on a shared Redis store.

``python -m tests.serve.enforce_worker REDIS_URL WORKER OUT STOP_FILE`` runs
calls until STOP_FILE exists: in ``conv-loop`` a scripted model repeats the same
``create_ticket`` (each run opens a new ticket: the duplicate write the
analyser finds), in ``conv-ok-WORKER`` it opens tickets on new subjects. The
spans go to ``toolspan serve`` over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT); every
result, with its wall-clock time, goes to OUT as JSON lines.
"""

from __future__ import annotations

import itertools
import sys
import time
import uuid
from pathlib import Path

import orjson

from toolspan.tracer import Executor, Safeguards, Tool, ToolCall, setup_telemetry
from toolspan.tracer.store import open_store

PAUSE_S = 0.05  # the scripted model's think time between calls


def main(redis_url: str, worker: str, out: Path, stop_file: Path) -> None:
    telemetry = setup_telemetry(f"enforce-worker-{worker}", otlp=True)
    opened: list[str] = []  # the fake ticket service's ledger

    def create_ticket(subject: str) -> dict[str, str]:
        ticket = uuid.uuid4().hex[:8]
        opened.append(ticket)
        return {"ticket": ticket, "subject": subject}

    executor = Executor(
        [Tool("create_ticket", create_ticket, side_effect="write")],
        tracer_provider=telemetry.tracer_provider,
        safeguards=Safeguards(store=open_store(redis_url)),
    )
    with out.open("wb") as lines:
        for number in itertools.count():
            if stop_file.exists():
                break
            for conversation, subject in (
                ("conv-loop", "printer on fire"),
                (f"conv-ok-{worker}", f"subject {number}"),
            ):
                call = ToolCall(
                    "create_ticket",
                    f"{worker}-{conversation}-{number}",
                    {"subject": subject},
                    conversation_id=conversation,
                )
                result = executor.execute(call)
                record = {"t": time.time(), "conversation": conversation, "status": result.status}
                lines.write(orjson.dumps(record) + b"\n")
                lines.flush()
            time.sleep(PAUSE_S)
    telemetry.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
