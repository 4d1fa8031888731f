package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// TestATriggerAdoptsOnlyWhatTheOperatorMade: a pipeline like an earlier version's (the
// trigger's label and name, no trigger UID) is adopted only when the API server recorded
// the operator as its creator. One an editor of the namespace wrote the same way is never
// the trigger's: it would count against the trigger's failure budget or stand for its
// node. Its node waits, saying why, and the forgery keeps no trigger UID.
func TestATriggerAdoptsOnlyWhatTheOperatorMade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	triggerRetirer(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, retireTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	trig, err := client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, "retirer", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	legacyOf := func(node string) *v1alpha1.Pipeline {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		p := rules.PipelineFor(trig, n, map[string]string{"node": node, "pool": ns})
		delete(p.Labels, v1alpha1.LabelTriggerUID) // as before the label existed
		p.Finalizers = nil
		p.Spec.Suspend = true // nothing to run: only whose it is matters
		return p
	}
	ours, forged := poolNode(t, ns), poolNode(t, ns)
	// The operator's own identity: in these tests it acts with the admin's credentials.
	made, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, legacyOf(ours), metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"system:masters"}}
	mallory := clientset.NewForConfigOrDie(cfg)
	forgery, err := mallory.StepwiseV1alpha1().Pipelines(ns).Create(ctx, legacyOf(forged), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "mallory", forgery.Annotations[v1alpha1.AnnotationCreatedBy], "the admission policy records the creator")
	require.NotEqual(t, made.Annotations[v1alpha1.AnnotationCreatedBy], forgery.Annotations[v1alpha1.AnnotationCreatedBy])

	labelForRetirement(t, ours)
	labelForRetirement(t, forged)
	waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return slices.Contains(tr.Status.Queue, forged)
	})
	adopted, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, made.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(trig.UID), adopted.Labels[v1alpha1.LabelTriggerUID], "the operator's own is adopted")
	left, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, forgery.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, left.Labels, v1alpha1.LabelTriggerUID, "the forgery is not the trigger's")
}
