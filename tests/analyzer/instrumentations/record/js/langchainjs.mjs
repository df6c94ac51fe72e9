// Runs the scripted support agent of ../scenario.json through REAL LangChain.js
// 1.x (`createAgent`, LangGraph's tool node), offline, instrumented by
// OpenInference (@arizeai/openinference-instrumentation-langchain) or
// OpenLLMetry (@traceloop/instrumentation-langchain). The model is LangChain's
// own test model (`fakeModel()` from @langchain/core/testing) answering from
// the script; the tools are real `tool()`s (charge throws TimeoutError twice,
// which a `wrapToolCall` middleware hands to the model as an error
// ToolMessage, as the Python recorder does). Spans are kept in memory and
// written as OTLP/JSON, one ExportTraceServiceRequest per line.
//
//   node langchainjs_openinference.mjs on|off OUT.jsonl   (or langchainjs_openllmetry.mjs)
//     -> prints {"traces": {...}, "versions": {...}}
//
// One agent.invoke per scenario. For OpenLLMetry it runs inside an app span of
// its own: the Traceloop callback handler starts every span on the ACTIVE
// context and never makes one current, so without an enclosing span each
// LangChain run would be a trace of its own (@traceloop/node-server-sdk's
// withWorkflow is such an enclosing span).
import { readFileSync, writeFileSync } from "node:fs";

import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const SHARED = JSON.parse(readFileSync(new URL("../scenario.json", import.meta.url), "utf8"));
const INSTRUMENTATIONS = {
  openinference: "@arizeai/openinference-instrumentation-langchain",
  openllmetry: "@traceloop/instrumentation-langchain",
};

// Read from node_modules itself: some of these packages do not export their package.json.
const version = (name) =>
  JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, import.meta.url), "utf8")).version;

class TimeoutError extends Error {
  constructor(message) {
    super(message);
    this.name = "TimeoutError";
  }
}

// Both instrumentations patch CallbackManager._configureSync of the ESM module
// LangChain itself imports (CJS and ESM are different objects in @langchain/core 1.x).
async function instrument(instrumentation, record, provider) {
  const callbackManager = await import("@langchain/core/callbacks/manager");
  const { LangChainInstrumentation } = await import(INSTRUMENTATIONS[instrumentation]);
  if (instrumentation === "openinference") {
    const traceConfig = record ? {} : { hideInputs: true, hideOutputs: true };
    new LangChainInstrumentation({ tracerProvider: provider, traceConfig }).manuallyInstrument(callbackManager);
  } else {
    const traceloop = new LangChainInstrumentation({ traceContent: record });
    traceloop.setTracerProvider(provider);
    traceloop.manuallyInstrument({ callbackManagerModule: callbackManager });
  }
}

function tools(lc, z) {
  let charges = 0;
  const make = (name, shape, run) =>
    lc.tool(async (args) => JSON.stringify(await run(args)), {
      name,
      description: name,
      schema: z.object(shape),
    });
  return [
    make("get_order", { order_id: z.string() }, ({ order_id }) => ({ order_id, status: "shipped" })),
    make("send_email", { to: z.string(), body: z.string() }, () => ({ sent: true })),
    make("charge", { order: z.string(), amount: z.number() }, () => {
      charges += 1;
      if (charges <= SHARED.charge_timeouts) throw new TimeoutError("payment gateway timed out after 30s");
      return { charged: true };
    }),
  ];
}

// As an app does: a tool's timeout goes back to the model as an error
// ToolMessage (the tool node would end the run on the exception).
function reportTimeouts(lc) {
  return lc.createMiddleware({
    name: "ReportTimeouts",
    wrapToolCall: async (request, handler) => {
      try {
        return await handler(request);
      } catch (error) {
        if (error?.name !== "TimeoutError") throw error;
        const content = `TimeoutError: ${error.message}`;
        return new lc.ToolMessage({ content, tool_call_id: request.toolCall.id, status: "error" });
      }
    },
  });
}

function scriptedModel(fakeModel, lc, scenario, script) {
  const model = fakeModel();
  script.forEach(([name, args], n) => model.respondWithTools([{ name, args, id: `call_${scenario}_${n}` }]));
  return model.respond(new lc.AIMessage("done"));
}

export async function main(instrumentation, capture, out) {
  if (!(instrumentation in INSTRUMENTATIONS) || !["on", "off"].includes(capture) || !out) {
    console.error(`usage: node langchainjs_${instrumentation}.mjs on|off OUT.jsonl`);
    process.exit(2);
  }
  // LangSmith's own tracing stays off: nothing may leave the machine.
  for (const name of ["LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"]) delete process.env[name];
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": `support-agent-langchainjs-${instrumentation}` }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  await instrument(instrumentation, capture === "on", provider);
  // Imported after the patch, as an app's instrumentation setup runs first.
  const lc = await import("langchain");
  const { fakeModel } = await import("@langchain/core/testing");
  const { z } = await import("zod");

  const tracer = provider.getTracer("support-agent");
  const traces = {};
  const lines = [];
  for (const [scenario, script] of Object.entries(SHARED.scenarios)) {
    const sessionId = `conv-${scenario}-langchainjs-${instrumentation}`;
    const agent = lc.createAgent({
      model: scriptedModel(fakeModel, lc, scenario, script),
      tools: tools(lc, z),
      middleware: [reportTimeouts(lc)],
    });
    const run = () =>
      agent.invoke(
        { messages: [{ role: "user", content: "Help the customer with order A1." }] },
        // OpenInference reads the conversation from the run's metadata.session_id.
        { metadata: { session_id: sessionId }, recursionLimit: 100 },
      );
    if (instrumentation === "openllmetry") {
      const attributes = { "session.id": sessionId };
      await tracer.startActiveSpan("support-agent", { attributes }, (span) => run().finally(() => span.end()));
    } else {
      await run();
    }
    await provider.forceFlush();
    const spans = exporter.getFinishedSpans();
    exporter.reset();
    for (const span of spans) traces[span.spanContext().traceId] = scenario;
    lines.push(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)));
  }
  await provider.shutdown();
  writeFileSync(out, lines.join("\n") + "\n");
  const versions = {};
  for (const name of ["langchain", "@langchain/core", "@langchain/langgraph", INSTRUMENTATIONS[instrumentation]]) {
    versions[name] = version(name);
  }
  versions["@opentelemetry/sdk-trace-base"] = version("@opentelemetry/sdk-trace-base");
  console.log(JSON.stringify({ traces, versions }));
}
