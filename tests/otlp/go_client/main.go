// SPDX-License-Identifier: Apache-2.0

// OpenTelemetry's Go SDK (Debian's golang-opentelemetry-otel-dev) sending
// spans to tracegate-otlp, for test_otlp_go and test_collector_otlp:
//
//	otlp_go_client FRONT_URL BACK_URL
//
// Two services, each with its own TracerProvider, resource and batch span
// processor: "go-front" exports to FRONT_URL, "go-back" to BACK_URL (one
// receiver for both, or one per host). go-front's front.handle (SERVER)
// makes a real HTTP request on loopback from front.call (CLIENT, attribute
// peer=back); the SDK's W3C propagator writes its context into the
// traceparent header, and go-back's handler reads it back as the remote
// parent of back.serve (SERVER, event cache.miss, status ERROR, attribute
// retries=3). front.enqueue (PRODUCER) under front.handle sends a message
// that go-back's back.audit (CONSUMER) takes in a trace of its own,
// linked to front.enqueue, as messaging's batch consumers link. Prints
// one JSON line with the ids.
//
// Debian 12 ships the SDK 1.1.0 without its OTLP exporters (they are
// modules of their own there, not packaged), so the exporter below writes
// OTLP/JSON as the OTLP specification and the proto's JSON mapping give
// it: ids in hex, times as decimal strings, enums as numbers, attribute
// values as AnyValue objects. Spans, ids, parents, links, events, status,
// kinds and times are the SDK's; only the request's encoding is ours, and
// the JavaScript test covers the SDK's own exporters.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

type kv struct {
	Key   string                 `json:"key"`
	Value map[string]interface{} `json:"value"`
}

func anyValue(v attribute.Value) map[string]interface{} {
	switch v.Type() {
	case attribute.BOOL:
		return map[string]interface{}{"boolValue": v.AsBool()}
	case attribute.INT64:
		// int64 is a string in the proto's JSON mapping.
		return map[string]interface{}{"intValue": strconv.FormatInt(v.AsInt64(), 10)}
	case attribute.FLOAT64:
		return map[string]interface{}{"doubleValue": v.AsFloat64()}
	default:
		return map[string]interface{}{"stringValue": v.Emit()}
	}
}

func kvs(attrs []attribute.KeyValue) []kv {
	out := []kv{}
	for _, a := range attrs {
		out = append(out, kv{Key: string(a.Key), Value: anyValue(a.Value)})
	}
	return out
}

func nanos(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// OTLP's Status.code: 0 unset, 1 ok, 2 error. Go's codes differ (1 is
// Error, 2 is Ok), hence the mapping.
func statusCode(c codes.Code) int {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

func spanJSON(s sdktrace.ReadOnlySpan) map[string]interface{} {
	sc := s.SpanContext()
	m := map[string]interface{}{
		"traceId":           sc.TraceID().String(),
		"spanId":            sc.SpanID().String(),
		"name":              s.Name(),
		"kind":              int(s.SpanKind()), // the same numbers as OTLP's
		"startTimeUnixNano": nanos(s.StartTime()),
		"endTimeUnixNano":   nanos(s.EndTime()),
		"attributes":        kvs(s.Attributes()),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		m["parentSpanId"] = p.SpanID().String()
	}
	var events []map[string]interface{}
	for _, e := range s.Events() {
		events = append(events, map[string]interface{}{
			"timeUnixNano": nanos(e.Time),
			"name":         e.Name,
			"attributes":   kvs(e.Attributes),
		})
	}
	if events != nil {
		m["events"] = events
	}
	var links []map[string]interface{}
	for _, l := range s.Links() {
		links = append(links, map[string]interface{}{
			"traceId":    l.SpanContext.TraceID().String(),
			"spanId":     l.SpanContext.SpanID().String(),
			"attributes": kvs(l.Attributes),
		})
	}
	if links != nil {
		m["links"] = links
	}
	st := s.Status()
	if st.Code != codes.Unset {
		m["status"] = map[string]interface{}{
			"code": statusCode(st.Code), "message": st.Description,
		}
	}
	return m
}

// exporter is an sdktrace.SpanExporter posting ExportTraceServiceRequest
// as OTLP/JSON to url. A batch holds one provider's spans, so one
// resource.
type exporter struct{ url string }

func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	var out []map[string]interface{}
	for _, s := range spans {
		out = append(out, spanJSON(s))
	}
	lib := spans[0].InstrumentationLibrary()
	req := map[string]interface{}{
		"resourceSpans": []interface{}{map[string]interface{}{
			"resource": map[string]interface{}{
				"attributes": kvs(spans[0].Resource().Attributes()),
			},
			"scopeSpans": []interface{}{map[string]interface{}{
				"scope": map[string]interface{}{"name": lib.Name, "version": lib.Version},
				"spans": out,
			}},
		}},
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", e.url, resp.StatusCode)
	}
	return nil
}

func (e *exporter) Shutdown(ctx context.Context) error { return nil }

// exportErrors keeps the first export error of either provider.
type exportErrors struct{ err error }

func (h *exportErrors) Handle(err error) {
	if h.err == nil {
		h.err = err
	}
}

func provider(service, url string) *sdktrace.TracerProvider {
	res := resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.Int("process.pid", os.Getpid()),
	)
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(&exporter{url: url}),
	)
}

