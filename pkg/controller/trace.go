package controller

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/tracing"
)

// run is the pipeline's run and its step named step, as pkg/tracing derives their span
// IDs from.
func (ps *pipelineSync) run(step string) tracing.Run {
	r := tracing.Run{PipelineUID: string(ps.p.UID), Step: step}
	if t := ps.status.StartTime; t != nil {
		r.PipelineStart = t.Time
	}
	if s := ps.stepStatus(step); s != nil && s.StartTime != nil {
		r.StepStart = s.StartTime.Time
	}
	return r
}

// startHookSpan starts the span of one hook call, a child of its step's span, and puts
// the trace's ID on the hook's log lines. Without a tracer it returns ctx and a no-op.
func (ps *pipelineSync) startHookSpan(ctx context.Context, exec executor.TaskExecutor, req *executor.Request) (context.Context, func(err error)) {
	if ps.env.tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := ps.env.tracer.Start(tracing.InStep(ctx, ps.run(req.Step)), "hook "+string(req.Hook),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("stepwise.pipeline", ps.p.Namespace+"/"+ps.p.Name),
			attribute.String("stepwise.step", req.Step),
			attribute.String("stepwise.executor", exec.Name()),
			attribute.String("stepwise.hook", string(req.Hook)),
			attribute.Int("stepwise.attempt", int(req.Attempt)),
		))
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "traceID", span.SpanContext().TraceID().String()))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// stepEnded queues the span of a step that succeeded or failed, exported once the status
// that says so is written (emitEvents), so that a write that fails exports nothing twice.
func (ps *pipelineSync) stepEnded(s *v1alpha1.StepStatus, failed error) {
	if ps.env.tracer == nil || s.StartTime == nil || s.CompletionTime == nil {
		return
	}
	r, end := ps.run(s.Name), s.CompletionTime.Time
	attrs := []attribute.KeyValue{
		attribute.String("stepwise.pipeline", ps.p.Namespace+"/"+ps.p.Name),
		attribute.String("stepwise.executor", s.Executor),
		attribute.Int("stepwise.attempts", int(s.Attempts)),
	}
	ps.spans = append(ps.spans, func(ctx context.Context) { tracing.EndStep(ctx, ps.env.tracer, r, end, failed, attrs...) })
}

// pipelineEnded queues the pipeline's span, the root of its trace, once it succeeded or
// failed.
func (ps *pipelineSync) pipelineEnded(phase v1alpha1.PipelinePhase, message string) {
	if ps.env.tracer == nil || ps.status.StartTime == nil {
		return
	}
	var failed error
	if phase == v1alpha1.PipelineFailed {
		failed = errors.New(message)
	}
	r, end := ps.run(""), ps.now()
	attrs := []attribute.KeyValue{
		attribute.String("stepwise.pipeline", ps.p.Namespace+"/"+ps.p.Name),
		attribute.String("stepwise.phase", string(phase)),
		attribute.Int("stepwise.steps", len(ps.status.Steps)),
	}
	ps.spans = append(ps.spans, func(ctx context.Context) { tracing.EndPipeline(ctx, ps.env.tracer, r, end, failed, attrs...) })
}

// exportSpans exports the spans the sync queued; the status that ends them is written.
func (ps *pipelineSync) exportSpans() {
	for _, export := range ps.spans {
		export(context.Background())
	}
	ps.spans = nil
}
