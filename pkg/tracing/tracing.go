// Package tracing follows a pipeline with OpenTelemetry: one trace per pipeline, a span
// per step, per hook call and per plugin call, carried over gRPC into the plugin and on
// in its HTTP requests (W3C traceparent).
//
// A pipeline runs for minutes or days over many syncs, and the operator may restart in
// between: no span can stay open for it. Its trace ID is derived from its UID, and each
// step's span ID from the step's run, so that every hook call, in whichever sync or
// replica, is a child of its step's span; the step's span is exported once the step is
// done, with the times of its status, and the pipeline's once the pipeline is.
package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options configure the export of spans; an empty Endpoint exports none.
type Options struct {
	// Endpoint is the OTLP/gRPC collector, host:port.
	Endpoint string
	// Insecure sends in plaintext (a collector on loopback or in the Pod's network).
	Insecure bool
	// SampleRatio of the traces (pipelines) exported, 0 to 1; a pipeline's trace is kept
	// or dropped whole, since its trace ID decides.
	SampleRatio float64
	// ServiceName names the process in the traces (stepwise-operator, stepwise-plugin-NAME).
	ServiceName string
}

// The variables the operator gives its plugins when it traces, so that they export their
// spans to the same collector (the plugins never inherit the operator's environment).
const (
	EndpointEnv = "STEPWISE_OTLP_ENDPOINT"
	InsecureEnv = "STEPWISE_OTLP_INSECURE"
)

// Env is what a plugin is given to trace as o does; none when o does not trace.
func Env(o Options) []string {
	if o.Endpoint == "" {
		return nil
	}
	return []string{EndpointEnv + "=" + o.Endpoint, fmt.Sprintf("%s=%t", InsecureEnv, o.Insecure)}
}

// FromEnv reads the Options Env gave a plugin, named service.
func FromEnv(getenv func(string) string, service string) Options {
	return Options{Endpoint: getenv(EndpointEnv), Insecure: getenv(InsecureEnv) == "true", SampleRatio: 1, ServiceName: service}
}

// Propagator is how trace context crosses processes: W3C traceparent, over gRPC into
// plugins and over HTTP out of them.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// NewProvider returns the tracer provider of o and how to flush and stop it. Without an
// endpoint it is a no-op provider, which costs nothing.
func NewProvider(ctx context.Context, o Options) (trace.TracerProvider, func(context.Context) error, error) {
	if o.Endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint)}
	if o.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exporter, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("create the OTLP exporter for %s: %w", o.Endpoint, err)
	}
	ratio := o.SampleRatio
	if ratio <= 0 || ratio > 1 {
		ratio = 1
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithIDGenerator(fixedIDs{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", o.ServiceName))),
	)
	return tp, tp.Shutdown, nil
}

// PipelineTraceID is the trace of the pipeline whose UID is uid.
func PipelineTraceID(uid string) trace.TraceID {
	var id trace.TraceID
	sum := sha256.Sum256([]byte("stepwise/pipeline/" + uid))
	copy(id[:], sum[:])
	return id
}

// spanID derives a span ID from the parts that name a span (the pipeline's UID and the
// run of the step).
func spanID(parts ...string) trace.SpanID {
	h := sha256.New()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	var id trace.SpanID
	copy(id[:], h.Sum(nil))
	return id
}

// Run names a pipeline's run and one of its steps' runs: what the derived IDs come from.
type Run struct {
	PipelineUID string
	// PipelineStart is when the pipeline's run started (status.startTime): a rerun after
	// an edit is another run, with its own spans.
	PipelineStart time.Time
	// Step and StepStart name the step's run (its name, status.steps[].startTime); empty
	// for the pipeline's own span.
	Step      string
	StepStart time.Time
}

func (r Run) pipelineSpan() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    PipelineTraceID(r.PipelineUID),
		SpanID:     spanID(r.PipelineUID, r.PipelineStart.UTC().Format(time.RFC3339)),
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
}

func (r Run) stepSpan() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    PipelineTraceID(r.PipelineUID),
		SpanID:     spanID(r.PipelineUID, r.PipelineStart.UTC().Format(time.RFC3339), r.Step, r.StepStart.UTC().Format(time.RFC3339)),
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
}

// InStep returns ctx with the step's span as the parent of the spans started in it (a
// hook call): it need not be open, nor in this process.
func InStep(ctx context.Context, r Run) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, r.stepSpan())
}

// EndStep exports the span of the step's run, from start to end, as a child of the
// pipeline's span, once the step is done.
func EndStep(ctx context.Context, tracer trace.Tracer, r Run, end time.Time, failed error, attrs ...attribute.KeyValue) {
	parent := trace.ContextWithRemoteSpanContext(ctx, r.pipelineSpan())
	export(withID(parent, r.stepSpan()), tracer, "step "+r.Step, r.StepStart, end, failed, attrs)
}

// EndPipeline exports the pipeline's span, the trace's root, once the pipeline is done.
func EndPipeline(ctx context.Context, tracer trace.Tracer, r Run, end time.Time, failed error, attrs ...attribute.KeyValue) {
	export(withID(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), r.pipelineSpan()), tracer, "pipeline", r.PipelineStart, end, failed, attrs)
}

func export(ctx context.Context, tracer trace.Tracer, name string, start, end time.Time, failed error, attrs []attribute.KeyValue) {
	_, span := tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if failed != nil {
		span.RecordError(failed)
		span.SetStatus(codes.Error, failed.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// Transport makes each request through rt a client span of the request context's trace,
// and carries that trace on in the traceparent header. The span names the method and the
// host only, never the path or the query, where a Secret's value may be (a webhook's
// token): a trace goes to a collector, which is no place for it. Without a recording span
// in the context it adds nothing.
func Transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		parent := trace.SpanFromContext(req.Context())
		if !parent.SpanContext().IsValid() {
			return rt.RoundTrip(req)
		}
		ctx, span := parent.TracerProvider().Tracer("github.com/stepwise-dev/stepwise/pkg/tracing").Start(req.Context(),
			"HTTP "+req.Method, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("http.request.method", req.Method), attribute.String("server.address", req.URL.Host)))
		defer span.End()
		req = req.Clone(ctx)
		Propagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			span.SetStatus(codes.Error, "the request failed")
			return resp, err
		}
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if resp.StatusCode >= 500 {
			span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// fixedKey carries the IDs a span must have (a step's or a pipeline's, derived) to the
// ID generator.
type fixedKey struct{}

func withID(ctx context.Context, sc trace.SpanContext) context.Context {
	return context.WithValue(ctx, fixedKey{}, sc)
}

// fixedIDs gives a span the IDs withID put in its context, and random ones otherwise.
type fixedIDs struct{}

func (fixedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(fixedKey{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	var t trace.TraceID
	_, _ = rand.Read(t[:])
	return t, randomSpanID()
}

func (fixedIDs) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if sc, ok := ctx.Value(fixedKey{}).(trace.SpanContext); ok && sc.TraceID() == traceID {
		return sc.SpanID()
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}
