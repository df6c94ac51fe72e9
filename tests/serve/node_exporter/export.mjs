// Sends spans made by the real OpenTelemetry JS SDK with the official OTLP
// exporter (gRPC or HTTP/protobuf), keeping `concurrencyLimit` exports in
// flight at once, as a busy Node service's exporter does (issue 41).
//
//   node export.mjs --endpoint http://127.0.0.1:4317 --protocol grpc \
//        --spans 40000 --concurrency-limit 100 [--batch 100] [--ids FILE]
//
// Prints {"exporting": batches} once the spans are made (a timer can start
// there), then one JSON line: {"sent": spans acknowledged, "failed": spans
// whose export failed, "ms": from the first export to the last answer,
// "errors": {message: exports}}. With --ids, writes the acknowledged span ids (hex, one a
// line) to FILE, so that a test can check each landed exactly once.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { OTLPTraceExporter as GrpcExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

const { values } = parseArgs({
  options: {
    endpoint: { type: "string" },
    protocol: { type: "string", default: "grpc" },
    spans: { type: "string", default: "40000" },
    "concurrency-limit": { type: "string", default: "30" },
    batch: { type: "string", default: "100" },
    ids: { type: "string" },
    tag: { type: "string", default: "node" },
  },
});
const total = Number(values.spans);
const limit = Number(values["concurrency-limit"]);
const batchSize = Number(values.batch);
if (!values.endpoint || !["grpc", "http"].includes(values.protocol)) {
  console.error("usage: export.mjs --endpoint URL --protocol grpc|http [--spans N] ...");
  process.exit(2);
}

function makeSpans() {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "node-exporter" }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer("toolspan-node-exporter");
  for (let index = 0; index < total; index++) {
    tracer
      .startSpan("execute_tool lookup_order", {
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "lookup_order",
          "gen_ai.conversation.id": `${values.tag}-${Math.floor(index / 100)}`,
          "gen_ai.tool.call.id": `${values.tag}-call-${index}`,
          "gen_ai.tool.call.arguments": `{"order": ${index}}`,
        },
      })
      .end();
  }
  return memory.getFinishedSpans();
}

const spans = makeSpans();
const batches = [];
for (let start = 0; start < spans.length; start += batchSize) {
  batches.push(spans.slice(start, start + batchSize));
}
const exporter =
  values.protocol === "grpc"
    ? new GrpcExporter({ url: values.endpoint, concurrencyLimit: limit })
    : new ProtoExporter({ url: values.endpoint, concurrencyLimit: limit });

const acknowledged = [];
const errors = {};
let failed = 0;
let next = 0;

function exportOne(batch) {
  return new Promise((resolve) => {
    exporter.export(batch, (result) => {
      if (result.code === 0) {
        for (const span of batch) acknowledged.push(span.spanContext().spanId);
      } else {
        failed += batch.length;
        const message = String(result.error?.message ?? result.error);
        errors[message] = (errors[message] ?? 0) + 1;
      }
      // The exporter frees this export's place only after this callback
      // returns: the next export waits a turn, or it would be refused.
      setImmediate(resolve);
    });
  });
}

// `limit` workers, each taking the next batch when its last is answered: the
// exporter has exactly `limit` exports in flight, never more (past its limit
// it would refuse exports itself, which is not what is measured here).
async function worker() {
  while (next < batches.length) {
    await exportOne(batches[next++]);
  }
}

// The spans are made: a reader timing the exports end to end starts here.
console.log(JSON.stringify({ exporting: batches.length }));
const started = performance.now();
await Promise.all(Array.from({ length: limit }, worker));
const ms = performance.now() - started;
await exporter.shutdown();
if (values.ids) writeFileSync(values.ids, acknowledged.join("\n") + "\n");
console.log(JSON.stringify({ sent: acknowledged.length, failed, ms: Math.round(ms), errors }));
