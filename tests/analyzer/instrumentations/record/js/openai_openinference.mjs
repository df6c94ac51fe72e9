// Runs the scripted support agent through the REAL `openai` npm client,
// instrumented by `@arizeai/openinference-instrumentation-openai`, offline:
// the client's `fetch` answers every chat completion from ../scenario.json (no
// network). As in the Python openai-openinference recorder, the app runs the
// tools itself and they are not instrumented: only the model's requested calls
// are in the spans (the LLM spans' llm.output_messages.*.tool_calls).
//
//   node openai_openinference.mjs on|off OUT.jsonl  -> prints {"traces": {...}, "versions": {...}}
//
// One app span `support-agent` (session.id) per scenario holds its client
// spans, so a scenario is one trace; the conversation is also set the
// OpenInference way (setSession), which puts session.id on the LLM spans.
// Capture off is OpenInference's own switch: traceConfig hideInputs/hideOutputs
// (OPENINFERENCE_HIDE_INPUTS/OUTPUTS, as the Python recorder sets).
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

import { setSession } from "@arizeai/openinference-core";
import { OpenAIInstrumentation } from "@arizeai/openinference-instrumentation-openai";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const [capture, out] = process.argv.slice(2);
if (!["on", "off"].includes(capture) || !out) {
  console.error("usage: node openai_openinference.mjs on|off OUT.jsonl");
  process.exit(2);
}
const require = createRequire(import.meta.url);
// The installed version, from the package folder itself: not every package
// exports its package.json (the instrumentation does not).
const version = (name) =>
  JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, import.meta.url), "utf8"))
    .version;
const SHARED = JSON.parse(readFileSync(new URL("../scenario.json", import.meta.url), "utf8"));
const STACK = "openai-openinference-js";

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": `support-agent-${STACK}` }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
trace.setGlobalTracerProvider(provider);
const hidden = capture === "off";
const instrumentation = new OpenAIInstrumentation({
  tracerProvider: provider,
  traceConfig: { hideInputs: hidden, hideOutputs: hidden },
});
// The require hook patches only what is loaded after it; an ES module import is
// not seen by it, so the CommonJS build is patched by hand (the README's way).
const openai = require("openai");
instrumentation.manuallyInstrument(openai);

class TimeoutError extends Error {
  constructor(message) {
    super(message);
    this.name = "TimeoutError";
  }
}

function tools() {
  let charges = 0;
  return {
    get_order: ({ order_id }) => ({ order_id, status: "shipped" }),
    send_email: () => ({ sent: true }),
    charge: () => {
      charges += 1;
      if (charges <= SHARED.charge_timeouts) throw new TimeoutError("payment gateway timed out after 30s");
      return { charged: true };
    },
  };
}

// The scripted model behind the client's fetch: the script's next call as an
// OpenAI chat completion, else a final answer.
function scriptedFetch(scenario, script) {
  let turn = 0;
  return async () => {
    const message = { role: "assistant", content: null };
    let finish = "tool_calls";
    if (turn < script.length) {
      const [name, args] = script[turn];
      const call = { name, arguments: JSON.stringify(args) };
      message.tool_calls = [{ id: `call_${scenario}_${turn}`, type: "function", function: call }];
    } else {
      message.content = "done";
      finish = "stop";
    }
    turn += 1;
    const body = {
      id: `chatcmpl-${scenario}-${turn}`,
      object: "chat.completion",
      created: 1767600000,
      model: "scripted-model",
      choices: [{ index: 0, message, finish_reason: finish }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    };
    return new Response(JSON.stringify(body), {
      status: 200,
      headers: { "content-type": "application/json" },
    });
  };
}

// The app's own agent loop: it runs the tools the model asks for and sends
// their results (a timeout as an error result) back.
async function agent(client) {
  const impl = tools();
  const schema = { type: "object", properties: {} };
  const advertised = Object.keys(impl).map((name) => ({
    type: "function",
    function: { name, parameters: schema },
  }));
  const messages = [{ role: "user", content: "Help the customer with order A1." }];
  for (;;) {
    const completion = await client.chat.completions.create({
      model: "scripted-model",
      messages,
      tools: advertised,
    });
    const reply = completion.choices[0].message;
    messages.push(reply);
    if (!reply.tool_calls?.length) return;
    for (const call of reply.tool_calls) {
      let result;
      try {
        result = impl[call.function.name](JSON.parse(call.function.arguments));
      } catch (error) {
        if (!(error instanceof TimeoutError)) throw error;
        result = { error: `TimeoutError: ${error.message}` };
      }
      messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) });
    }
  }
}

const tracer = provider.getTracer("support-agent");
const traces = {};
const lines = [];
for (const [scenario, script] of Object.entries(SHARED.scenarios)) {
  const sessionId = `conv-${scenario}-${STACK}`;
  const client = new openai.OpenAI({
    apiKey: "sk-test",
    baseURL: "https://api.openai.com/v1",
    fetch: scriptedFetch(scenario, script),
    maxRetries: 0,
  });
  await tracer.startActiveSpan("support-agent", { attributes: { "session.id": sessionId } }, (span) =>
    context.with(setSession(context.active(), { sessionId }), () =>
      agent(client).finally(() => span.end()),
    ),
  );
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans();
  exporter.reset();
  for (const span of spans) traces[span.spanContext().traceId] = scenario;
  lines.push(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)));
}
await provider.shutdown();
writeFileSync(out, lines.join("\n") + "\n");
console.log(
  JSON.stringify({
    traces,
    versions: {
      openai: version("openai"),
      "@arizeai/openinference-instrumentation-openai": version(
        "@arizeai/openinference-instrumentation-openai",
      ),
      "@opentelemetry/sdk-trace-base": version("@opentelemetry/sdk-trace-base"),
      "@opentelemetry/otlp-transformer": version("@opentelemetry/otlp-transformer"),
    },
  }),
);
