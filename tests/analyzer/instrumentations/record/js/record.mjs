// Runs the scripted support agent through the REAL Vercel AI SDK (major 4, 5
// or 6, `experimental_telemetry`), offline: the model is the SDK's own test
// model (MockLanguageModelV1/V2/V3 from `ai/test`) answering from a script, the
// tools are real functions (charge throws TimeoutError twice). The spans the
// SDK makes are kept in memory and written as OTLP/JSON, one
// ExportTraceServiceRequest per line (the JSON serializer of the OTLP
// exporters), which is what `toolspan analyze` reads.
//
//   node record.mjs MAJOR on|off OUT.jsonl   -> prints {"traces": {...}, "versions": {...}}
//
// Every generateText call is one trace; the printed map says which scenario
// each trace belongs to, so the tests can tell a finding in the benign
// scenario from one in the scenario that has the problems.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const [major, capture, out] = process.argv.slice(2);
if (!["4", "5", "6"].includes(major) || !["on", "off"].includes(capture) || !out) {
  console.error("usage: node record.mjs 4|5|6 on|off OUT.jsonl");
  process.exit(2);
}
const ai = await import(`ai${major}`);
const aiTest = await import(`ai${major}/test`);
const require = createRequire(import.meta.url);
const version = (name) =>
  JSON.parse(readFileSync(require.resolve(`${name}/package.json`), "utf8")).version;

// The scripted agent, shared with the Python recorders (../scenario.json).
const SHARED = JSON.parse(readFileSync(new URL("../scenario.json", import.meta.url), "utf8"));
const SCENARIOS = SHARED.scenarios;

class TimeoutError extends Error {
  constructor(message) {
    super(message);
    this.name = "TimeoutError";
  }
}

function tools() {
  let charges = 0;
  const schema = (properties) =>
    ai.jsonSchema({ type: "object", properties, required: Object.keys(properties) });
  // v4 names the schema `parameters`, v5 and v6 `inputSchema`.
  const key = major === "4" ? "parameters" : "inputSchema";
  const make = (properties, execute) => ai.tool({ [key]: schema(properties), execute });
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

// The script's next call, else a final answer, in the shape of each
// specification version (V1: toolCalls with JSON args; V2/V3: content parts).
function response(next, scenario, turn) {
  const id = `call_${scenario}_${turn}`;
  if (major === "4") {
    const base = {
      rawCall: { rawPrompt: null, rawSettings: {} },
      usage: { promptTokens: 10, completionTokens: 5 },
    };
    return next
      ? {
          ...base,
          finishReason: "tool-calls",
          toolCalls: [
            { toolCallType: "function", toolCallId: id, toolName: next[0], args: JSON.stringify(next[1]) },
          ],
        }
      : { ...base, finishReason: "stop", text: "done" };
  }
  const content = next
    ? [{ type: "tool-call", toolCallId: id, toolName: next[0], input: JSON.stringify(next[1]) }]
    : [{ type: "text", text: "done" }];
  const reason = next ? "tool-calls" : "stop";
  if (major === "5") {
    return {
      content,
      finishReason: reason,
      usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
      warnings: [],
    };
  }
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
  const Mock = aiTest[`MockLanguageModelV${{ 4: 1, 5: 2, 6: 3 }[major]}`];
  return new Mock({
    modelId: "scripted-model",
    doGenerate: async () => response(queue.shift(), scenario, turn++),
  });
}

// The SDK nests its spans through the active context: without a context
// manager every span would be a trace of its own.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": `support-agent-vercel-ai-${major}` }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
const tracer = provider.getTracer("ai");
const record = capture === "on";
const traces = {};
const lines = [];

for (const [scenario, script] of Object.entries(SCENARIOS)) {
  const queue = [...script];
  const agentTools = tools();
  const scriptedModel = model(queue, scenario);
  // v4 ends a generation on a tool's error (ToolExecutionError): the app then
  // asks again in the same session, as a chat app's retry does; v5 and v6
  // give the error to the model and go on, so one generation runs it all.
  while (queue.length > 0) {
    const options = {
      model: scriptedModel,
      tools: agentTools,
      prompt: "Help the customer with order A1.",
      experimental_telemetry: {
        isEnabled: true,
        recordInputs: record,
        recordOutputs: record,
        functionId: "support-agent",
        metadata: { sessionId: `conv-${scenario}-v${major}` },
        tracer,
      },
      ...(major === "4" ? { maxSteps: 20 } : { stopWhen: ai.stepCountIs(20) }),
    };
    try {
      await ai.generateText(options);
    } catch (error) {
      if (major !== "4" || error?.name !== "AI_ToolExecutionError") throw error;
    }
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
      ai: version(`ai${major}`),
      "@opentelemetry/sdk-trace-base": version("@opentelemetry/sdk-trace-base"),
      "@opentelemetry/otlp-transformer": version("@opentelemetry/otlp-transformer"),
    },
  }),
);
