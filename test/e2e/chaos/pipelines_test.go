package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// The steps of every pipeline of the suite: three that record each hook they run (test.record),
// the plugin step between, and a gate in the third so that kills land mid-run.
const (
	stepPrepare = "prepare"
	stepGreet   = "greet"
	stepGated   = "gated"
	stepFinish  = "finish"
	gatedIndex  = 2
	runnerSA    = "runner"
)

// recordingSteps are the steps that record their hooks, in pipeline order.
var recordingSteps = []string{stepPrepare, stepGated, stepFinish}

var (
	createHooks   = []v1alpha1.Hook{v1alpha1.HookPreCreate, v1alpha1.HookCreate, v1alpha1.HookPostCreate}
	teardownHooks = []v1alpha1.Hook{v1alpha1.HookPreDelete, v1alpha1.HookDelete, v1alpha1.HookPostDelete}
)

// gatePoll is the line test.record writes on every look at a closed gate: those repeat by
// design and are not counted as re-runs.
var gatePoll = stepGated + "/" + string(v1alpha1.HookCreate)

func chaosPipeline(ns, name string) *v1alpha1.Pipeline {
	return &v1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.PipelineSpec{ServiceAccountName: runnerSA, Steps: []v1alpha1.Step{
			{Name: stepPrepare, Executor: "test.record"},
			{Name: stepGreet, Executor: "example.greet", With: map[string]string{"name": name}},
			{Name: stepGated, Executor: "test.record", With: map[string]string{
				"gate": "true", "output": "$(steps." + stepGreet + ".outputs.greeting)",
			}},
			{Name: stepFinish, Executor: "test.record"},
		}},
	}
}

func recordConfigMap(name string) string { return "stepwise-record-" + name }

// tenant is a namespace whose ServiceAccount runner may do what test.record does.
func tenant(t *testing.T) string {
	t.Helper()
	ns := cluster.CreateNamespace(t)
	cluster.ServiceAccount(t, ns, runnerSA, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"},
	})
	return ns
}

// pipelineRef is one pipeline of the suite.
type pipelineRef struct {
	phase    string
	ns, name string
	// created is when the suite created it; gateOpened when it opened its gate.
	created, gateOpened time.Time
}

func (p *pipelineRef) String() string { return p.ns + "/" + p.name }

// suite holds the clients and every pipeline made.
type suite struct {
	t         *testing.T
	client    clientset.Interface
	fleet     *fleet
	pipelines []*pipelineRef
	// createLines counts the create hook runs in each record once the pipeline was Ready.
	createLines map[*pipelineRef]int
	// notReady are the pipelines reported as not Ready: their record is not checked for
	// what a Ready pipeline must show.
	notReady map[*pipelineRef]bool
}

func newSuite(t *testing.T, f *fleet) *suite {
	client, err := clientset.NewForConfig(cluster.Config)
	require.NoError(t, err)
	return &suite{t: t, client: client, fleet: f}
}

// create creates a pipeline, retrying while the API server is unreachable.
func (s *suite) create(ctx context.Context, phase, ns, name string) (*pipelineRef, error) {
	p := &pipelineRef{phase: phase, ns: ns, name: name}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := s.client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, chaosPipeline(ns, name), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return true, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("create pipeline %s/%s: %w", ns, name, err)
	}
	p.created = time.Now()
	s.pipelines = append(s.pipelines, p)
	return p, nil
}

// openGate lets the gated step of p go on: it sets the key test.record's gate waits for in
// the pipeline's ConfigMap, creating the ConfigMap if no hook has yet.
func (s *suite) openGate(ctx context.Context, p *pipelineRef) error {
	if !p.gateOpened.IsZero() {
		return nil
	}
	cms := cluster.Client.CoreV1().ConfigMaps(p.ns)
	key := "open." + stepGated
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm, err := cms.Get(ctx, recordConfigMap(p.name), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = cms.Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: recordConfigMap(p.name)}, Data: map[string]string{key: "yes"},
				}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(corev1.Resource("configmaps"), recordConfigMap(p.name), err)
				}
				return err
			}
			if err != nil {
				return err
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[key] = "yes"
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
		return err == nil, nil // unreachable API server: try again until the deadline
	})
	if err != nil {
		return fmt.Errorf("open the gate of %s: %w", p, err)
	}
	p.gateOpened = time.Now()
	return nil
}

// awaitRecord waits, up to timeout, until p's record holds line, watching its ConfigMap so
// as to act within milliseconds of the hook: it reports whether it saw it.
func awaitRecord(ctx context.Context, p *pipelineRef, line string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for ctx.Err() == nil {
		w, err := cluster.Client.CoreV1().ConfigMaps(p.ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + recordConfigMap(p.name),
		})
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		for e := range w.ResultChan() {
			if cm, ok := e.Object.(*corev1.ConfigMap); ok && slices.Contains(strings.Split(cm.Data["calls"], "\n"), line) {
				w.Stop()
				return true
			}
		}
		w.Stop()
	}
	return false
}

