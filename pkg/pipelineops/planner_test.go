package pipelineops

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops/plantest"
)

// toPlan is the dry run of a one-step pipeline named name.
func toPlan(name string) *v1alpha1.Pipeline {
	return DryRunOf(&v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{{Name: "cordon", Executor: "node.cordon"}}},
	}, name)
}

// planned answers as the operator does for a dry run it planned.
func planned(p *v1alpha1.Pipeline) {
	p.Status.ObservedGeneration = p.Generation
	p.Status.Phase = v1alpha1.PipelinePlanned
	p.Status.Steps = []v1alpha1.StepStatus{{Name: "cordon", Executor: "node.cordon", Phase: v1alpha1.StepPlanned,
		Plan: &v1alpha1.StepPlan{Summary: "cordon node " + p.Spec.Params["node"]}}}
}

// answerWith sets p's Ready condition as the operator would, settled.
func answerWith(phase v1alpha1.PipelinePhase, reason, message string, steps ...v1alpha1.StepStatus) func(p *v1alpha1.Pipeline) {
	return func(p *v1alpha1.Pipeline) {
		p.Status.ObservedGeneration = p.Generation
		p.Status.Phase = phase
		p.Status.Steps = steps
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}}
	}
}

// plansLeft are the names of the dry-run pipelines in namespace demo.
func plansLeft(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	list, err := c.StepwiseV1alpha1().Pipelines("demo").List(context.Background(), metav1.ListOptions{LabelSelector: PlanLabel + "=true"})
	require.NoError(t, err)
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

func TestPlannerPlan(t *testing.T) {
	tests := []struct {
		name      string
		pipelines []*v1alpha1.Pipeline
		// objs are in the cluster before; prepare adds reactors to the clientset.
		objs    []runtime.Object
		prepare func(c *fake.Clientset)
		answer  func(p *v1alpha1.Pipeline)
		timeout time.Duration
		// wantPhases are the phases of the plans returned, in order; wantErr the error.
		wantPhases  []v1alpha1.PipelinePhase
		wantErr     string
		wantCreated []string
	}{
		{
			name: "one pipeline", pipelines: []*v1alpha1.Pipeline{toPlan("retire")}, answer: planned,
			wantPhases: []v1alpha1.PipelinePhase{v1alpha1.PipelinePlanned}, wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "several, in order", pipelines: []*v1alpha1.Pipeline{toPlan("a"), toPlan("b"), toPlan("c")}, answer: planned,
			wantPhases:  []v1alpha1.PipelinePhase{v1alpha1.PipelinePlanned, v1alpha1.PipelinePlanned, v1alpha1.PipelinePlanned},
			wantCreated: []string{"plan-a-00000", "plan-b-00001", "plan-c-00002"},
		},
		{
			name: "a failed plan is a plan", pipelines: []*v1alpha1.Pipeline{toPlan("retire")},
			answer:     answerWith(v1alpha1.PipelineFailed, "StepFailed", "step cordon cannot be planned: forbidden"),
			wantPhases: []v1alpha1.PipelinePhase{v1alpha1.PipelineFailed}, wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "another plan of the namespace, failed, ends no wait", pipelines: []*v1alpha1.Pipeline{toPlan("retire")}, answer: planned,
			objs: []runtime.Object{&v1alpha1.Pipeline{
				ObjectMeta: metav1.ObjectMeta{Name: "plan-other-x", Namespace: "demo", Labels: map[string]string{PlanLabel: "true"}},
				Spec:       v1alpha1.PipelineSpec{DryRun: true},
				Status:     v1alpha1.PipelineStatus{Phase: v1alpha1.PipelineFailed},
			}},
			wantPhases: []v1alpha1.PipelinePhase{v1alpha1.PipelinePlanned}, wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "no answer in time", pipelines: []*v1alpha1.Pipeline{toPlan("retire")}, timeout: 200 * time.Millisecond,
			wantErr:     "no plan after 200ms: dry-run pipeline demo/plan-retire-00000 is still Pending (is the operator running, and recent enough to plan?)",
			wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "an answer for an older spec is none", pipelines: []*v1alpha1.Pipeline{toPlan("retire")}, timeout: 200 * time.Millisecond,
			answer: func(p *v1alpha1.Pipeline) {
				planned(p)
				p.Generation, p.Status.ObservedGeneration = 2, 1
			},
			wantErr:     "no plan after 200ms: dry-run pipeline demo/plan-retire-00000 is still Planned",
			wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "an operator that ran a step", pipelines: []*v1alpha1.Pipeline{toPlan("retire")},
			answer: answerWith(v1alpha1.PipelineRunning, "StepRunning", "step cordon",
				v1alpha1.StepStatus{Name: "cordon", Phase: v1alpha1.StepSucceeded, Ran: &v1alpha1.StepRun{Executor: "node.cordon"}}),
			wantErr:     "the operator ran step cordon of dry-run pipeline demo/plan-retire-00000 instead of planning it: it predates dry runs (upgrade Stepwise)",
			wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "an operator that ran it all", pipelines: []*v1alpha1.Pipeline{toPlan("retire")},
			answer:      answerWith(v1alpha1.PipelineSucceeded, "Succeeded", "done"),
			wantErr:     "the operator ran dry-run pipeline demo/plan-retire-00000 instead of planning it: it predates dry runs (upgrade Stepwise)",
			wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "a template that does not exist", pipelines: []*v1alpha1.Pipeline{toPlan("retire")},
			answer:      answerWith(v1alpha1.PipelinePending, v1alpha1.ReasonTemplateNotFound, `template "gone" not found`),
			wantErr:     `dry-run pipeline demo/plan-retire-00000: template "gone" not found`,
			wantCreated: []string{"plan-retire-00000"},
		},
		{
			name: "an API server that drops spec.dryRun", pipelines: []*v1alpha1.Pipeline{toPlan("retire")},
			prepare: func(c *fake.Clientset) {
				c.PrependReactor("create", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
					p := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Pipeline).DeepCopy()
					p.Name, p.Spec.DryRun = "plan-retire-old", false // an old CRD prunes the field
					return true, p, c.Tracker().Create(v1alpha1.SchemeGroupVersion.WithResource("pipelines"), p, p.Namespace)
				})
			},
			wantErr:     "the API server dropped spec.dryRun of pipeline demo/plan-retire-old: its Pipeline CRD predates dry runs (upgrade Stepwise)",
			wantCreated: []string{"plan-retire-old"},
		},
		{
			name: "a create refused", pipelines: []*v1alpha1.Pipeline{toPlan("retire")},
			prepare: func(c *fake.Clientset) {
				c.PrependReactor("create", "pipelines", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("forbidden")
				})
			},
			wantErr: "create a dry-run pipeline in demo: forbidden",
		},
		{
			name: "a pipeline deleted before it was planned", pipelines: []*v1alpha1.Pipeline{toPlan("retire")},
			prepare: func(c *fake.Clientset) {
				c.PrependReactor("create", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
					p := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Pipeline).DeepCopy()
					p.Name = "plan-retire-gone" // created, and gone before the first list
					return true, p, nil
				})
			},
			wantErr:     "dry-run pipeline demo/plan-retire-gone was deleted before it was planned",
			wantCreated: []string{"plan-retire-gone"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeClientset(tt.objs...)
			plantest.NewOperator(t, c, tt.answer)
			if tt.prepare != nil {
				tt.prepare(c)
			}
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			pl := NewPlanner(c, "demo")
			got, err := pl.Plan(context.Background(), tt.pipelines, timeout)
			var created []string
			for _, p := range pl.Created() {
				created = append(created, p.Name)
				assert.Equal(t, "demo", p.Namespace)
			}
			assert.Equal(t, tt.wantCreated, created, "what Delete is to delete")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, len(tt.wantPhases))
			for i, p := range got {
				assert.Equal(t, tt.wantPhases[i], p.Status.Phase)
				assert.Equal(t, created[i], p.Name, "the plans in the order of the pipelines")
				assert.True(t, p.Spec.DryRun)
			}
		})
	}
}

