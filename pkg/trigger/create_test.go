package trigger

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// refuseCreate makes the API server refuse, with the error refusal makes, the create of
// the pipeline of the object named object while refusing is true.
func refuseCreate(f *fixture, object string, refusal func(p *v1alpha1.Pipeline) error, refusing *atomic.Bool) {
	f.client.PrependReactor("create", "pipelines", func(action clienttesting.Action) (bool, runtime.Object, error) {
		p := action.(clienttesting.CreateAction).GetObject().(*v1alpha1.Pipeline)
		if !refusing.Load() || p.Annotations[v1alpha1.AnnotationObject] != object {
			return false, nil, nil
		}
		return true, nil, refusal(p)
	})
}

// syncForError runs one reconcile of trigger ns/name as fixture.sync does, but returns
// its error rather than failing the test on one.
func syncForError(f *fixture, name string) error {
	f.t.Helper()
	_, err := f.syncOnce(keyOf(name))
	f.refresh()
	return err
}

var pipelinesResource = schema.GroupResource{Group: v1alpha1.SchemeGroupVersion.Group, Resource: "pipelines"}

// TestCreateRefusedForOneObject: when the API server refuses the pipeline of one object
// (an admission policy on its params, a name it finds invalid), that object waits with the
// refusal in the trigger's status and a Warning Event, without taking a place in the
// budget, and the other objects start; the sync succeeds and is not retried at once. The
// object is tried again when there is a place for it, and starts once the refusal is
// lifted.
func TestCreateRefusedForOneObject(t *testing.T) {
	tests := []struct {
		name    string
		refusal func(p *v1alpha1.Pipeline) error
		want    string
	}{
		{
			name: "admission policy: Invalid",
			refusal: func(p *v1alpha1.Pipeline) error {
				return apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind("Pipeline").GroupKind(), p.Name, field.ErrorList{
					field.Invalid(field.NewPath("spec", "params", "node"), p.Spec.Params["node"], "nodes named a are not retired by triggers"),
				})
			},
			want: "nodes named a are not retired by triggers",
		},
		{
			name: "admission webhook: Forbidden",
			refusal: func(p *v1alpha1.Pipeline) error {
				return apierrors.NewForbidden(pipelinesResource, p.Name, errors.New("denied by webhook retire-guard"))
			},
			want: "denied by webhook retire-guard",
		},
		{
			name: "a webhook's endless message: bounded in the status and the Event",
			refusal: func(p *v1alpha1.Pipeline) error {
				return apierrors.NewForbidden(pipelinesResource, p.Name, errors.New("denied: "+strings.Repeat("because ", 100000)))
			},
			want: "is forbidden: denied: because",
		},
		{
			name: "too large",
			refusal: func(*v1alpha1.Pipeline) error {
				return apierrors.NewRequestEntityTooLargeError("limit is 3145728")
			},
			want: "limit is 3145728",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, c := triggertest.Node("a", 0, retiring), triggertest.Node("b", time.Second, retiring), triggertest.Node("c", 2*time.Second, retiring)
			trig := triggertest.Trigger()
			trig.Spec.Concurrency = 2
			f := newFixture(t, objs(trig, newTemplate("retire-node"), a, b, c))
			var refusing atomic.Bool
			refusing.Store(true)
			refuseCreate(f, "a", tt.refusal, &refusing)

			requeue := f.sync("retire")
			assert.ElementsMatch(t, []string{rules.PipelineName("retire", "b", b.GetUID()), rules.PipelineName("retire", "c", c.GetUID())},
				f.pipelineNames(), "a takes no place: b and c start")
			assert.Positive(t, requeue)
			assert.LessOrEqual(t, requeue, DefaultAccessTTL, "looked at again within the TTL, not at once")
			got := f.trigger("retire")
			assert.Equal(t, int32(2), got.Status.Running)
			assert.Equal(t, int32(1), got.Status.Waiting)
			assert.Equal(t, []string{"a"}, got.Status.Queue)
			ready := readyOf(got)
			assert.Equal(t, metav1.ConditionTrue, ready.Status)
			assert.Contains(t, ready.Message, "a cannot start: create pipeline ns/"+rules.PipelineName("retire", "a", a.GetUID())+" for a: ")
			assert.Contains(t, ready.Message, tt.want)
			events := f.events()
			require.Len(t, events, 1, "b and c start without an Event; a's refusal is one")
			assert.Contains(t, events[0], "Warning Waiting a waits: create pipeline")
			assert.Contains(t, events[0], tt.want)
			assert.LessOrEqual(t, len(events[0]), 2*maxMessage)
			assert.LessOrEqual(t, len(ready.Message), maxMessage)

			// b finishes: a is tried in the place that frees, and refused again; at the
			// next sync too, which reports nothing new and leaves the status as it is.
			f.finish("retire", b)
			f.sync("retire")
			assert.Contains(t, readyOf(f.trigger("retire")).Message, "a cannot start")
			f.client.ClearActions()
			f.sync("retire")
			assert.Equal(t, []string{"create pipelines"}, f.writes(), "tried again, refused, no status write")
			assert.Empty(t, f.events(), "reported once while it waits")

			// Lifted: a starts like any other.
			refusing.Store(false)
			f.sync("retire")
			f.pipelineFor("retire", a)
			got = f.trigger("retire")
			assert.Empty(t, got.Status.Queue)
			assert.NotContains(t, readyOf(got).Message, "cannot start")
		})
	}
}