// Spans 1 ms apart, as calls are: trace processor orders events of equal
// times by arrival, and a child is exported before its parent.
func tick() { time.Sleep(time.Millisecond) }

func run(frontURL, backURL string) error {
	ctx := context.Background()
	front := provider("go-front", frontURL)
	back := provider("go-back", backURL)
	ft := front.Tracer("test_otlp_go")
	bt := back.Tracer("test_otlp_go")
	prop := propagation.TraceContext{}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var auditSpan trace.SpanContext
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The caller's context, from its traceparent header alone.
		pctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		_, serve := bt.Start(pctx, "back.serve",
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.Int("retries", 3)))
		serve.AddEvent("cache.miss", trace.WithAttributes(attribute.String("key", "k1")))
		serve.SetStatus(codes.Error, "no luck")
		time.Sleep(5 * time.Millisecond)
		serve.End()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	hctx, handle := ft.Start(ctx, "front.handle", trace.WithSpanKind(trace.SpanKindServer))
	tick()
	cctx, call := ft.Start(hctx, "front.call",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("peer", "back")))
	tick()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	if err != nil {
		return err
	}
	prop.Inject(cctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	tick()
	call.End()
	tick()
	_, enqueue := ft.Start(hctx, "front.enqueue",
		trace.WithSpanKind(trace.SpanKindProducer))
	tick()
	enqueue.End()
	tick()
	handle.End()
	tick()
	_, audit := bt.Start(ctx, "back.audit", trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.Link{SpanContext: enqueue.SpanContext()}))
	tick()
	audit.End()
	auditSpan = audit.SpanContext()

	for _, p := range []*sdktrace.TracerProvider{front, back} {
		if err := p.ForceFlush(ctx); err != nil {
			return err
		}
		if err := p.Shutdown(ctx); err != nil {
			return err
		}
	}
	line, _ := json.Marshal(map[string]string{
		"trace_id":    handle.SpanContext().TraceID().String(),
		"call_span":   call.SpanContext().SpanID().String(),
		"audit_trace": auditSpan.TraceID().String(),
	})
	fmt.Println(string(line))
	return nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: otlp_go_client FRONT_URL BACK_URL")
		os.Exit(2)
	}
	errs := &exportErrors{}
	otel.SetErrorHandler(errs)
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "otlp_go_client:", err)
		os.Exit(1)
	}
	if errs.err != nil {
		fmt.Fprintln(os.Stderr, "otlp_go_client: export:", errs.err)
		os.Exit(1)
	}
}
