package tracing

import (
	"context"
	"errors"
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
