package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestARestingPipelineDeletedWhileTheOperatorIsDownIsTornDown: a finished pipeline rests
// (status.resting), and the operator neither lists nor caches it; deleted while no
// operator runs, it is found by the sweep after the next start, and torn down from its run
// records. Its neighbour, left alone, stays at rest.
func TestARestingPipelineDeletedWhileTheOperatorIsDownIsTornDown(t *testing.T) {
	// Not parallel: it stops the shared operator.
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	for _, name := range []string{"deleted", "kept"} {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, name, "runner", recordStep("only", nil)), metav1.CreateOptions{})
		require.NoError(t, err)
		waitPipeline(t, ns, name, time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Resting == v1alpha1.PipelineSucceeded })
	}
	resting, err := client.StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{FieldSelector: v1alpha1.FieldResting + "=Succeeded"})
	require.NoError(t, err)
	assert.Len(t, resting.Items, 2, "status.resting is a selectable field")

	if err := operator.Stop(); err != nil {
		t.Logf("stop operator: %v", err) // it may exit non-zero on SIGTERM; replaced below
	}
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}))
	operator, err = cluster.StartOperator(pluginArgs()...)
	require.NoError(t, err)

	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "deleted", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the pipeline deleted while the operator was down was not torn down; operator log %s", operator.Log)
	assert.Equal(t, []string{"only/PreCreate", "only/Create", "only/PostCreate", "only/PreDelete", "only/Delete", "only/PostDelete"},
		recordedCalls(t, ns, "stepwise-record-deleted"), "torn down from its run record")
	kept, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.PipelineSucceeded, kept.Status.Resting, "left at rest")
	// The log is flushed every few seconds.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(operator.Log)
		return err == nil && strings.Contains(string(log), `"Woke resting pipelines that changed while unwatched"`), nil
	})
	assert.NoError(t, err, "the sweep found it; operator log %s", operator.Log)
}
