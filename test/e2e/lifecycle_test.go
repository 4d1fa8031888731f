package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestEditOfAStartedPipelineIsRefusedAtAdmission: by default the API server refuses an
// edit of a pipeline's steps and says how to run it again; suspend still changes.
func TestEditOfAStartedPipelineIsRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns)
	_, err := client.Create(t.Context(), recordPipeline(ns, "once", "runner", recordStep("only", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitPipeline(t, ns, "once", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	assert.Equal(t, v1alpha1.UpdateImmutable, p.Spec.UpdatePolicy, "the default")

	p.Spec.Steps[0].Timeout = &metav1.Duration{Duration: time.Hour}
	_, err = client.Update(t.Context(), p, metav1.UpdateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "kubectl stepwise rerun")

	_, err = client.Patch(t.Context(), "once", "application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
	require.NoError(t, err, "suspend may change")
	assert.Equal(t, []string{"only/PreCreate", "only/Create", "only/PostCreate"}, recordedCalls(t, ns, "stepwise-record-once"), "nothing ran again")
}

// TestRemovedStepIsTornDownUnderRerunPolicy: a declarative pipeline loses a step; the
// step's run is torn down from its record before the steps run again.
func TestRemovedStepIsTornDownUnderRerunPolicy(t *testing.T) {
	t.Parallel()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns)
	p := recordPipeline(ns, "declared", "runner", recordStep("keep", nil), recordStep("drop", nil))
	p.Spec.UpdatePolicy = v1alpha1.UpdateRerun
	_, err := client.Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	p = waitPipeline(t, ns, "declared", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	require.NotNil(t, p.Status.Steps[1].Ran, "the step's run is recorded")

	p.Spec.Steps = p.Spec.Steps[:1]
	_, err = client.Update(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "declared", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return p.Status.ObservedGeneration == 2 && p.Status.Phase == v1alpha1.PipelineSucceeded && len(p.Status.RetiredSteps) == 0
	})
	assert.Equal(t, []string{
		"keep/PreCreate", "keep/Create", "keep/PostCreate", "drop/PreCreate", "drop/Create", "drop/PostCreate",
		"drop/PreDelete", "drop/Delete", "drop/PostDelete", "keep/PreCreate", "keep/Create", "keep/PostCreate",
	}, recordedCalls(t, ns, "stepwise-record-declared"))
}

// TestPipelinesThatNeverRanCreateDeleteAtOnce: pipelines whose ServiceAccount lacks the
// rights their first step needs fail PreCreate with Forbidden; deleting them runs no
// teardown (it would fail Forbidden too) and leaves no finalizer.
func TestPipelinesThatNeverRanCreateDeleteAtOnce(t *testing.T) {
	t.Parallel()
	const n = 20
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "powerless", false)
	client := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns)
	for i := range n {
		_, err := client.Create(t.Context(), recordPipeline(ns, fmt.Sprintf("denied-%d", i), "powerless", recordStep("first", nil)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range n {
		p := waitPipeline(t, ns, fmt.Sprintf("denied-%d", i), time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
		require.Equal(t, string(v1alpha1.HookPreCreate), string(p.Status.Steps[0].Hook))
		require.Nil(t, p.Status.Steps[0].Ran)
	}
	require.NoError(t, client.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}))
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	require.NoError(t, err, "the pipelines went away; operator log: %s", operator.Log)
}

// TestNamespaceDeletionIsNotHeldByATeardownThatCannotRun: a pipeline whose step ran is in a
// namespace being deleted; its ServiceAccount's RoleBinding goes first, so its teardown
// fails Forbidden. The teardown is skipped with an Event, and the namespace goes away.
func TestNamespaceDeletionIsNotHeldByATeardownThatCannotRun(t *testing.T) {
	t.Parallel()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns)
	_, err := client.Create(t.Context(), recordPipeline(ns, "stays", "runner", recordStep("only", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "stays", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })

	// The rights go before the pipeline, as the namespace controller may order it.
	require.NoError(t, cluster.Client.RbacV1().RoleBindings(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(t, cluster.Client.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cluster.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "namespace %s is gone; operator log: %s", ns, operator.Log)
}
