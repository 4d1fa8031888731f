package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// failingTemplate retires nothing: its one step fails for good, and what ran is torn down
// (onFailure Teardown), which frees the trigger's place at once.
func failingTemplate(ns string) *v1alpha1.PipelineTemplate {
	return &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-node", Namespace: ns},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params:    []v1alpha1.TemplateParam{{Name: "node", Required: true}, {Name: "pool"}},
			OnFailure: v1alpha1.FailureTeardown,
			Steps:     []v1alpha1.Step{recordStep("drain", map[string]string{"fail": "permanent"})},
		},
	}
}

// TestATriggerStopsItselfWhenEveryRetirementFails: six labelled nodes whose retirements all
// fail (the reproduction: before, all six started and failed within a second, and
// the trigger read Active). With the default failure budget of one and concurrency two,
// the two that start fail, the trigger stops (Ready=False FailureBudgetSpent, naming the
// failure) and starts nothing more; resumed in a person's name, two more start and fail,
// and it stops again.
func TestATriggerStopsItselfWhenEveryRetirementFails(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	triggerRetirer(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, failingTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	for range 6 {
		labelForRetirement(t, poolNode(t, ns))
	}
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, "retirer", 2), metav1.CreateOptions{})
	require.NoError(t, err)

	stopped := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return readyReason(tr) == "False/"+v1alpha1.TriggerReasonFailureBudgetSpent && tr.Status.Running == 0
	})
	assert.Equal(t, int32(0), stopped.Status.FailureBudgetLeft)
	require.Len(t, stopped.Status.Failures, 1)
	started := len(triggerPipelines(t, ns, "retire"))
	assert.LessOrEqual(t, started, 2, "the two that started at once, no more")
	assert.Equal(t, int32(6-started), stopped.Status.Waiting)
	// It stays stopped: a sync after the failures' teardown starts nothing.
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Patch(ctx, "retire", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"nudge":"1"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.ObservedGeneration == tr.Generation && readyReason(tr) == "False/"+v1alpha1.TriggerReasonFailureBudgetSpent
	})
	assert.Len(t, triggerPipelines(t, ns, "retire"), started)

	_, err = pipelineops.ResumeTrigger(ctx, cluster.Client, client, ns, "retire", time.Now())
	require.NoError(t, err)
	again := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Resumed != nil && readyReason(tr) == "False/"+v1alpha1.TriggerReasonFailureBudgetSpent && tr.Status.Running == 0
	})
	assert.Greater(t, len(triggerPipelines(t, ns, "retire")), started, "resumed, it started again")
	assert.LessOrEqual(t, len(triggerPipelines(t, ns, "retire")), started+2)
	require.Len(t, again.Status.Failures, 1)
	counted := again.Status.Failures[0].Pipeline
	for _, p := range triggerPipelines(t, ns, "retire") {
		if p.Name == counted {
			assert.Equal(t, again.Spec.Resume.ID, p.Annotations[v1alpha1.AnnotationResume], "only a pipeline started since the resume counts")
		}
	}
}

// TestOnlyYouMayPauseInYourName: the install's admission policy refuses a pause, or a
// resume, that names another user than the one the API server authenticated.
func TestOnlyYouMayPauseInYourName(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	triggerRetirer(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, failingTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, "retirer", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	as := func(user string) (kubernetes.Interface, clientset.Interface) {
		cfg := rest.CopyConfig(cluster.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
		return kubernetes.NewForConfigOrDie(cfg), clientset.NewForConfigOrDie(cfg)
	}

	_, mallory := as("mallory")
	_, err = mallory.StepwiseV1alpha1().PipelineTriggers(ns).Patch(ctx, "retire", types.MergePatchType,
		[]byte(`{"spec":{"pause":{"by":"alice","reason":"framed"}}}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), "spec.pause.by must be the user who pauses the trigger: mallory")
	_, err = mallory.StepwiseV1alpha1().PipelineTriggers(ns).Patch(ctx, "retire", types.MergePatchType,
		[]byte(`{"spec":{"resume":{"by":"alice","id":"1"}}}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.resume.by must be the user who resumes the trigger: mallory")

	aliceKube, alice := as("alice")
	paused, err := pipelineops.PauseTrigger(ctx, aliceKube, alice, ns, "retire", "INC-42")
	require.NoError(t, err)
	assert.Equal(t, "alice", paused.Spec.Pause.By)
	// Anyone may change something else of a trigger someone paused.
	_, err = mallory.StepwiseV1alpha1().PipelineTriggers(ns).Patch(ctx, "retire", types.MergePatchType,
		[]byte(`{"spec":{"concurrency":2}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Paused != nil && tr.Status.Paused.By == "alice"
	})
}
