"""Span and attribute names of the trace contract (docs/trace-contract.md).

One place for every name, so code and contract cannot drift apart.
"""

from __future__ import annotations

CONTRACT_VERSION = 5
SCOPE_NAME = "toolspan"

# OpenTelemetry semantic conventions.
OPERATION_NAME = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
ERROR_TYPE = "error.type"
HTTP_STATUS_CODE = "http.response.status_code"
HTTP_RESEND_COUNT = "http.request.resend_count"

# toolspan's own namespace.
REQUEST_ID = "toolspan.request.id"
TURN_ID = "toolspan.turn.id"
DELIVERY_ID = "toolspan.delivery.id"
SIDE_EFFECT = "toolspan.side_effect"
IDEMPOTENCY_KEY = "toolspan.idempotency.key"
IDEMPOTENCY_REPLAYED = "toolspan.idempotency.replayed"
IDEMPOTENCY_TAKEOVER = "toolspan.idempotency.takeover"
IDEMPOTENCY_KEY_PASSED = "toolspan.idempotency.key_passed"
ARGS_HASH = "toolspan.args.hash"
RESULT_HASH = "toolspan.result.hash"
STATUS = "toolspan.status"
ERROR_CODE = "toolspan.error_code"
RETRYABLE = "toolspan.retryable"
ATTEMPTS = "toolspan.attempts"
TOTAL_WAIT_S = "toolspan.total_wait_s"
RETRY_AFTER_S = "toolspan.retry_after_s"
RESULT_TRUNCATED = "toolspan.result.truncated"
RECONCILED = "toolspan.reconciled"
READ_BACK = "toolspan.read_back"
STORE_LOST = "toolspan.store.lost"
STORE_NEW = "toolspan.store.new"
NEXT_TOOLS = "toolspan.next.tools"
RESOURCE_KEY = "toolspan.resource.key"
SCHEMA_VERSION = "toolspan.tool.schema_version"
KEYS_HONOURED = "toolspan.tool.keys_honoured"
RETRY_INITIATOR = "toolspan.retry.initiator"
RETRY_OF = "toolspan.retry.of"
QUARANTINE_ID = "toolspan.quarantine.id"
ATTEMPT = "toolspan.attempt"
ATTEMPT_OUTCOME = "toolspan.attempt.outcome"
RETRY_DELAY_S = "toolspan.retry.delay_s"
RETRY_ELAPSED_WAIT_S = "toolspan.retry.elapsed_wait_s"

# Retry budget and circuit breaker (per downstream service).
SERVICE = "toolspan.service"
RETRY_BUDGET = "toolspan.retry.budget"
RETRY_BUDGET_FAILED_OPEN = "toolspan.retry.budget.failed_open"
CIRCUIT_STATE = "toolspan.circuit.state"
CIRCUIT_PROBE = "toolspan.circuit.probe"
CIRCUIT_FROM = "toolspan.circuit.from"
CIRCUIT_TO = "toolspan.circuit.to"
EVENT_CIRCUIT_TRANSITION = "toolspan.circuit.transition"
EVENT_BUDGET_REFUSED = "toolspan.retry.budget.refused"
