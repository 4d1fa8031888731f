package tracing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A pipeline's spans, made in different syncs (or processes), form one trace: the hook
// calls are children of their step's span and the step's of the pipeline's, though those
// are made last, each once its run is done; a rerun has its own spans.
func TestSpansOfOnePipelineFormOneTrace(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder), sdktrace.WithIDGenerator(fixedIDs{}))
	tracer := tp.Tracer("test")
	start := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	run := Run{PipelineUID: "uid-1", PipelineStart: start, Step: "drain", StepStart: start.Add(time.Second)}

	// Two hook calls, as two syncs make them.
	for range 2 {
		_, span := tracer.Start(InStep(context.Background(), run), "hook Create")
		span.End()
	}
	EndStep(context.Background(), tracer, run, start.Add(time.Minute), errors.New("boom"))
	EndPipeline(context.Background(), tracer, run, start.Add(2*time.Minute), nil)

	spans := recorder.Ended()
	require.Len(t, spans, 4)
	hook1, hook2, step, pipeline := spans[0], spans[1], spans[2], spans[3]
	for _, s := range spans {
		assert.Equal(t, PipelineTraceID("uid-1"), s.SpanContext().TraceID(), s.Name())
	}
	assert.False(t, pipeline.Parent().IsValid(), "the pipeline's span is the root")
	assert.Equal(t, pipeline.SpanContext().SpanID(), step.Parent().SpanID())
	assert.Equal(t, step.SpanContext().SpanID(), hook1.Parent().SpanID())
	assert.Equal(t, step.SpanContext().SpanID(), hook2.Parent().SpanID())
	assert.NotEqual(t, hook1.SpanContext().SpanID(), hook2.SpanContext().SpanID())
	assert.Equal(t, start.Add(time.Second), step.StartTime())
	assert.Equal(t, start.Add(time.Minute), step.EndTime())
	assert.Equal(t, codes.Error, step.Status().Code)
	assert.Equal(t, "step drain", step.Name())

	rerun := run
	rerun.PipelineStart = start.Add(time.Hour)
	assert.NotEqual(t, run.stepSpan().SpanID(), rerun.stepSpan().SpanID(), "a rerun's spans are its own")
	assert.Equal(t, run.stepSpan().TraceID(), rerun.stepSpan().TraceID(), "in the pipeline's trace")
}

func TestEnvCarriesTheEndpointToPlugins(t *testing.T) {
	assert.Empty(t, Env(Options{}), "no tracing, nothing given")
	env := map[string]string{}
	for _, kv := range Env(Options{Endpoint: "collector:4317", Insecure: true}) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got := FromEnv(func(k string) string { return env[k] }, "stepwise-plugin-example")
	assert.Equal(t, Options{Endpoint: "collector:4317", Insecure: true, SampleRatio: 1, ServiceName: "stepwise-plugin-example"}, got)
}

func TestNoEndpointNoProvider(t *testing.T) {
	tp, shutdown, err := NewProvider(context.Background(), Options{})
	require.NoError(t, err)
	require.NoError(t, shutdown(context.Background()))
	_, span := tp.Tracer("x").Start(context.Background(), "y")
	assert.False(t, span.IsRecording())
	assert.False(t, trace.SpanContextFromContext(context.Background()).IsValid())
}

// A request in a traced hook is a client span of its trace, and carries the trace on; the
// span names the method and host, never the path or query, where a Secret may be.
func TestTransportCarriesTheTraceAndNoURL(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("traceparent"))
	}))
	defer srv.Close()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	client := &http.Client{Transport: Transport(http.DefaultTransport)}

	ctx, hook := tp.Tracer("test").Start(context.Background(), "hook Create")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/hooks/s3cr3t?token=s3cr3t", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	hook.End()

	spans := recorder.Ended()
	require.Len(t, spans, 2)
	call := spans[0]
	assert.Equal(t, "HTTP POST", call.Name())
	assert.Equal(t, hook.SpanContext().SpanID(), call.Parent().SpanID())
	for _, a := range call.Attributes() {
		assert.NotContains(t, a.Value.String(), "s3cr3t", "attribute %s", a.Key)
	}
	require.Len(t, got, 1)
	assert.Equal(t, "00-"+call.SpanContext().TraceID().String()+"-"+call.SpanContext().SpanID().String()+"-01", got[0])

	// Untraced: nothing added.
	req, err = http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err = client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Empty(t, got[1])
	assert.Len(t, recorder.Ended(), 2)
}