// get reads a pipeline; nil when it cannot be read now.
func (s *suite) get(ctx context.Context, p *pipelineRef) *v1alpha1.Pipeline {
	got, err := s.client.StepwiseV1alpha1().Pipelines(p.ns).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return got
}

func atGate(p *v1alpha1.Pipeline) bool {
	if len(p.Status.Steps) <= gatedIndex {
		return false
	}
	s := p.Status.Steps[gatedIndex]
	return s.Name == stepGated && s.Phase == v1alpha1.StepRunning && s.Hook == v1alpha1.HookCreate
}

func pastGate(p *v1alpha1.Pipeline) bool {
	return len(p.Status.Steps) > gatedIndex && p.Status.Steps[gatedIndex].Phase == v1alpha1.StepSucceeded
}

func succeeded(p *v1alpha1.Pipeline) bool {
	return p.Status.Phase == v1alpha1.PipelineSucceeded && p.Ready()
}

// waitAll waits, up to timeout, until cond holds for every pipeline of ps, and returns
// those for which it did not, with their last status.
func (s *suite) waitAll(ctx context.Context, ps []*pipelineRef, timeout time.Duration, cond func(*v1alpha1.Pipeline) bool) map[*pipelineRef]*v1alpha1.Pipeline {
	last := map[*pipelineRef]*v1alpha1.Pipeline{}
	pending := slices.Clone(ps)
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pending = slices.DeleteFunc(pending, func(p *pipelineRef) bool {
			got := s.get(ctx, p)
			if got != nil {
				last[p] = got
			}
			return got != nil && cond(got)
		})
		return len(pending) == 0, nil
	})
	out := map[*pipelineRef]*v1alpha1.Pipeline{}
	for _, p := range pending {
		out[p] = last[p]
	}
	return out
}

// waitGone waits, up to timeout, until every pipeline of ps is gone, and returns those
// left with their last state.
func (s *suite) waitGone(ctx context.Context, ps []*pipelineRef, timeout time.Duration) map[*pipelineRef]*v1alpha1.Pipeline {
	last := map[*pipelineRef]*v1alpha1.Pipeline{}
	pending := slices.Clone(ps)
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pending = slices.DeleteFunc(pending, func(p *pipelineRef) bool {
			got, err := s.client.StepwiseV1alpha1().Pipelines(p.ns).Get(ctx, p.name, metav1.GetOptions{})
			if err == nil {
				last[p] = got
			}
			return apierrors.IsNotFound(err)
		})
		return len(pending) == 0, nil
	})
	out := map[*pipelineRef]*v1alpha1.Pipeline{}
	for _, p := range pending {
		out[p] = last[p]
	}
	return out
}

// describe says where a pipeline is, for failure messages.
func describe(p *v1alpha1.Pipeline) string {
	if p == nil {
		return "(never read)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s step=%s progress=%s finalizers=%v deleting=%v", p.Status.Phase, p.Status.CurrentStep, p.Status.Progress,
		p.Finalizers, p.DeletionTimestamp != nil)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, s := range p.Status.Steps {
		fmt.Fprintf(&b, "\n    %s: phase=%s hook=%s attempts=%d message=%q", s.Name, s.Phase, s.Hook, s.Attempts, s.Message)
	}
	return b.String()
}

// calls reads what test.record wrote for p: "STEP/HOOK" per hook run, in order.
func calls(ctx context.Context, p *pipelineRef) ([]string, error) {
	cm, err := cluster.Client.CoreV1().ConfigMaps(p.ns).Get(ctx, recordConfigMap(p.name), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if cm.Data["calls"] == "" {
		return nil, nil
	}
	return strings.Split(cm.Data["calls"], "\n"), nil
}

// expectedHooks lists STEP/HOOK for steps in the order given, each with hooks.
func expectedHooks(steps []string, hooks []v1alpha1.Hook) []string {
	var out []string
	for _, s := range steps {
		for _, h := range hooks {
			out = append(out, s+"/"+string(h))
		}
	}
	return out
}

// checkOrder checks that every hook of want ran (is in lines) and that their first runs
// come in the order of want; it returns what is wrong.
func checkOrder(lines, want []string) []string {
	var problems []string
	prev, prevHook := -1, ""
	for _, h := range want {
		i := slices.Index(lines, h)
		if i < 0 {
			problems = append(problems, fmt.Sprintf("%s never ran", h))
			continue
		}
		if i < prev {
			problems = append(problems, fmt.Sprintf("the first %s (line %d) comes before the first %s (line %d)", h, i+1, prevHook, prev+1))
		}
		prev, prevHook = i, h
	}
	return problems
}

// reruns counts the hook runs of lines beyond the first of each hook in want (the gate's
// polls excepted): the cost of running hooks at least once.
func reruns(lines, want []string) int {
	n := 0
	for _, h := range want {
		if h == gatePoll {
			continue
		}
		if c := framework.Count(lines, h); c > 1 {
			n += c - 1
		}
	}
	return n
}