func TestPlannerPlanInterrupted(t *testing.T) {
	c := fakeClientset()
	plantest.NewOperator(t, c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := NewPlanner(c, "demo").Plan(ctx, []*v1alpha1.Pipeline{toPlan("retire")}, time.Minute)
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, "interrupted while dry-run pipeline demo/plan-retire-00000 is Pending: context canceled")
}

func TestPlannerDelete(t *testing.T) {
	tests := []struct {
		name string
		// prepare adds reactors to the clientset once the plans are made.
		prepare  func(c *fake.Clientset)
		wantErr  []string
		wantLeft []string
	}{
		{name: "every dry run"},
		{
			name: "one already gone",
			prepare: func(c *fake.Clientset) {
				// Through the tracker: no delete action of the client's.
				require.NoError(t, c.Tracker().Delete(v1alpha1.SchemeGroupVersion.WithResource("pipelines"), "demo", "plan-b-00001"))
			},
		},
		{
			name: "the others deleted when one cannot be",
			prepare: func(c *fake.Clientset) {
				c.PrependReactor("delete", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
					if action.(k8stesting.DeleteAction).GetName() != "plan-a-00000" {
						return false, nil, nil
					}
					return true, nil, errors.New("forbidden")
				})
			},
			wantErr:  []string{"delete dry-run pipeline demo/plan-a-00000: forbidden"},
			wantLeft: []string{"plan-a-00000"},
		},
		{
			name: "two that cannot be: an error each",
			prepare: func(c *fake.Clientset) {
				c.PrependReactor("delete", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, fmt.Errorf("cannot delete %s", action.(k8stesting.DeleteAction).GetName())
				})
			},
			wantErr: []string{
				"delete dry-run pipeline demo/plan-a-00000: cannot delete plan-a-00000",
				"delete dry-run pipeline demo/plan-b-00001: cannot delete plan-b-00001",
			},
			wantLeft: []string{"plan-a-00000", "plan-b-00001"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeClientset()
			plantest.NewOperator(t, c, planned)
			// The API server gives each pipeline a UID, which the fake clientset does not.
			c.PrependReactor("create", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
				p := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Pipeline)
				p.UID = types.UID("uid-" + p.GenerateName)
				return false, nil, nil
			})
			pl := NewPlanner(c, "demo")
			_, err := pl.Plan(context.Background(), []*v1alpha1.Pipeline{toPlan("a"), toPlan("b")}, 10*time.Second)
			require.NoError(t, err)
			if tt.prepare != nil {
				tt.prepare(c)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // deleting outlives the caller's context: Ctrl-C does not leave the plans behind

			err = pl.Delete(ctx)
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				joined, ok := err.(interface{ Unwrap() []error })
				require.True(t, ok, "errors joined: %v", err)
				var msgs []string
				for _, e := range joined.Unwrap() {
					msgs = append(msgs, e.Error())
				}
				assert.Equal(t, tt.wantErr, msgs, "one error a pipeline")
			}
			assert.Equal(t, tt.wantLeft, plansLeft(t, c))
			deletes := 0
			for _, a := range c.Actions() {
				if d, ok := a.(k8stesting.DeleteActionImpl); ok {
					deletes++
					require.NotNil(t, d.DeleteOptions.Preconditions, "only the pipeline it created")
					generateName := d.Name[:len(d.Name)-len("00000")]
					assert.Equal(t, types.UID("uid-"+generateName), *d.DeleteOptions.Preconditions.UID)
				}
			}
			assert.Equal(t, 2, deletes, "a delete a pipeline, the one already gone too")
		})
	}
}
