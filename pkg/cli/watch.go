package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// redrawEvery is how often a terminal is redrawn between changes, so that the duration
// of a running step keeps counting.
const redrawEvery = time.Second

func newWatchCommand(o *options) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "watch NAME",
		Short: "Follow a pipeline until it is Ready or has failed",
		Long: `Follow a pipeline's progress until it is Ready or has failed, or, when it is being
deleted, until its teardown finished. On a terminal the status is redrawn in place; otherwise
each change is one line. Exits with 2 when the pipeline failed, 1 when --timeout passed.`,
		Example:           `  kubectl stepwise watch hello -n stepwise-demo --timeout 5m`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, pipelineNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s", timeout)
			}
			ns, c, err := o.scope()
			if err != nil {
				return err
			}
			var r renderer = &lineRenderer{w: o.streams.Out}
			if printers.IsTerminal(o.streams.Out) {
				r = &screenRenderer{w: o.streams.Out}
			}
			return watchPipeline(cmd.Context(), c.Stepwise, ns, args[0], timeout, r)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "How long to wait before giving up.")
	return cmd
}

// renderer shows a pipeline as it changes.
type renderer interface {
	// render shows p; it is called for every change, in order.
	render(p *v1alpha1.Pipeline, now time.Time)
	// tick is called every redrawEvery between changes.
	tick(now time.Time)
}

// watchPipeline follows one pipeline with a watch (an informer that re-lists after
// errors) until it is Ready, has failed, or is gone after a teardown.
func watchPipeline(ctx context.Context, cs clientset.Interface, ns, name string, timeout time.Duration, r renderer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := pipelineops.PipelineListWatch(cs, ns, func(opts *metav1.ListOptions) { opts.FieldSelector = selector })
	exists := func(store cache.Store) (bool, error) {
		_, ok, err := store.GetByKey(ns + "/" + name)
		if err == nil && !ok {
			err = apierrors.NewNotFound(v1alpha1.Resource("pipelines"), name)
		}
		return false, err
	}

	var mu sync.Mutex // the condition and the ticker both draw
	go func() {
		t := time.NewTicker(redrawEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				mu.Lock()
				r.tick(now)
				mu.Unlock()
			}
		}
	}()

	var last *v1alpha1.Pipeline
	var failed bool
	_, err := watchtools.UntilWithSync(ctx, lw, &v1alpha1.Pipeline{}, exists, func(ev watch.Event) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == watch.Deleted {
			if last != nil && last.DeletionTimestamp != nil {
				_, _ = fmt.Fprintf(lineWriter(r), "%s pipeline %s/%s is gone: its teardown finished\n", clock(time.Now()), ns, name)
				return true, nil
			}
			return false, fmt.Errorf("pipeline %s/%s was deleted", ns, name)
		}
		p, ok := ev.Object.(*v1alpha1.Pipeline)
		if !ok {
			return false, nil
		}
		last = p
		r.render(p, time.Now())
		if !pipelineops.Settled(p) {
			return false, nil
		}
		failed = p.Failed()
		return failed || (p.Ready() && p.DeletionTimestamp == nil), nil
	})
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel() // stop the ticker before returning
	mu.Lock()
	defer mu.Unlock()
	switch {
	case err != nil && timedOut:
		phase := "unknown"
		if last != nil {
			phase = string(last.Status.Phase)
		}
		return fmt.Errorf("pipeline %s/%s neither Ready nor failed after %s (phase %s)", ns, name, timeout, phase)
	case err != nil:
		return err
	case failed:
		return errPipelineFailed
	}
	return nil
}

// lineWriter is where a renderer writes plain lines.
func lineWriter(r renderer) io.Writer {
	switch r := r.(type) {
	case *lineRenderer:
		return r.w
	case *screenRenderer:
		return r.w
	}
	return io.Discard
}

func clock(t time.Time) string { return t.Format("15:04:05") }

// lineRenderer writes one line for each change of the pipeline or of a step, for logs and
// pipes.
type lineRenderer struct {
	w     io.Writer
	seen  string
	steps map[string]string
}

func (r *lineRenderer) render(p *v1alpha1.Pipeline, now time.Time) {
	if r.steps == nil {
		r.steps = map[string]string{}
	}
	// Steps first: a pipeline line that says Failed comes after the step that failed.
	// Every value from the cluster goes through termsafe.OneLine.
	for _, s := range p.Status.Steps {
		line := fmt.Sprintf("step %s %s", termsafe.OneLine(s.Name, 0), termsafe.OneLine(string(s.Phase), 0))
		if s.Hook != "" {
			line += fmt.Sprintf(" %s attempt %d", termsafe.OneLine(string(s.Hook), 0), s.Attempts)
		}
		if msg := termsafe.OneLine(s.Message, 0); msg != "" {
			line += ": " + msg
		}
		if r.steps[s.Name] != line {
			r.steps[s.Name] = line
			_, _ = fmt.Fprintf(r.w, "%s %s\n", clock(now), line)
		}
	}
	phase := p.Status.Phase
	if phase == "" {
		phase = v1alpha1.PipelinePending
	}
	line := fmt.Sprintf("pipeline %s/%s %s %s", termsafe.OneLine(p.Namespace, 0), termsafe.OneLine(p.Name, 0),
		termsafe.OneLine(string(phase), 0), termsafe.OneLine(p.Status.Progress, 0))
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
		line += fmt.Sprintf(" Ready=%s %s", termsafe.OneLine(string(ready.Status), 0), termsafe.OneLine(ready.Reason, 0))
		if msg := termsafe.OneLine(ready.Message, 0); msg != "" {
			line += ": " + msg
		}
	}
	if line != r.seen {
		r.seen = line
		_, _ = fmt.Fprintf(r.w, "%s %s\n", clock(now), line)
	}
}

func (r *lineRenderer) tick(time.Time) {}

// screenRenderer redraws the status table in place, as watch(1) does.
type screenRenderer struct {
	w    io.Writer
	last *v1alpha1.Pipeline
}

func (r *screenRenderer) render(p *v1alpha1.Pipeline, now time.Time) {
	r.last = p
	r.tick(now)
}

func (r *screenRenderer) tick(now time.Time) {
	if r.last == nil {
		return
	}
	var buf bytes.Buffer
	buf.WriteString("\x1b[H\x1b[2J") // cursor home, clear the screen
	_, _ = fmt.Fprintf(&buf, "kubectl stepwise watch %s    %s\n\n", termsafe.OneLine(r.last.Name, 0), clock(now))
	if err := PrintStatus(&buf, r.last, now); err != nil {
		return
	}
	_, _ = r.w.Write(buf.Bytes())
}
