package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

var webAppResource = schema.GroupVersionResource{Group: "demo.stepwise.dev", Version: "v1alpha1", Resource: "webapps"}

// webAppPipeline waits for the one pipeline the trigger "webapps" keeps for the WebApp
// and returns it once cond holds.
func webAppPipeline(t *testing.T, ns string, cond func(*v1alpha1.Pipeline) bool) *v1alpha1.Pipeline {
	t.Helper()
	var last *v1alpha1.Pipeline
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).List(ctx, metav1.ListOptions{LabelSelector: "stepwise.dev/trigger=webapps"})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		last = &list.Items[0]
		return cond(last), nil
	})
	require.NoError(t, err, "last: %+v; operator log: %s", pipelineStatus(last), operator.Log)
	return last
}

// TestWebAppTriggerKeepsDeploymentAndService runs examples/webapp-crd.yaml: creating a
// WebApp makes its Deployment and Service, changing its replicas re-runs its pipeline and
// the Deployment follows, and deleting it removes the Service, then the Deployment, and
// the pipeline.
func TestWebAppTriggerKeepsDeploymentAndService(t *testing.T) {
	const ns = "webapps"
	ctx := t.Context()
	webappNode(t)
	out, err := kubectl(t, "apply", "-f", filepath.Join("..", "..", "examples", "webapp-crd.yaml"))
	require.NoError(t, err, out)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cluster.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	webapps := dyn.Resource(webAppResource).Namespace(ns)
	// The CRD is new: the API server serves it once it is established.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := webapps.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "demo.stepwise.dev/v1alpha1", "kind": "WebApp",
			"metadata": map[string]any{"name": "shop"},
			"spec":     map[string]any{"image": "nginx:1.27", "replicas": int64(2)},
		}}, metav1.CreateOptions{})
		return err == nil, nil
	}))

	first := webAppPipeline(t, ns, func(p *v1alpha1.Pipeline) bool { return p.Ready() })
	assert.Equal(t, map[string]string{"name": "shop", "image": "nginx:1.27", "replicas": "2"}, first.Spec.Params)
	deploy, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), *deploy.Spec.Replicas)
	_, err = cluster.Client.CoreV1().Services(ns).Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)

	// Change the replicas: the pipeline's params follow and it runs again.
	_, err = webapps.Patch(ctx, "shop", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	webAppPipeline(t, ns, func(p *v1alpha1.Pipeline) bool {
		return p.Spec.Params["replicas"] == "3" && p.Ready() && p.Status.ObservedGeneration == p.Generation
	})
	deploy, err = cluster.Client.AppsV1().Deployments(ns).Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(3), *deploy.Spec.Replicas, "the Deployment follows the WebApp")

	// Delete the WebApp: its pipeline goes, and its teardown removes the Service, then
	// the Deployment.
	deployments := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns)
	services := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).Namespace(ns)
	deploymentGone := watchDeletion(t, deployments, "shop")
	serviceGone := watchDeletion(t, services, "shop")
	require.NoError(t, webapps.Delete(ctx, "shop", metav1.DeleteOptions{}))
	svc, dep := serviceGone(), deploymentGone()
	assert.Less(t, svc.gone, dep.started, "the Service was gone before the Deployment's deletion started")
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Get(ctx, first.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}), "the pipeline is gone")
}
