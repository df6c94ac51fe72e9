// Runs the scripted support agent through the REAL Vercel AI SDK 7, whose
// OpenTelemetry spans come from the separate `@ai-sdk/otel` package
// (`registerTelemetry(new OpenTelemetry(...))`; v7 no longer builds spans into
// `ai`). Offline: the model is the SDK's own MockLanguageModelV4 (`ai/test`)
// answering from ../scenario.json, the tools are real functions (charge throws
// TimeoutError on its first calls). The spans are kept in memory and written as
// OTLP/JSON, one ExportTraceServiceRequest per line, as record.mjs does.
//
//   node vercel_ai_7.mjs on|off OUT.jsonl   -> prints {"traces": {...}, "versions": {...}}
//
// Capture off is the SDK's own switch: telemetry.recordInputs/recordOutputs
// false. The conversation is the app's runtimeContext.sessionId, let through to
// telemetry by includeRuntimeContext and written by the integration's
// `runtimeContext: true` option (v7 has no telemetry.metadata any more).
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

import { OpenTelemetry } from "@ai-sdk/otel";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { generateText, isStepCount, jsonSchema, registerTelemetry, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";

const [capture, out] = process.argv.slice(2);
if (!["on", "off"].includes(capture) || !out) {
  console.error("usage: node vercel_ai_7.mjs on|off OUT.jsonl");
  process.exit(2);
}
const require = createRequire(import.meta.url);
const version = (name) =>
  JSON.parse(readFileSync(require.resolve(`${name}/package.json`), "utf8")).version;
const SHARED = JSON.parse(readFileSync(new URL("../scenario.json", import.meta.url), "utf8"));

class TimeoutError extends Error {
  constructor(message) {
    super(message);
    this.name = "TimeoutError";
  }
}

function tools() {
  let charges = 0;
  const make = (properties, execute) =>
    tool({
      inputSchema: jsonSchema({ type: "object", properties, required: Object.keys(properties) }),
      execute,
    });
  return {
    get_order: make({ order_id: { type: "string" } }, async ({ order_id }) => ({
      order_id,
      status: "shipped",
    })),
    send_email: make({ to: { type: "string" }, body: { type: "string" } }, async () => ({
      sent: true,
    })),
    charge: make({ order: { type: "string" }, amount: { type: "number" } }, async () => {
      charges += 1;
      if (charges <= SHARED.charge_timeouts) throw new TimeoutError("payment gateway timed out after 30s");
      return { charged: true };
    }),
  };
}

// The script's next call, else a final answer (LanguageModelV4 content parts).
function response(next, scenario, turn) {
  const content = next
    ? [{ type: "tool-call", toolCallId: `call_${scenario}_${turn}`, toolName: next[0], input: JSON.stringify(next[1]) }]
    : [{ type: "text", text: "done" }];
  const reason = next ? "tool-calls" : "stop";
  const tokens = (total) => ({ total, noCache: total, cacheRead: 0, cacheWrite: 0 });
  return {
    content,
    finishReason: { unified: reason, raw: reason },
    usage: { inputTokens: tokens(10), outputTokens: { total: 5, text: 5, reasoning: 0 } },
    warnings: [],
  };
}

function model(queue, scenario) {
  let turn = 0;
  return new MockLanguageModelV4({
    modelId: "scripted-model",
    doGenerate: async () => response(queue.shift(), scenario, turn++),
  });
}

// The integration nests its spans through the active context: without a
// context manager every span would be a trace of its own.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "support-agent-vercel-ai-7" }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
registerTelemetry(new OpenTelemetry({ tracer: provider.getTracer("ai"), runtimeContext: true }));
const record = capture === "on";
const traces = {};
const lines = [];

for (const [scenario, script] of Object.entries(SHARED.scenarios)) {
  const queue = [...script];
  const agentTools = tools();
  const scriptedModel = model(queue, scenario);
  // v7 gives a tool's error to the model and goes on (as v5 and v6): one
  // generation runs the whole script; the loop only guards against an early stop.
  while (queue.length > 0) {
    await generateText({
      model: scriptedModel,
      tools: agentTools,
      prompt: "Help the customer with order A1.",
      runtimeContext: { sessionId: `conv-${scenario}-v7` },
      telemetry: {
        recordInputs: record,
        recordOutputs: record,
        functionId: "support-agent",
        includeRuntimeContext: { sessionId: true },
      },
      stopWhen: isStepCount(20),
    });
    await provider.forceFlush();
    const spans = exporter.getFinishedSpans();
    exporter.reset();
    for (const span of spans) traces[span.spanContext().traceId] = scenario;
    lines.push(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)));
  }
}
await provider.shutdown();
writeFileSync(out, lines.join("\n") + "\n");
console.log(
  JSON.stringify({
    traces,
    versions: {
      ai: version("ai"),
      "@ai-sdk/otel": version("@ai-sdk/otel"),
      "@opentelemetry/sdk-trace-base": version("@opentelemetry/sdk-trace-base"),
      "@opentelemetry/otlp-transformer": version("@opentelemetry/otlp-transformer"),
    },
  }),
);