// TestCreateFailingForTheServer: an error that is about the API server rather than the
// object (overloaded, timing out, unreachable, or the sync's context ending) fails the sync,
// so that the trigger is retried with backoff and nothing is recorded against the object.
func TestCreateFailingForTheServer(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{name: "server timeout", err: apierrors.NewServerTimeout(pipelinesResource, "create", 1), check: apierrors.IsServerTimeout},
		{name: "too many requests", err: apierrors.NewTooManyRequests("slow down", 1), check: apierrors.IsTooManyRequests},
		{name: "internal error", err: apierrors.NewInternalError(errors.New("etcd is down")), check: apierrors.IsInternalError},
		{name: "service unavailable", err: apierrors.NewServiceUnavailable("shutting down"), check: apierrors.IsServiceUnavailable},
		{name: "timeout", err: apierrors.NewTimeoutError("request did not complete", 1), check: apierrors.IsTimeout},
		{name: "unauthorized: the operator's own credentials", err: apierrors.NewUnauthorized("token expired"), check: apierrors.IsUnauthorized},
		{name: "unreachable", err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused"), check: func(err error) bool {
			return !errors.As(err, new(apierrors.APIStatus))
		}},
		{name: "context ended", err: context.DeadlineExceeded, check: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := triggertest.Node("a", 0, retiring), triggertest.Node("b", time.Second, retiring)
			trig := triggertest.Trigger()
			trig.Spec.Concurrency = 2
			f := newFixture(t, objs(trig, newTemplate("retire-node"), a, b))
			var refusing atomic.Bool
			refusing.Store(true)
			refuseCreate(f, "a", func(*v1alpha1.Pipeline) error { return tt.err }, &refusing)

			err := syncForError(f, "retire")
			require.Error(t, err)
			assert.True(t, tt.check(err), "the cause is kept: %v", err)
			assert.Contains(t, err.Error(), "create pipeline ns/"+rules.PipelineName("retire", "a", a.GetUID())+" for a")
			assert.Empty(t, f.pipelineList(), "the sync stops at the server's failure")
			assert.Empty(t, f.events(), "nothing is recorded against the object")

			refusing.Store(false)
			f.sync("retire")
			assert.Len(t, f.pipelineList(), 2, "the retry starts both")
		})
	}
}
