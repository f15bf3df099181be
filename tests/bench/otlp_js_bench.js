// SPDX-License-Identifier: Apache-2.0
// How fast OpenTelemetry's JavaScript SDK sends spans to tracegate-otlp,
// for bench_otlp: node otlp_js_bench.js URL SPANS
//
// One service, NodeTracerProvider with a BatchSpanProcessor (batches of
// 512, a queue that holds what is made between flushes, a flush every
// 4096 spans) and the protobuf exporter
// (@opentelemetry/exporter-trace-otlp-proto). Waits
// until the receiver records (its /metrics), then makes SPANS spans in
// pairs (a SERVER span with two attributes and an INTERNAL child with an
// event), ends them, and flushes. Prints one JSON line: spans made, the
// seconds from the first span to the flush's end, node's CPU seconds in
// that time, and the receiver's count of them accepted and refused. The module directory comes from NODE_PATH.
'use strict';
const http = require('http');
const api = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { OTLPTraceExporter } =
    require('@opentelemetry/exporter-trace-otlp-proto');

const url = process.argv[2];
const spans = Number(process.argv[3]);
const FLUSH_EVERY = 4096; // 8 batches in flight at most

function metrics() {
  return new Promise((resolve) => {
    http.get(url.replace('/v1/traces', '/metrics'), (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve(body));
    }).on('error', () => resolve(''));
  });
}

async function recording() {
  return /^tracegate_otlp_recording [1-9]/m.test(await metrics());
}

// The receiver's count of js-bench's spans with |outcome|.
function spansTotal(text, outcome) {
  const m = text.match(new RegExp('^tracegate_otlp_spans_total\\{service=' +
      '"js-bench",outcome="' + outcome + '"\\} (\\d+)$', 'm'));
  return m ? Number(m[1]) : 0;
}

async function main() {
  for (let i = 0; !(await recording()); i++) {
    if (i > 1000) throw new Error('the receiver never recorded');
    await new Promise((r) => setTimeout(r, 10));
  }
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'js-bench' }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }), {
      maxExportBatchSize: 512,
      maxQueueSize: 2 * FLUSH_EVERY,
      scheduledDelayMillis: 5,
    })],
  });
  const tracer = provider.getTracer('bench_otlp');
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < spans / 2; i++) {
    const server = tracer.startSpan('serve /a', {
      kind: api.SpanKind.SERVER,
      attributes: { 'http.method': 'GET', 'http.status_code': 200 },
    });
    const child = tracer.startSpan('db.query', { kind: api.SpanKind.INTERNAL },
        api.trace.setSpan(api.ROOT_CONTEXT, server));
    child.addEvent('retry', { attempt: 1 });
    child.end();
    server.end();
    // A flush every FLUSH_EVERY spans: the exporter refuses more than 30
    // exports in flight (its concurrencyLimit) and drops their spans,
    // which a queue filled faster than it sends reaches at the end.
    if ((2 * i + 2) % FLUSH_EVERY === 0) await provider.forceFlush();
  }
  await provider.forceFlush();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  await provider.shutdown();
  const text = await metrics();
  console.log(JSON.stringify({
    spans: spans,
    wall_s: wall,
    cpu_s: (cpu.user + cpu.system) / 1e6,
    accepted: spansTotal(text, 'accepted'),
    refused: spansTotal(text, 'refused'),
  }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
