// SPDX-License-Identifier: Apache-2.0
// OpenTelemetry's JavaScript SDK exporting to tracegate-otlp, for
// test_otlp_js: node otlp_js_client.js URL
//
// Two services in one process, each with its own provider, resource and
// exporter: "js-front" over OTLP/HTTP protobuf
// (@opentelemetry/exporter-trace-otlp-proto), "js-back" over OTLP/HTTP
// JSON (@opentelemetry/exporter-trace-otlp-http). front.handle (SERVER)
// calls front.call (CLIENT, attribute peer=back), whose context js-back
// receives as a remote parent, as it would from a traceparent header:
// back.serve (SERVER) with an event cache.miss and status ERROR. Prints
// one JSON line with the ids for the test to look up. The module
// directory comes from NODE_PATH.
'use strict';
const api = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { OTLPTraceExporter: ProtoExporter } =
    require('@opentelemetry/exporter-trace-otlp-proto');
const { OTLPTraceExporter: JsonExporter } =
    require('@opentelemetry/exporter-trace-otlp-http');

const url = process.argv[2];

function provider(service, exporter) {
  return new NodeTracerProvider({
    resource: resourceFromAttributes({
      'service.name': service,
      'process.pid': process.pid,
    }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
}

// Spans that start or end on the same clock reading would leave trace
// processor to order their events by arrival, and exporters send a child
// before its parent: 1 ms apart, as calls are.
const tick = () => new Promise((r) => setTimeout(r, 1));

async function main() {
  const front = provider('js-front', new ProtoExporter({ url }));
  const back = provider('js-back', new JsonExporter({ url }));
  const ft = front.getTracer('test_otlp_js');
  const bt = back.getTracer('test_otlp_js');

  const handle = ft.startSpan('front.handle', { kind: api.SpanKind.SERVER });
  await tick();
  const call = ft.startSpan(
      'front.call',
      { kind: api.SpanKind.CLIENT, attributes: { peer: 'back' } },
      api.trace.setSpan(api.ROOT_CONTEXT, handle));
  await tick();
  const remote = Object.assign({}, call.spanContext(), { isRemote: true });
  const serve = bt.startSpan(
      'back.serve', { kind: api.SpanKind.SERVER },
      api.trace.setSpanContext(api.ROOT_CONTEXT, remote));
  serve.addEvent('cache.miss', { key: 'k1' });
  serve.setStatus({ code: api.SpanStatusCode.ERROR, message: 'no luck' });
  await new Promise((r) => setTimeout(r, 5));
  serve.end();
  await tick();
  call.end();
  await tick();
  handle.end();
  await front.forceFlush();
  await back.forceFlush();
  await front.shutdown();
  await back.shutdown();
  console.log(JSON.stringify({
    trace_id: handle.spanContext().traceId,
    call_span: call.spanContext().spanId,
  }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
